"""Erasure requests: one API call (or admin action) removes everything of a user — memories,
conversations, summaries, facts, preferences, profile, session events, tool calls, state — and
leaves an audit entry with counts and no content. Tenancy and scopes are enforced."""

from __future__ import annotations

import pytest

from core import graph
from curation import services
from curation.models import AuditEntry, ErasureRequest
from memory import services as memory_services
from memory.tasks import memory_process
from tests.conftest import Tenant, make_tenant
from tests.curation.helpers import carriers, snapshot
from tests.memory.helpers import assistant, count, store, user

pytestmark = pytest.mark.django_db


def _seed_user(t: Tenant, user_id: str, canary: str) -> None:
    client = t.client(t.write_key)
    for thread in ("t1", "t2"):
        body = store(
            client,
            t.project.id,
            [
                user(f"My name is {user_id.title()} and I live in {canary}."),
                user(f"I love {canary} food."),
                assistant(f"Noted, {canary}."),
            ],
            application_id="shop",
            user_id=user_id,
            thread_id=f"{user_id}-{thread}",
        ).json()
        memory_process.apply(args=(body["job_id"],))
        memory_services.conversation_summarize(
            project_id=t.project.id, conversation_id=body["conversation_id"], force=True
        )
    base = f"/api/v1/projects/{t.project.id}/apps/shop/users/{user_id}"
    sid = client.post(f"{base}/sessions", {"state": {"user:city": canary}}, format="json").json()["id"]
    event = {
        "author": "user",
        "timestamp": 1_700_000_000.0,
        "content": {"role": "user", "parts": [{"text": f"Ship it to {canary}"}]},
    }
    assert client.post(f"{base}/sessions/{sid}/events", {"event": event}, format="json").status_code == 201
    call = {
        "author": "shop_agent",
        "content": {"parts": [{"function_call": {"name": "ship", "args": {"city": canary}}}]},
    }
    client.post(f"{base}/sessions/{sid}/events", {"event": call}, format="json")


def _erase(t: Tenant, user_id: str, key=None):  # type: ignore[no-untyped-def]
    return t.client(key or t.admin_key).post(
        f"/api/v1/projects/{t.project.id}/erasure-requests", {"user_id": user_id}, format="json"
    )


def test_erasure_removes_everything_of_the_user_and_nothing_of_others() -> None:
    t = make_tenant("erase-user")
    pid = t.project.id
    _seed_user(t, "anna", "Trondheim")
    _seed_user(t, "bert", "Verona")
    labels = {
        r["l"]
        for r in graph.read(
            "MATCH (n {project_id: $p, user_id: 'anna'}) RETURN DISTINCT labels(n)[0] AS l", p=pid
        )
    }
    assert {"Memory", "Conversation", "ConversationSummary", "Session", "UserState"} <= labels
    assert count("Fact", pid) + count("Preference", pid) > 0 and count("Event", pid) >= 4
    bert_before = carriers(pid, "Verona")

    response = _erase(t, "anna")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"
    done = services.erasure_execute(request_id=response.json()["id"])
    assert done.status == "succeeded"
    for key in ("memories", "conversations", "summaries", "sessions", "events"):
        assert done.counts.get(key, 0) > 0, key
    assert carriers(pid, "Trondheim") == []
    assert graph.read("MATCH (n {project_id: $p}) WHERE n.user_id = 'anna' RETURN n", p=pid) == []
    assert carriers(pid, "Verona") == bert_before
    # polling the request, and the audit entry: counts and ids, never the erased words
    got = t.client(t.admin_key).get(f"/api/v1/projects/{pid}/erasure-requests/{done.pk}").json()
    assert got["status"] == "succeeded" and got["counts"]["memories"] == 6
    (entry,) = AuditEntry.objects.filter(project_id=pid, action="erasure")
    assert entry.target_id == "anna" and entry.counts == done.counts
    assert "Trondheim" not in str(entry.details) + str(entry.counts)
    # a re-delivered task does nothing more
    services.erasure_execute(request_id=done.pk)
    assert AuditEntry.objects.filter(project_id=pid, action="erasure").count() == 1


def test_erasure_of_an_unknown_user_says_nothing_to_erase_and_is_audited() -> None:
    t = make_tenant("erase-unknown")
    _seed_user(t, "anna", "Tromso")
    before = snapshot(t.project.id)
    request_id = _erase(t, "nobody").json()["id"]
    done = services.erasure_execute(request_id=request_id)
    assert done.status == "nothing_to_erase" and done.counts == {}
    assert snapshot(t.project.id) == before
    (entry,) = AuditEntry.objects.filter(project_id=t.project.id, action="erasure")
    assert entry.details["result"] == "nothing_to_erase"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"user_id": ""},
        {"user_id": "   "},
        {"user_id": "x" * 300},
        {"user_id": 5},
        {"user_id": "a", "extra": 1},
    ],
)
def test_bad_erasure_requests_are_rejected_and_write_nothing(body: dict) -> None:
    t = make_tenant("erase-bad")
    response = t.client(t.admin_key).post(
        f"/api/v1/projects/{t.project.id}/erasure-requests", body, format="json"
    )
    assert response.status_code == 400, response.content
    assert not ErasureRequest.objects.exists() and not AuditEntry.objects.exists()


def test_erasure_needs_the_admin_scope_and_stays_in_its_project() -> None:
    a, b = make_tenant("erase-a"), make_tenant("erase-b")
    _seed_user(a, "anna", "Bergen")
    before = snapshot(a.project.id)
    assert _erase(a, "anna", key=a.write_key).status_code == 403
    assert _erase(a, "anna", key=a.read_key).status_code == 403
    # b's admin key, against a's project: 404; against its own project: a's anna is not touched
    assert (
        b.client(b.admin_key)
        .post(f"/api/v1/projects/{a.project.id}/erasure-requests", {"user_id": "anna"}, format="json")
        .status_code
        == 404
    )
    services.erasure_execute(request_id=_erase(b, "anna").json()["id"])
    assert snapshot(a.project.id) == before
    request_id = _erase(a, "anna").json()["id"]
    assert (
        b.client(b.admin_key)
        .get(f"/api/v1/projects/{b.project.id}/erasure-requests/{request_id}")
        .status_code
        == 404
    )


def test_a_staff_session_needs_the_erasure_permission_on_the_api() -> None:
    from django.contrib.auth.models import Permission, User
    from rest_framework.test import APIClient

    t = make_tenant("erase-staff")
    staff = User.objects.create_user("helpdesk", password="pw", is_staff=True)
    client = APIClient()
    client.force_login(staff)
    url = f"/api/v1/projects/{t.project.id}/erasure-requests"
    assert client.post(url, {"user_id": "anna"}, format="json").status_code == 403
    assert not ErasureRequest.objects.exists()
    staff.user_permissions.add(Permission.objects.get(codename="run_erasurerequest"))
    staff = User.objects.get(pk=staff.pk)  # fresh permission cache
    client.force_login(staff)
    response = client.post(url, {"user_id": "anna"}, format="json")
    assert response.status_code == 202 and response.json()["requested_by"] == "user:helpdesk"
    # a logged-in user who is not staff gets nothing
    plain = User.objects.create_user("visitor", password="pw")
    other = APIClient()
    other.force_login(plain)
    assert other.post(url, {"user_id": "anna"}, format="json").status_code in (401, 403, 404)
    assert ErasureRequest.objects.count() == 1
