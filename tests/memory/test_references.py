"""Messages that reference documents (seed 003: (:Message)-[:REFERENCES]->(:Document)), and the
reference queries over conversations, on the real stack."""

from __future__ import annotations

from typing import Any

import pytest

from core import graph
from knowledge.dto import DocumentInput
from tests.conftest import Tenant, make_tenant
from tests.memory.helpers import assistant, count, forget, store, user
from tests.retrieval.helpers import ingest_now

pytestmark = pytest.mark.django_db


def _docs(tenant: Tenant) -> list[str]:
    return ingest_now(
        tenant.project.id,
        [
            DocumentInput(
                title="Tide tables", text="High tide at Porto is at noon.", source_path="docs/tides.md"
            ),
            DocumentInput(title="Ferry guide", text="The ferry leaves at nine.", source_path="docs/ferry.md"),
        ],
    )


def _chunk_of(document_id: str) -> str:
    return graph.read("MATCH (c:Chunk {document_id: $d}) RETURN c.id AS id LIMIT 1", d=document_id)[0]["id"]


def _edges(project_id: str) -> list[dict[str, Any]]:
    return graph.read(
        "MATCH (m:Memory {project_id: $p})-[:REFERENCES]->(t) "
        "RETURN m.text AS text, labels(t)[0] AS label, t.id AS id ORDER BY text, label, id",
        p=project_id,
    )


def test_a_message_references_documents_by_id_chunk_and_source_path() -> None:
    tenant = make_tenant("ref-store")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    tides, ferry = _docs(tenant)
    chunk = _chunk_of(ferry)
    response = store(
        client,
        pid,
        [
            user("When is high tide?", references=[tides]),
            assistant("At noon; the ferry leaves at nine.", references=["docs/tides.md", chunk]),
        ],
        user_id="ana",
        thread_id="t1",
    )
    assert response.status_code == 201, response.json()
    stored = response.json()["stored"]
    assert stored[0]["references"] == [tides]
    assert stored[1]["references"] == sorted([tides, ferry])
    edges = _edges(pid)
    assert {(e["text"], e["label"], e["id"]) for e in edges} == {
        ("When is high tide?", "Document", tides),
        ("At noon; the ferry leaves at nine.", "Document", tides),
        ("At noon; the ferry leaves at nine.", "Document", ferry),
        ("At noon; the ferry leaves at nine.", "Chunk", chunk),
    }
    detail = client.get(f"/api/v1/projects/{pid}/memories/{stored[1]['id']}").json()
    assert detail["references"] == sorted(
        [
            {"document_id": tides, "title": "Tide tables", "chunk_ids": []},
            {"document_id": ferry, "title": "Ferry guide", "chunk_ids": [chunk]},
        ],
        key=lambda r: r["document_id"],
    )


def test_unknown_foreign_deleted_and_too_many_references_store_nothing(settings) -> None:  # type: ignore[no-untyped-def]
    tenant, other = make_tenant("ref-bad"), make_tenant("ref-bad-other")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    tides, ferry = _docs(tenant)
    (foreign,) = ingest_now(other.project.id, [DocumentInput(title="Secret", text="Other tenant text.")])
    assert client.delete(f"/api/v1/projects/{pid}/documents/{ferry}").status_code == 204
    for refs, unknown in (
        ([tides, foreign], [foreign]),
        ([ferry], [ferry]),
        (["no-such-id"], ["no-such-id"]),
        ([_chunk_of(foreign)], None),
    ):
        response = store(client, pid, [user("hello", references=refs)], user_id="ana")
        assert response.status_code == 400, response.json()
        if unknown is not None:
            assert response.json()["error"]["details"]["unknown_references"] == unknown
    settings.MEMORY_MAX_REFERENCES_PER_MESSAGE = 100
    response = store(client, pid, [user("hello", references=[tides] * 10_000)], user_id="ana")
    assert response.status_code == 400
    assert response.json()["error"]["details"]["limit"] == 100
    assert count("Memory", pid) == 0 and count("Conversation", pid) == 0
    assert _edges(pid) == []


