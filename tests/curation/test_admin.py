"""The curators' admin: graph content pages (paginated in Cypher, filtered, searched), detail pages
with neighbourhoods, privacy form, retention preview/run and erasure, each behind its permission."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from core import graph
from curation.models import AuditEntry, ErasureRequest, PolicyRun, RetentionPolicy
from knowledge import tenancy
from knowledge.dto import DocumentInput
from tests.conftest import make_tenant
from tests.memory.helpers import assistant, store, user
from tests.retrieval.helpers import ingest_now

pytestmark = pytest.mark.django_db


def _staff(name: str, *perms: str) -> Client:
    account = User.objects.create_user(name, password="pw", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        account.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = Client()
    client.force_login(account)
    return client


def _seed(n: int = 7) -> Any:
    t = make_tenant("admin-pages")
    client = t.client(t.write_key)
    for i in range(n):
        store(
            client,
            t.project.id,
            [
                user(f"Message {i} about the harbour crane.", timestamp=f"2026-03-{i + 1:02d}T10:00:00Z"),
                assistant("ok", timestamp=f"2026-03-{i + 1:02d}T10:01:00Z"),
            ],
            user_id=f"user-{i % 2}",
            thread_id=f"thread-{i}",
        )
    return t


def test_lists_are_paginated_filtered_and_searched(settings) -> None:  # type: ignore[no-untyped-def]
    settings.CURATION_PAGE_SIZE = 3
    t = _seed()
    curator = _staff("curator", "curation.browse_graph")
    base = "/admin/curation/graphcontent/conversations/"
    seen: list[str] = []
    url = f"{base}?project={t.project.id}"
    pages = 0
    while url:
        response = curator.get(url)
        assert response.status_code == 200
        rows = response.context["rows"]
        assert len(rows) <= 3
        seen += [r["id"] for r in rows]
        url = base + response.context["next_url"] if response.context["next_url"] else ""
        pages += 1
    assert pages == 3 and len(seen) == len(set(seen)) == 7
    # newest first
    ended = {
        r["id"]: r["ended_at"]
        for r in graph.read(
            "MATCH (c:Conversation) WHERE c.id IN $ids RETURN c.id AS id, c.ended_at AS ended_at", ids=seen
        )
    }
    assert [ended[i] for i in seen] == sorted(ended.values(), reverse=True)

    one_user = curator.get(base, {"project": t.project.id, "user_id": "user-1"}).context["rows"]
    assert {r["cells"][0] for r in one_user} == {"user-1"}
    dated = curator.get(
        base, {"project": t.project.id, "date_from": "2026-03-02", "date_to": "2026-03-03"}
    ).context["rows"]
    assert len(dated) == 2
    found = curator.get(
        "/admin/curation/graphcontent/memories/", {"project": t.project.id, "q": "harbour crane"}
    )
    assert found.status_code == 200 and len(found.context["rows"]) == 3  # page size
    assert all("harbour crane" in r["cells"][4] for r in found.context["rows"])
    searched = curator.get(base, {"project": t.project.id, "q": "Message 4"}).context["rows"]
    assert searched
    for kind in ("documents", "entities", "communities", "sessions", "memories"):
        assert curator.get(f"/admin/curation/graphcontent/{kind}/").status_code == 200
    assert curator.get(base, {"date_from": "not a date"}).status_code == 400
    assert (
        curator.get(base, {"cursor": "garbage"}).status_code == 302
    )  # back to the first page, with a message


def test_documents_are_searched_by_their_text_in_each_projects_own_index() -> None:
    ours, theirs = make_tenant("admin-docs-ours"), make_tenant("admin-docs-theirs")
    ingest_now(ours.project.id, [DocumentInput(title="Tide tables", text="Quillwort grows by the pier.")])
    ingest_now(theirs.project.id, [DocumentInput(title="Ferns", text="Quillwort is a lycophyte.")])
    curator = _staff("doc-curator", "curation.browse_graph")
    base = "/admin/curation/graphcontent/documents/"

    def titles(**params: str) -> set[str]:
        response = curator.get(base, {"q": "quillwort", **params})
        assert response.status_code == 200
        return {r["cells"][0] for r in response.context["rows"]}

    assert titles(project=ours.project.id) == {"Tide tables"}  # the other project's match stays out
    assert curator.get(base, {"q": "quillwort", "project": "!!!"}).status_code == 400  # no such project
    assert titles() >= {"Tide tables", "Ferns"}  # every project's index, when no project is chosen
    # a project whose index is not online is skipped, not an error
    graph.write_autocommit(f"DROP INDEX {tenancy.chunk_fulltext_index(theirs.project.id)}")
    tenancy.project_fulltext_forget(theirs.project.id)
    assert "Ferns" not in titles() and "Tide tables" in titles()


def test_conversation_detail_shows_messages_and_saves_privacy() -> None:
    t = _seed(1)
    (cid,) = [
        r["id"]
        for r in graph.read("MATCH (c:Conversation {project_id: $p}) RETURN c.id AS id", p=t.project.id)
    ]
    curator = _staff("curator", "curation.browse_graph", "curation.change_privacy")
    page = curator.get(f"/admin/curation/graphcontent/conversations/{cid}/")
    assert page.status_code == 200 and b"harbour crane" in page.content
    response = curator.post(
        f"/admin/curation/graphcontent/conversations/{cid}/",
        {"accessibility": "private", "retention_days": "1", "anonymize": ""},
    )
    assert response.status_code == 302
    row = graph.read(
        "MATCH (c:Conversation {id: $c}) RETURN c.accessibility AS a, c.retention_days AS r", c=cid
    )[0]
    assert row == {"a": "private", "r": 1}
    assert AuditEntry.objects.filter(action="privacy_set", actor="user:curator", target_id=cid).exists()
    bad = curator.post(
        f"/admin/curation/graphcontent/conversations/{cid}/",
        {"accessibility": "private", "retention_days": "-4"},
    )
    assert bad.status_code == 200 and bad.context["privacy_form"].errors
    # a reader without the privacy permission sees the page but cannot post
    reader = _staff("reader", "curation.browse_graph")
    assert reader.get(f"/admin/curation/graphcontent/conversations/{cid}/").status_code == 200
    assert (
        reader.post(
            f"/admin/curation/graphcontent/conversations/{cid}/", {"accessibility": "public"}
        ).status_code
        == 403
    )
    assert (
        graph.read("MATCH (c:Conversation {id: $c}) RETURN c.accessibility AS a", c=cid)[0]["a"] == "private"
    )


def test_each_page_and_action_needs_its_permission() -> None:
    t = _seed(1)
    nobody = _staff("nobody")
    assert nobody.get("/admin/curation/graphcontent/conversations/").status_code == 403
    index = nobody.get("/admin/")
    assert b"graphcontent" not in index.content and b"retentionpolicy" not in index.content
    assert nobody.get("/admin/curation/retentionpolicy/").status_code == 403
    assert nobody.get("/admin/curation/erasurerequest/add/").status_code == 403
    assert (
        nobody.post(
            "/admin/curation/erasurerequest/add/", {"project": t.project.id, "user_id": "user-0"}
        ).status_code
        == 403
    )
    assert not ErasureRequest.objects.exists()
    plain = Client()
    assert plain.get("/admin/curation/graphcontent/conversations/").status_code == 302  # to the login page
    # viewing policies without the run permission: no run/preview actions
    viewer = _staff("viewer", "curation.view_retentionpolicy")
    page = viewer.get("/admin/curation/retentionpolicy/")
    assert page.status_code == 200 and b"run_now" not in page.content
    policy = RetentionPolicy.objects.first()
    assert policy is not None
    viewer.post("/admin/curation/retentionpolicy/", {"action": "run_now", "_selected_action": [policy.pk]})
    assert not PolicyRun.objects.exists()


def test_preview_and_run_actions_of_the_policy_admin() -> None:
    t = _seed(2)
    policy = RetentionPolicy.objects.create(
        name="old", project_id=t.project.id, kind="messages", age_days=30, action="anonymise"
    )
    curator = _staff("curator", "curation.view_retentionpolicy", "curation.run_retentionpolicy")
    response = curator.post(
        "/admin/curation/retentionpolicy/",
        {"action": "preview", "_selected_action": [policy.pk]},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    assert any("this will anonymise 4 messages in 2 conversations" in m for m in messages), messages
    assert not PolicyRun.objects.exists()
    curator.post("/admin/curation/retentionpolicy/", {"action": "run_now", "_selected_action": [policy.pk]})
    assert PolicyRun.objects.filter(policy=policy, project_id=t.project.id).count() == 1


def test_erasure_request_from_the_admin() -> None:
    t = _seed(1)
    curator = _staff(
        "curator",
        "curation.add_erasurerequest",
        "curation.view_erasurerequest",
        "curation.run_erasurerequest",
    )
    response = curator.post(
        "/admin/curation/erasurerequest/add/", {"project": t.project.id, "user_id": "user-0"}
    )
    assert response.status_code == 302
    (request,) = ErasureRequest.objects.all()
    assert request.user_id == "user-0" and request.requested_by == "user:curator"
    blank = curator.post("/admin/curation/erasurerequest/add/", {"project": t.project.id, "user_id": "  "})
    assert blank.status_code == 200 and ErasureRequest.objects.count() == 1


def test_project_privacy_defaults_and_policy_deletion_are_audited() -> None:
    t = make_tenant("admin-audit")
    superuser = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(superuser)
    page = client.get(f"/admin/core/project/{t.project.id}/change/")
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data.update(
        {"default_accessibility": "private", "default_retention_days": "30", "redact_pii_at_ingest": "on"}
    )
    data.update({"api_keys-TOTAL_FORMS": "0", "api_keys-INITIAL_FORMS": "0"})
    response = client.post(f"/admin/core/project/{t.project.id}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    (entry,) = AuditEntry.objects.filter(project_id=t.project.id, action="privacy_set", target_kind="project")
    assert entry.actor == "user:root" and entry.details["set"]["default_accessibility"] == "private"

    policy = RetentionPolicy.objects.create(
        name="to go", project_id=t.project.id, kind="messages", age_days=5, action="delete"
    )
    client.post(f"/admin/curation/retentionpolicy/{policy.pk}/delete/", {"post": "yes"})
    assert not RetentionPolicy.objects.filter(pk=policy.pk).exists()
    assert AuditEntry.objects.filter(target_id=str(policy.pk), details__deleted=True).count() == 1


def test_detail_pages_show_references_between_conversations_and_documents() -> None:
    from knowledge.dto import DocumentInput
    from tests.retrieval.helpers import ingest_now

    t = make_tenant("admin-references")
    client = t.client(t.write_key)
    (cited,) = ingest_now(
        t.project.id, [DocumentInput(title="Harbour crane manual", text="The crane lifts ten tonnes.")]
    )
    ingest_now(
        t.project.id,
        [DocumentInput(title="Crane incident report", text="The crane failed.", references=[cited])],
    )
    cid = store(
        client, t.project.id, [user("How much does the crane lift?", references=[cited])], user_id="ana"
    ).json()["conversation_id"]
    curator = _staff("ref-curator", "curation.browse_graph")
    conversation = curator.get(f"/admin/curation/graphcontent/conversations/{cid}/").content.decode()
    assert "references (1)" in conversation and "Harbour crane manual" in conversation
    assert f"/admin/curation/graphcontent/documents/{cited}/" in conversation
    document = curator.get(f"/admin/curation/graphcontent/documents/{cited}/").content.decode()
    assert (
        "conversations (1)" in document and f"/admin/curation/graphcontent/conversations/{cid}/" in document
    )
    assert "cited_by (1)" in document and "Crane incident report" in document
