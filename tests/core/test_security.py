"""Issue 28's findings on the real stack: secret key, staff sessions, key revocation on websockets,
abuse controls (probe throttle, project quota, rebuild coalescing, bounded session reads)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.contrib.messages import constants
from django.contrib.messages.storage.base import Message
from django.contrib.messages.storage.cookie import CookieStorage
from django.test import Client, RequestFactory, override_settings
from django.utils.safestring import mark_safe
from rest_framework.test import APIClient

from config.asgi import application
from core import graph
from core.auth.secrets import PUBLIC_SECRET_KEYS
from core.models import Job, Project
from core.progress.events import ProgressEvent, publish
from core.services import api_key_revoke
from tests.conftest import Tenant, make_tenant
from tests.support.processes import REPO

OLD_PUBLIC_KEY = "insecure-dev-key-change-me-in-production"


# --- 4. secret key --------------------------------------------------------------------------------


def _django_setup(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "import django; django.setup(); from django.conf import settings; print(len(settings.SECRET_KEY))"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("public", sorted(PUBLIC_SECRET_KEYS) + ["short-key"])
def test_a_public_or_short_secret_key_is_refused_without_debug(tmp_path: Path, public: str) -> None:
    refused = _django_setup({"DJANGO_SECRET_KEY": public, "DJANGO_DEBUG": "false", "VAR_DIR": str(tmp_path)})
    assert refused.returncode != 0
    assert "DJANGO_SECRET_KEY is a public default" in refused.stderr
    allowed = _django_setup({"DJANGO_SECRET_KEY": public, "DJANGO_DEBUG": "true", "VAR_DIR": str(tmp_path)})
    assert allowed.returncode == 0, allowed.stderr


def test_an_unset_secret_key_is_generated_once_per_install(tmp_path: Path) -> None:
    env = {"DJANGO_SECRET_KEY": "", "VAR_DIR": str(tmp_path)}
    first = _django_setup(env)
    assert first.returncode == 0, first.stderr
    stored = tmp_path / "secret_key"
    assert stored.stat().st_mode & 0o777 == 0o600
    key = stored.read_text().strip()
    assert len(key) >= 50 and key not in PUBLIC_SECRET_KEYS
    assert _django_setup(env).returncode == 0
    assert stored.read_text().strip() == key  # the second start reuses it
    other = tmp_path / "other"
    assert _django_setup({**env, "VAR_DIR": str(other)}).returncode == 0
    assert (other / "secret_key").read_text().strip() != key  # another install, another key


@pytest.mark.django_db
def test_a_cookie_signed_with_the_old_public_key_is_not_accepted() -> None:
    """The audit's attack: a messages cookie signed with the public default rendered raw HTML in the
    admin. Signed with that key it is now dropped."""
    with override_settings(SECRET_KEY=OLD_PUBLIC_KEY):
        storage = CookieStorage(RequestFactory().get("/"))
        forged = storage._encode([Message(constants.INFO, mark_safe('<b id="forged">owned</b>'))])
    assert OLD_PUBLIC_KEY not in {os.environ.get("DJANGO_SECRET_KEY")}
    client = Client()
    client.force_login(User.objects.create_superuser("root-cookie", password="pw-123456"))
    client.cookies["messages"] = forged
    page = client.get("/admin/")
    assert page.status_code == 200
    assert 'id="forged"' not in page.content.decode()
    # the same message signed with the install's key is shown: the check above is not vacuous
    storage = CookieStorage(RequestFactory().get("/"))
    client.cookies["messages"] = storage._encode([Message(constants.INFO, "Signed by this install")])
    assert "Signed by this install" in client.get("/admin/").content.decode()


# --- 5. staff sessions need Django permissions ----------------------------------------------------


def _staff(name: str, *perms: str) -> APIClient:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    client = APIClient()
    client.force_login(User.objects.get(pk=user.pk))
    return client


def _document(tenant: Tenant) -> str:
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        {"title": "Staff", "text": "A document a staff user must not delete without permission."},
        format="json",
    )
    assert response.status_code == 202, response.content
    return str(response.json()["document_id"])


def _document_exists(document_id: str) -> bool:
    return bool(graph.read("MATCH (d:Document {id: $id}) RETURN d.id AS id", id=document_id))


@pytest.mark.django_db
def test_staff_without_permissions_can_do_nothing_through_the_api(tenant_a: Tenant) -> None:
    document_id = _document(tenant_a)
    pid = tenant_a.project.id
    bare = _staff("bare")
    assert bare.get("/api/v1/projects").status_code == 403
    assert bare.get(f"/api/v1/projects/{pid}/documents").status_code == 403
    assert bare.delete(f"/api/v1/projects/{pid}/documents/{document_id}").status_code == 403
    assert _document_exists(document_id)
    forget = bare.post(f"/api/v1/projects/{pid}/memories:forget", {"scope": {"user_id": "u"}}, format="json")
    assert forget.status_code == 403
    projects = Project.objects.count()
    created = bare.post("/api/v1/projects", {"name": "by bare staff"}, format="json")
    assert created.status_code == 403
    assert created.json()["error"]["code"] == "forbidden"
    assert Project.objects.count() == projects


@pytest.mark.django_db
def test_staff_permissions_map_to_api_scopes(tenant_a: Tenant) -> None:
    document_id = _document(tenant_a)
    pid = tenant_a.project.id
    reader = _staff("reader", "core.api_read")
    assert reader.get(f"/api/v1/projects/{pid}/documents/{document_id}").status_code == 200
    assert reader.delete(f"/api/v1/projects/{pid}/documents/{document_id}").status_code == 403
    assert reader.post("/api/v1/projects", {"name": "by reader"}, format="json").status_code == 403
    assert _document_exists(document_id)
    writer = _staff("writer", "core.api_write")
    assert writer.get(f"/api/v1/projects/{pid}/documents").status_code == 200
    assert writer.delete(f"/api/v1/projects/{pid}/documents/{document_id}").status_code in (202, 204)
    creator = _staff("creator", "core.add_project")
    created = creator.post("/api/v1/projects", {"name": "by creator"}, format="json")
    assert created.status_code == 201
    root = APIClient()
    root.force_login(User.objects.create_superuser("root-api", password="pw-123456"))
    assert root.get(f"/api/v1/projects/{pid}").status_code == 200


# --- 9. project quota per key ---------------------------------------------------------------------


@pytest.mark.django_db
def test_an_admin_key_creates_projects_up_to_its_quota(settings: Any, tenant_a: Tenant) -> None:
    settings.API_KEY_PROJECT_QUOTA = 2
    client = tenant_a.client(tenant_a.admin_key)
    for i in range(2):
        assert client.post("/api/v1/projects", {"name": f"q{i}"}, format="json").status_code == 201
    before = Project.objects.count()
    refused = client.post("/api/v1/projects", {"name": "one too many"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "quota_exceeded"
    assert refused.json()["error"]["details"] == {"quota": 2, "used": 2}
    assert Project.objects.count() == before
    assert not graph.read("MATCH (p:Project {name: 'one too many'}) RETURN p")
    # another key has its own quota
    other = make_tenant("quota other")
    assert (
        other.client(other.admin_key).post("/api/v1/projects", {"name": "q"}, format="json").status_code
        == 201
    )


# --- 9. probes: failed authentication and cross-tenant attempts -----------------------------------


@pytest.mark.django_db
def test_failed_authentications_from_one_address_are_throttled(settings: Any, tenant_a: Tenant) -> None:
    settings.API_PROBE_RATE = "5/min"
    pid = tenant_a.project.id
    attacker = APIClient(REMOTE_ADDR="10.9.8.7")
    for i in range(5):
        attacker.credentials(HTTP_AUTHORIZATION=f"Bearer kp_0000000{i}_{'x' * 30}")
        assert attacker.get(f"/api/v1/projects/{pid}").status_code == 401
    attacker.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant_a.read_key.key}")
    blocked = attacker.get(f"/api/v1/projects/{pid}")
    assert blocked.status_code == 429
    assert blocked.json()["error"]["code"] == "throttled"
    assert 1 <= int(blocked["Retry-After"]) <= 60
    # the same key from another address is not blocked (its prefix was never probed)
    assert tenant_a.client(tenant_a.read_key).get(f"/api/v1/projects/{pid}").status_code == 200


@pytest.mark.django_db
def test_cross_tenant_probes_are_counted_against_the_key(
    settings: Any, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    settings.API_PROBE_RATE = "4/min"
    own = f"/api/v1/projects/{tenant_a.project.id}"
    prober = tenant_a.client(tenant_a.read_key)
    # ordinary misses in its own project are not probes
    for _ in range(6):
        assert prober.get(f"{own}/documents/no-such-document").status_code == 404
    assert prober.get(own).status_code == 200
    for _ in range(4):
        assert prober.get(f"/api/v1/projects/{tenant_b.project.id}").status_code == 404
    from_elsewhere = APIClient(REMOTE_ADDR="10.1.2.3")
    from_elsewhere.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant_a.read_key.key}")
    assert from_elsewhere.get(own).status_code == 429  # counted against the key's prefix
    assert (
        tenant_b.client(tenant_b.read_key).get(f"/api/v1/projects/{tenant_b.project.id}").status_code == 429
    )
    # ... and against the address: another key from it is blocked too, another address is not
    blocked_elsewhere = APIClient(REMOTE_ADDR="10.1.2.4")
    blocked_elsewhere.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant_b.read_key.key}")
    assert blocked_elsewhere.get(f"/api/v1/projects/{tenant_b.project.id}").status_code == 200


@pytest.mark.django_db
def test_missing_scope_attempts_count_as_probes(settings: Any, tenant_a: Tenant) -> None:
    settings.API_PROBE_RATE = "3/min"
    client = APIClient(REMOTE_ADDR="10.3.3.3")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant_a.read_key.key}")
    url = f"/api/v1/projects/{tenant_a.project.id}/documents"
    for _ in range(3):
        assert client.post(url, {"title": "t", "text": "x"}, format="json").status_code == 403
    assert client.get(url).status_code == 429


# --- 9. communities:rebuild is coalesced ----------------------------------------------------------


@pytest.mark.django_db
def test_rebuild_requests_are_coalesced_while_one_is_queued_or_running(tenant_a: Tenant) -> None:
    url = f"/api/v1/projects/{tenant_a.project.id}/communities:rebuild"
    client = tenant_a.client(tenant_a.write_key)
    first = client.post(url)
    assert first.status_code == 202 and first.json()["coalesced"] is False
    second = client.post(url)
    assert second.status_code == 202
    assert second.json() == {"job_id": first.json()["job_id"], "coalesced": True}
    Job.objects.filter(pk=first.json()["job_id"]).update(status=Job.Status.RUNNING)
    assert client.post(url).json()["job_id"] == first.json()["job_id"]
    assert Job.objects.filter(project_id=tenant_a.project.id, kind="communities").count() == 1
    Job.objects.filter(pk=first.json()["job_id"]).update(status=Job.Status.SUCCEEDED)
    third = client.post(url)
    assert third.json()["coalesced"] is False and third.json()["job_id"] != first.json()["job_id"]
    # another project's rebuild is its own
    other = make_tenant("rebuild other")
    assert (
        other.client(other.write_key)
        .post(f"/api/v1/projects/{other.project.id}/communities:rebuild")
        .json()["coalesced"]
        is False
    )


# --- 9. a session read is bounded -----------------------------------------------------------------


@pytest.mark.django_db
def test_a_session_read_returns_bounded_pages_of_events(settings: Any, tenant_a: Tenant) -> None:
    settings.SESSION_EVENTS_PAGE_MAX = 4
    client = tenant_a.client(tenant_a.write_key)
    base = f"/api/v1/projects/{tenant_a.project.id}/apps/app/users/u1/sessions"
    assert client.post(base, {"session_id": "s1"}, format="json").status_code == 201
    for i in range(10):
        appended = client.post(
            f"{base}/s1/events",
            {"event": {"author": "user", "invocation_id": f"i{i}", "timestamp": 1000.0 + i}},
            format="json",
        )
        assert appended.status_code == 201, appended.content
    page = client.get(f"{base}/s1").json()
    assert [e["invocation_id"] for e in page["events"]] == ["i0", "i1", "i2", "i3"]
    seen = [e["invocation_id"] for e in page["events"]]
    while page["next_events_cursor"] is not None:
        page = client.get(f"{base}/s1", {"events_cursor": page["next_events_cursor"]}).json()
        assert len(page["events"]) <= 4
        seen += [e["invocation_id"] for e in page["events"]]
    assert seen == [f"i{i}" for i in range(10)]
    recent = client.get(f"{base}/s1", {"num_recent_events": 6, "events_limit": 2}).json()
    assert [e["invocation_id"] for e in recent["events"]] == ["i4", "i5"]
    assert client.get(f"{base}/s1", {"events_limit": 5}).status_code == 400  # above the maximum


# --- 7. a revoked key's websocket is closed --------------------------------------------------------


def _ws_event(project_id: str, phase: str) -> ProgressEvent:
    return ProgressEvent(
        message_type="ingestion_progress", project_id=project_id, job_id="job-r", phase=phase, progress_pct=10
    )


@pytest.mark.django_db(transaction=True)
def test_revoking_a_key_closes_its_open_websockets() -> None:
    tenant = make_tenant("ws revoke")
    path = f"/ws/v1/projects/{tenant.project.id}/progress/"

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        revoked = WebsocketCommunicator(application, f"{path}?key={tenant.read_key.key}")
        kept = WebsocketCommunicator(application, f"{path}?key={tenant.write_key.key}")
        assert (await revoked.connect(timeout=5))[0] and (await kept.connect(timeout=5))[0]
        await sync_to_async(publish)(_ws_event(tenant.project.id, "before"))
        before = await revoked.receive_json_from(timeout=5)
        await kept.receive_json_from(timeout=5)
        await sync_to_async(api_key_revoke)(key_id=tenant.read_key.id)
        closed = await revoked.receive_output(timeout=5)
        await sync_to_async(publish)(_ws_event(tenant.project.id, "after"))
        after = await kept.receive_json_from(timeout=5)
        assert await revoked.receive_nothing(timeout=0.5)
        await kept.disconnect()
        return before, closed, after

    before, closed, after = async_to_sync(scenario)()
    assert before["phase"] == "before"
    assert closed == {"type": "websocket.close", "code": 4401}
    assert after["phase"] == "after"  # the other key's socket stays open


@pytest.mark.django_db(transaction=True)
def test_a_socket_rechecks_its_key_when_the_close_message_was_lost(settings: Any) -> None:
    """Revoked behind the signal's back (a raw UPDATE): the periodic re-check still closes it."""
    settings.WS_KEY_RECHECK_SEC = 0.0
    tenant = make_tenant("ws recheck")
    path = f"/ws/v1/projects/{tenant.project.id}/progress/?key={tenant.read_key.key}"

    async def scenario() -> dict[str, Any]:
        socket = WebsocketCommunicator(application, path)
        assert (await socket.connect(timeout=5))[0]
        from django.utils import timezone

        from core.models import ApiKey

        await sync_to_async(ApiKey.objects.filter(pk=tenant.read_key.id).update)(revoked_at=timezone.now())
        await sync_to_async(publish)(_ws_event(tenant.project.id, "after"))
        return await socket.receive_output(timeout=5)

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": 4401}