def test_deleting_a_document_removes_the_edges_and_erasing_a_conversation_keeps_documents() -> None:
    tenant = make_tenant("ref-delete")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    tides, ferry = _docs(tenant)
    store(client, pid, [user("tides?", references=[tides, ferry])], user_id="ana", thread_id="t1")
    store(client, pid, [user("ferry?", references=[ferry])], user_id="bo", thread_id="t2")
    assert client.delete(f"/api/v1/projects/{pid}/documents/{ferry}").status_code == 204
    assert [(e["text"], e["id"]) for e in _edges(pid)] == [("tides?", tides)]
    assert count("Memory", pid) == 2
    assert forget(client, pid, user_id="ana").status_code == 200
    assert _edges(pid) == []
    assert client.get(f"/api/v1/projects/{pid}/documents/{tides}").status_code == 200


def test_conversation_references_and_document_conversations_respect_users_and_privacy() -> None:
    tenant, other = make_tenant("ref-query"), make_tenant("ref-query-other")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    tides, ferry = _docs(tenant)
    ana = store(
        client,
        pid,
        [user("tides?", references=[tides]), assistant("noon", references=[tides, ferry])],
        user_id="ana",
        thread_id="t1",
    ).json()["conversation_id"]
    bo = store(client, pid, [user("ferry?", references=[ferry])], user_id="bo", thread_id="t2").json()[
        "conversation_id"
    ]
    graph.write("MATCH (c:Conversation {id: $c}) SET c.accessibility = 'private'", c=bo)

    refs = client.get(f"/api/v1/projects/{pid}/conversations/{ana}/references").json()
    assert refs["conversation"]["id"] == ana and refs["conversation"]["user_id"] == "ana"
    items = {i["document_id"]: i for i in refs["items"]}
    assert {d: i["messages"] for d, i in items.items()} == {tides: 2, ferry: 1}
    assert items[tides]["title"] == "Tide tables" and items[tides]["source_path"] == "docs/tides.md"

    # another user's conversation, a private one without its owner, another project: not found
    assert client.get(f"/api/v1/projects/{pid}/conversations/{ana}/references?user_id=bo").status_code == 404
    assert client.get(f"/api/v1/projects/{pid}/conversations/{bo}/references").status_code == 404
    assert client.get(f"/api/v1/projects/{pid}/conversations/{bo}/references?user_id=bo").status_code == 200
    outsider = other.client(other.write_key)
    assert (
        outsider.get(f"/api/v1/projects/{other.project.id}/conversations/{ana}/references").status_code == 404
    )
    assert outsider.get(f"/api/v1/projects/{pid}/conversations/{ana}/references").status_code == 404

    used = client.get(f"/api/v1/projects/{pid}/documents/{ferry}/conversations").json()
    assert [c["id"] for c in used["items"]] == [ana]  # bo's conversation is private
    used_by_bo = client.get(f"/api/v1/projects/{pid}/documents/{ferry}/conversations?user_id=bo").json()
    assert [(c["id"], c["messages"]) for c in used_by_bo["items"]] == [(bo, 1)]
    assert client.get(f"/api/v1/projects/{pid}/documents/nope/conversations").status_code == 404
    assert client.get(f"/api/v1/projects/{pid}/documents/{ferry}/conversations?limit=0").status_code == 400
    assert client.get(f"/api/v1/projects/{pid}/documents/{ferry}/conversations?colour=red").status_code == 400


def test_anonymising_keeps_the_references_and_erasing_a_user_keeps_the_documents() -> None:
    from curation.services import conversation_anonymise_now, erasure_execute, erasure_request_create

    tenant = make_tenant("ref-curation")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    tides, ferry = _docs(tenant)
    cid = store(
        client,
        pid,
        [user("I am Ana Silva, call me at +351 912 345 678 about the tides", references=[tides])],
        user_id="ana",
        thread_id="t1",
    ).json()["conversation_id"]
    conversation_anonymise_now(project_id=pid, conversation_id=cid, actor="test")
    (edge,) = _edges(pid)
    assert edge["id"] == tides and "912 345 678" not in edge["text"]
    request = erasure_request_create(project_id=pid, user_id="ana", actor="test")
    assert erasure_execute(request_id=str(request.pk)).status == "succeeded"
    assert _edges(pid) == [] and count("Memory", pid) == 0
    assert count("Document", pid) == 2
