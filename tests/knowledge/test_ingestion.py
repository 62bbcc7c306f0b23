"""Documents through the API, ingested by a real Celery worker into the real Neo4j."""

from __future__ import annotations

import pytest

from core import graph
from tests.conftest import Tenant, make_tenant
from tests.knowledge.helpers import graph_counts, post_document, wait_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker_process")]

GRAPH_TEXT = (
    "Ada Lovelace worked with Charles Babbage on the Analytical Engine. "
    "The Analytical Engine was a proposed mechanical general-purpose computer designed by Charles Babbage. "
    "Ada Lovelace published the first algorithm intended for the Analytical Engine."
)


@pytest.fixture
def tenant() -> Tenant:
    return make_tenant("ingest")


def test_document_becomes_chunks_entities_and_relations(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    response = post_document(
        client,
        tenant.project.id,
        title="Lovelace",
        text=GRAPH_TEXT,
        source_path="docs\\history/./lovelace.md",
        author="tests",
        metadata={"lang": "en"},
    )
    assert response.status_code == 202, response.json()
    body = response.json()
    job = wait_job(body["job_id"])
    assert job.status == "succeeded", job.errors
    assert job.counts["chunks"] == 1
    assert job.counts["entities"] >= 3
    assert set(job.timings) >= {"parsing", "chunking", "embedding", "extracting", "resolving", "writing"}

    doc = client.get(f"/api/v1/projects/{tenant.project.id}/documents/{body['document_id']}").json()
    assert doc["status"] == "ready"
    assert doc["source_path"] == "docs/history/lovelace.md"
    assert doc["metadata"] == {"lang": "en"}
    assert doc["counts"]["chunks"] == 1
    assert doc["counts"]["entities"] >= 3

    names = {
        r["name"]
        for r in graph.read(
            "MATCH (:Document {id: $id})-[:HAS_CHUNK]->(:Chunk)-[:HAS_ENTITY]->(e:Entity) "
            "RETURN e.name AS name",
            id=body["document_id"],
        )
    }
    assert {"Ada Lovelace", "Charles Babbage", "Analytical Engine"} <= names
    related = graph.read(
        "MATCH (a:Entity {project_id: $p})-[r:RELATED]->(b:Entity {project_id: $p}) "
        "RETURN a.name AS a, b.name AS b, r.weight AS w, r.chunk_ids AS ids",
        p=tenant.project.id,
    )
    pairs = {frozenset((r["a"], r["b"])) for r in related}
    assert frozenset(("Ada Lovelace", "Analytical Engine")) in pairs
    assert all(r["w"] > 0 and r["ids"] for r in related)
    chunk = graph.read(
        "MATCH (c:Chunk {document_id: $id}) RETURN size(c.embedding) AS dims, c.token_count AS t",
        id=body["document_id"],
    )[0]
    assert chunk["dims"] == 384 and chunk["t"] > 10
    assert graph.read(
        "MATCH (:Document {id: $id})-[:SOURCED_FROM]->(s:Source) RETURN s.path AS p", id=body["document_id"]
    ) == [{"p": "docs/history/lovelace.md"}]


def test_same_content_again_is_a_no_op(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    first = post_document(client, tenant.project.id, title="A", text=GRAPH_TEXT).json()
    wait_job(first["job_id"])
    before = graph_counts(tenant.project.id)
    again = post_document(client, tenant.project.id, title="A", text=GRAPH_TEXT)
    assert again.status_code == 202
    assert again.json()["document_id"] == first["document_id"]
    assert again.json()["status"] == "unchanged"
    assert wait_job(again.json()["job_id"]).counts["unchanged"] == 1
    assert graph_counts(tenant.project.id) == before


def test_changed_document_replaces_its_chunks_and_derived_data(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    first = post_document(client, tenant.project.id, title="v1", text=GRAPH_TEXT, source_path="a.md").json()
    wait_job(first["job_id"])
    second = post_document(
        client,
        tenant.project.id,
        title="v2",
        source_path="a.md",
        text="Grace Hopper developed the first compiler. Grace Hopper served in the United States Navy.",
    )
    assert second.json()["document_id"] == first["document_id"]
    wait_job(second.json()["job_id"])
    names = {
        r["name"]
        for r in graph.read("MATCH (e:Entity {project_id: $p}) RETURN e.name AS name", p=tenant.project.id)
    }
    assert "Grace Hopper" in names
    assert "Ada Lovelace" not in names  # supported only by the old version
    counts = graph_counts(tenant.project.id)
    assert counts["Document"] == 1 and counts["Chunk"] == 1


def test_long_document_is_chunked_with_overlap_and_next_chain(tenant: Tenant) -> None:
    sentences = [
        f"Sentence number {i} talks about the Leiden algorithm and graph communities." for i in range(300)
    ]
    response = post_document(
        tenant.client(tenant.write_key), tenant.project.id, title="long", text=" ".join(sentences)
    )
    job = wait_job(response.json()["job_id"])
    assert job.status == "succeeded"
    rows = graph.read(
        "MATCH (c:Chunk {document_id: $id}) RETURN c.index AS i, c.token_count AS t ORDER BY i",
        id=response.json()["document_id"],
    )
    assert len(rows) >= 5
    assert [r["i"] for r in rows] == list(range(len(rows)))
    assert all(r["t"] <= 600 for r in rows)
    chain = graph.read(
        "MATCH p = (first:Chunk {document_id: $id, index: 0})-[:NEXT_CHUNK*]->(last:Chunk) "
        "RETURN length(p) AS n ORDER BY n DESC LIMIT 1",
        id=response.json()["document_id"],
    )
    assert chain[0]["n"] == len(rows) - 1


def test_pre_extracted_graph_is_written_as_given(tenant: Tenant) -> None:
    response = post_document(
        tenant.client(tenant.write_key),
        tenant.project.id,
        title="given",
        text="Alpha Corp acquired Beta Labs in 2020.",
        entities=[
            {"name": "Alpha Corp", "type": "ORGANIZATION", "description": "a buyer"},
            {"name": "Beta Labs", "type": "ORGANIZATION"},
        ],
        relations=[{"source": "Alpha Corp", "target": "Beta Labs", "description": "acquired", "weight": 7}],
    )
    assert response.status_code == 202, response.json()
    wait_job(response.json()["job_id"])
    rows = graph.read(
        "MATCH (a:Entity {project_id: $p})-[r:RELATED]-(b:Entity) "
        "RETURN a.name AS a, b.name AS b, r.weight AS w, r.description AS d",
        p=tenant.project.id,
    )
    assert {(r["a"], r["b"]) for r in rows} == {("Alpha Corp", "Beta Labs"), ("Beta Labs", "Alpha Corp")}
    assert rows[0]["w"] == 7.0 and rows[0]["d"] == "acquired"
    types = {
        r["t"]
        for r in graph.read("MATCH (e:Entity {project_id: $p}) RETURN e.type AS t", p=tenant.project.id)
    }
    assert types == {"ORGANIZATION"}


def test_entities_shared_across_documents_are_resolved_once(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    response = client.post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        {
            "documents": [
                {"title": "one", "text": "Marie Curie won the Nobel Prize in Physics with Pierre Curie."},
                {"title": "two", "text": "Marie Curie later won the Nobel Prize in Chemistry in Paris."},
            ]
        },
        format="json",
    )
    assert response.status_code == 202
    assert len(response.json()["documents"]) == 2
    wait_job(response.json()["job_id"])
    rows = graph.read(
        "MATCH (e:Entity {project_id: $p, name: 'Marie Curie'})<-[:HAS_ENTITY]-(c:Chunk) "
        "RETURN e.id AS id, count(c) AS chunks",
        p=tenant.project.id,
    )
    assert len(rows) == 1 and rows[0]["chunks"] == 2


def test_delete_removes_document_and_what_only_it_supports(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    keep = post_document(
        client,
        tenant.project.id,
        title="keep",
        text="Marie Curie studied radioactivity in Paris with Pierre Curie.",
    ).json()
    drop = post_document(
        client,
        tenant.project.id,
        title="drop",
        text="Marie Curie was born in Warsaw. Warsaw is the capital of Poland.",
    ).json()
    wait_job(keep["job_id"])
    wait_job(drop["job_id"])
    response = client.delete(f"/api/v1/projects/{tenant.project.id}/documents/{drop['document_id']}")
    assert response.status_code == 204
    names = {
        r["name"]
        for r in graph.read("MATCH (e:Entity {project_id: $p}) RETURN e.name AS name", p=tenant.project.id)
    }
    assert "Marie Curie" in names  # still supported by `keep`
    assert "Warsaw" not in names
    orphans = graph.read(
        "MATCH (c:Chunk {project_id: $p}) WHERE NOT (:Document)-[:HAS_CHUNK]->(c) RETURN count(c) AS n",
        p=tenant.project.id,
    )
    assert orphans[0]["n"] == 0
    dangling = graph.read(
        "MATCH (:Entity {project_id: $p})-[r:RELATED]-() WHERE any(id IN r.chunk_ids WHERE "
        "NOT EXISTS { MATCH (c:Chunk {id: id}) }) RETURN count(r) AS n",
        p=tenant.project.id,
    )
    assert dangling[0]["n"] == 0
    assert (
        client.get(f"/api/v1/projects/{tenant.project.id}/documents/{drop['document_id']}").status_code == 404
    )
    assert (
        client.delete(f"/api/v1/projects/{tenant.project.id}/documents/{drop['document_id']}").status_code
        == 404
    )


def test_list_documents_and_job_endpoint(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    response = client.post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        {
            "documents": [
                {"title": f"doc {i}", "text": f"Document number {i} mentions Project Apollo and NASA."}
                for i in range(5)
            ]
        },
        format="json",
    )
    job_id = response.json()["job_id"]
    wait_job(job_id)
    listing = client.get(f"/api/v1/projects/{tenant.project.id}/documents?limit=2&status=ready").json()
    assert listing["total"] == 5 and len(listing["items"]) == 2
    job = client.get(f"/api/v1/jobs/{job_id}").json()
    assert job["status"] == "succeeded" and job["progress_pct"] == 100
    assert job["counts"]["documents"] == 5 and job["counts"]["chunks"] == 5
    assert "total_tokens" in job["token_usage"]


def test_tenants_cannot_see_each_others_documents_or_jobs(tenant: Tenant) -> None:
    other = make_tenant("other")
    response = post_document(
        tenant.client(tenant.write_key), tenant.project.id, title="secret", text=GRAPH_TEXT
    )
    body = response.json()
    wait_job(body["job_id"])
    spy = other.client(other.write_key)
    assert spy.get(f"/api/v1/projects/{tenant.project.id}/documents/{body['document_id']}").status_code == 404
    assert spy.get(f"/api/v1/projects/{other.project.id}/documents/{body['document_id']}").status_code == 404
    assert (
        spy.delete(f"/api/v1/projects/{other.project.id}/documents/{body['document_id']}").status_code == 404
    )
    assert spy.get(f"/api/v1/jobs/{body['job_id']}").status_code == 404
    assert spy.get(f"/api/v1/projects/{other.project.id}/documents").json()["total"] == 0
    assert graph_counts(tenant.project.id)["Document"] == 1


def test_near_duplicate_names_merge_by_embedding_similarity(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    first = post_document(
        client,
        tenant.project.id,
        title="one",
        text="Marie Sklodowska Curie was a physicist.",
        entities=[{"name": "Marie Sklodowska Curie", "type": "PERSON"}],
        relations=[],
    )
    wait_job(first.json()["job_id"])
    second = post_document(
        client,
        tenant.project.id,
        title="two",
        text="Marie Sklodowska-Curie and Pierre Curie shared a prize.",
        entities=[
            {"name": "Marie Sklodowska-Curie", "type": "PERSON"},
            {"name": "Pierre Curie", "type": "PERSON"},
        ],
        relations=[{"source": "Marie Sklodowska-Curie", "target": "Pierre Curie", "weight": 2}],
    )
    wait_job(second.json()["job_id"])
    rows = graph.read(
        "MATCH (e:Entity {project_id: $p}) OPTIONAL MATCH (c:Chunk)-[:HAS_ENTITY]->(e) "
        "RETURN e.name AS name, count(c) AS chunks ORDER BY name",
        p=tenant.project.id,
    )
    assert rows == [{"name": "Marie Sklodowska Curie", "chunks": 2}, {"name": "Pierre Curie", "chunks": 1}]
    related = graph.read(
        "MATCH (a:Entity {project_id: $p})-[:RELATED]-(b:Entity) RETURN a.name AS a, b.name AS b",
        p=tenant.project.id,
    )
    assert {"Marie Sklodowska Curie", "Pierre Curie"} == {related[0]["a"], related[0]["b"]}


def test_references_link_documents(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    base = post_document(
        client,
        tenant.project.id,
        title="base",
        text="The base paper on graphs.",
        source_path="papers/base.md",
    ).json()
    wait_job(base["job_id"])
    follow = post_document(
        client,
        tenant.project.id,
        title="follow-up",
        text="A follow-up paper.",
        source_path="papers/follow.md",
        references=["papers/base.md"],
    ).json()
    wait_job(follow["job_id"])
    rows = graph.read(
        "MATCH (a:Document {project_id: $p})-[:REFERENCES]->(b:Document) RETURN a.id AS a, b.id AS b",
        p=tenant.project.id,
    )
    assert rows == [{"a": follow["document_id"], "b": base["document_id"]}]


def test_ingestion_progress_events_cover_every_phase(tenant: Tenant) -> None:
    import json
    import time

    from core.runtime.redis_client import get_redis

    pubsub = get_redis().pubsub()
    pubsub.subscribe("ui:retrieval_progress")
    pubsub.get_message(timeout=2)
    response = post_document(
        tenant.client(tenant.write_key), tenant.project.id, title="events", text=GRAPH_TEXT
    )
    job_id = response.json()["job_id"]
    wait_job(job_id)
    events = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
        if message:
            event = json.loads(message["data"])
            if event.get("job_id") == job_id:
                events.append(event)
    pubsub.close()
    phases = [e["phase"] for e in events]
    for phase in ("parsing", "chunking", "embedding", "extracting", "resolving", "writing", "done"):
        assert phase in phases, phases
    assert all(
        e["message_type"] == "ingestion_progress" and e["project_id"] == tenant.project.id for e in events
    )
    pcts = [e["progress_pct"] for e in events]
    assert pcts[-1] == 100 and pcts == sorted(pcts)
