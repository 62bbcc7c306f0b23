"""Privacy settings of conversations (seed 003) through the API: set, read, enforced in memory
search; project defaults; PII redaction at ingest. Bad input writes nothing."""

from __future__ import annotations

import pytest

from core import graph
from curation.models import AuditEntry
from tests.conftest import make_tenant
from tests.curation.helpers import carriers, privacy, snapshot
from tests.memory.helpers import assistant, msearch, store, user

pytestmark = pytest.mark.django_db


def _conversation(client, pid: str, user_id: str, text: str) -> str:  # type: ignore[no-untyped-def]
    body = store(client, pid, [user(text), assistant("Noted.")], application_id="app", user_id=user_id).json()
    return str(body["conversation_id"])


def _texts(response) -> set[str]:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.content
    return {item["text"] for item in response.json()["items"]}


def test_private_conversation_is_seen_only_by_searches_naming_its_owner() -> None:
    tenant = make_tenant("privacy-private")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    ana = _conversation(client, pid, "ana", "Ana keeps her bicycle in the blue garage.")
    _conversation(client, pid, "bruno", "Bruno keeps his bicycle in the red garage.")
    scope_app = {"application_id": "app"}
    assert len([t for t in _texts(msearch(client, pid, "bicycle garage", scope_app)) if "garage" in t]) == 2

    response = privacy(client, pid, ana, accessibility="private")
    assert response.status_code == 200 and response.json()["accessibility"] == "private"

    for mode in ("vector", "fulltext", "hybrid", "recency"):
        seen = _texts(msearch(client, pid, "bicycle garage", scope_app, mode=mode))
        assert not any("Ana" in t for t in seen), mode
        assert any("Bruno" in t for t in seen), mode
        # another user naming themselves does not see it either, whatever else is passed
        seen = _texts(
            msearch(client, pid, "bicycle garage", {"application_id": "app", "user_id": "bruno"}, mode=mode)
        )
        assert not any("Ana" in t for t in seen), mode
        owner = _texts(
            msearch(client, pid, "bicycle garage", {"application_id": "app", "user_id": "ana"}, mode=mode)
        )
        assert any("Ana" in t for t in owner), mode
    listed = client.get(f"/api/v1/projects/{pid}/memories", {"application_id": "app"}).json()["items"]
    assert not any("Ana" in m["text"] for m in listed)

    # new messages of a private conversation are private too; shared again, all are visible
    store(client, pid, [user("Ana also owns a bicycle pump.")], application_id="app", user_id="ana")
    assert not any(
        "pump" in t for t in _texts(msearch(client, pid, "bicycle pump", scope_app, mode="fulltext"))
    )
    assert privacy(client, pid, ana, accessibility="shared").status_code == 200
    assert any("pump" in t for t in _texts(msearch(client, pid, "bicycle pump", scope_app, mode="fulltext")))


def test_retention_sets_the_expiry_from_the_last_message_and_is_audited() -> None:
    tenant = make_tenant("privacy-retention")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    cid = store(client, pid, [user("old words", timestamp="2026-01-10T08:00:00Z")], user_id="u1").json()[
        "conversation_id"
    ]
    body = privacy(client, pid, cid, retention_days=1, anonymize=True).json()
    assert body["retention_days"] == 1 and body["anonymize"] is True
    assert body["expires_at"].startswith("2026-01-11T08:00")
    body = privacy(client, pid, cid, expires_at="2030-05-01T00:00:00Z").json()
    assert body["expires_at"].startswith("2030-05-01T00:00") and body["expires_fixed"] is True
    body = privacy(client, pid, cid, expires_at=None).json()
    assert body["expires_at"].startswith("2026-01-11T08:00")
    got = client.get(f"/api/v1/projects/{pid}/conversations/{cid}/privacy").json()
    assert got["retention_days"] == 1
    entries = AuditEntry.objects.filter(project_id=pid, action="privacy_set", target_id=cid)
    assert entries.count() == 3
    assert all("old words" not in str(e.details) for e in entries)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"retention_days": -1}, "retention_days"),
        ({"retention_days": 0}, "retention_days"),
        ({"retention_days": "ten"}, "retention_days"),
        ({"accessibility": "everyone"}, "accessibility"),
        ({"expires_at": "next week"}, "expires_at"),
        ({"colour": "red"}, "colour"),
        ({}, None),
    ],
)
def test_bad_privacy_settings_are_rejected_and_write_nothing(body: dict, field: str | None) -> None:
    tenant = make_tenant("privacy-bad")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    cid = _conversation(client, pid, "ana", "hello")
    before = snapshot(pid)
    response = privacy(client, pid, cid, **body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid_input"
    if field:
        assert field in str(response.json()["error"]["details"])
    assert snapshot(pid) == before
    assert not AuditEntry.objects.filter(project_id=pid).exists()


def test_privacy_tenancy_and_scopes() -> None:
    a, b = make_tenant("privacy-a"), make_tenant("privacy-b")
    cid = _conversation(a.client(a.write_key), a.project.id, "ana", "secret plans")
    before = snapshot(a.project.id)
    # another project's key, through its own project or the other's: 404, nothing changes
    assert privacy(b.client(b.write_key), b.project.id, cid, accessibility="public").status_code == 404
    assert privacy(b.client(b.write_key), a.project.id, cid, accessibility="public").status_code == 404
    # a read key cannot change settings
    assert privacy(a.client(a.read_key), a.project.id, cid, accessibility="public").status_code == 403
    assert (
        privacy(a.client(a.write_key), a.project.id, "no-such-id", accessibility="public").status_code == 404
    )
    assert snapshot(a.project.id) == before


def test_project_defaults_apply_to_new_conversations_and_need_admin() -> None:
    tenant = make_tenant("privacy-defaults")
    pid = tenant.project.id
    url = f"/api/v1/projects/{pid}/privacy"
    assert (
        tenant.client(tenant.write_key)
        .patch(url, {"default_accessibility": "private"}, format="json")
        .status_code
        == 403
    )
    bad = tenant.client(tenant.admin_key).patch(url, {"default_retention_days": -5}, format="json")
    assert bad.status_code == 400
    response = tenant.client(tenant.admin_key).patch(
        url,
        {"default_accessibility": "private", "default_retention_days": 30, "default_anonymize": True},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["default_retention_days"] == 30
    client = tenant.client(tenant.write_key)
    cid = _conversation(client, pid, "ana", "hello there")
    got = client.get(f"/api/v1/projects/{pid}/conversations/{cid}/privacy").json()
    assert got["accessibility"] == "private" and got["retention_days"] == 30 and got["anonymize"] is True
    assert got["expires_at"] is not None


def test_redaction_at_ingest_keeps_no_copy_of_the_pii() -> None:
    tenant = make_tenant("privacy-redact")
    pid = tenant.project.id
    tenant.client(tenant.admin_key).patch(
        f"/api/v1/projects/{pid}/privacy", {"redact_pii_at_ingest": True}, format="json"
    )
    client = tenant.client(tenant.write_key)
    supplied = [0.1] * 384
    response = store(
        client,
        pid,
        [
            user("My name is Ana Souza, mail ana@example.com, card 4111 1111 1111 1111.", embedding=supplied),
            assistant("Thanks Ana Souza, I will write to ana@example.com."),
        ],
        user_id="u-ana",
    )
    assert response.status_code == 201, response.content
    for canary in ("Ana Souza", "ana@example.com", "4111 1111 1111 1111"):
        assert carriers(pid, canary) == [], canary
    texts = _texts(msearch(client, pid, "mail card", {"user_id": "u-ana"}, mode="recency"))
    assert "My name is [PERSON], mail [EMAIL], card [CREDIT_CARD]." in texts


def test_redaction_at_ingest_covers_documents() -> None:
    tenant = make_tenant("privacy-redact-docs")
    pid = tenant.project.id
    tenant.client(tenant.admin_key).patch(
        f"/api/v1/projects/{pid}/privacy", {"redact_pii_at_ingest": True}, format="json"
    )
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{pid}/documents",
        {
            "title": "Letter from Mr Jonas Berg",
            "text": "Dear team, reach Jonas Berg at +44 20 7946 0958 or 10.1.2.3. IBAN DE89370400440532013000.",
            "author": "Jonas Berg",
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    for canary in ("Jonas Berg", "7946 0958", "10.1.2.3", "DE89370400440532013000"):
        assert carriers(pid, canary) == [], canary
    doc = graph.read(
        "MATCH (d:Document {project_id: $p}) RETURN d.title AS t, d.content AS c, d.author AS a", p=pid
    )[0]
    assert doc == {
        "t": "Letter from Mr [PERSON]",
        "c": "Dear team, reach [PERSON] at [PHONE] or [IP_ADDRESS]. IBAN [IBAN].",
        "a": "[PERSON]",
    }
