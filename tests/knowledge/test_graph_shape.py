"""The graph of a real corpus (120 hotpotqa-100 passages) has the shape of DESIGN.md section 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import graph
from tests.conftest import make_tenant
from tests.knowledge.helpers import wait_job

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("celery_worker_process"),
]

# vendored with its licence (bench/data/hotpotqa-100/README.md): a clean checkout has it
CORPUS = Path(__file__).resolve().parents[2] / "bench" / "data" / "hotpotqa-100" / "corpus.json"


def _one(query: str, **params: object) -> int:
    return graph.read(query, **params)[0]["n"]


def test_hotpotqa_subset_graph_shape() -> None:
    corpus = list(json.loads(CORPUS.read_text()).items())[:120]
    tenant = make_tenant("shape")
    client = tenant.client(tenant.write_key)
    docs = [
        {"title": t, "text": f"{t}. " + "".join(s), "source_path": f"hotpotqa/{i}"}
        for i, (t, s) in enumerate(corpus)
    ]
    response = client.post(
        f"/api/v1/projects/{tenant.project.id}/documents", {"documents": docs}, format="json"
    )
    assert wait_job(response.json()["job_id"], timeout=300).status == "succeeded"
    rebuild = client.post(f"/api/v1/projects/{tenant.project.id}/communities:rebuild")
    assert wait_job(rebuild.json()["job_id"], timeout=300).status == "succeeded"
    p = tenant.project.id

    # every node carries project_id and a unique id
    for label in ("Document", "Chunk", "Entity", "Community", "Source"):
        assert _one(f"MATCH (n:{label} {{project_id: $p}}) RETURN count(n) AS n", p=p) > 0, label
        assert _one(f"MATCH (n:{label} {{project_id: $p}}) WHERE n.id IS NULL RETURN count(n) AS n", p=p) == 0
        assert (
            _one(
                f"MATCH (n:{label} {{project_id: $p}}) WITH n.id AS id, count(*) AS c WHERE c > 1 "
                "RETURN count(*) AS n",
                p=p,
            )
            == 0
        )
    assert _one("MATCH (d:Document {project_id: $p}) RETURN count(d) AS n", p=p) == 120
    # Document -HAS_CHUNK-> Chunk with the required properties
    assert (
        _one(
            "MATCH (d:Document {project_id: $p}) WHERE NOT (d)-[:HAS_CHUNK]->(:Chunk) RETURN count(d) AS n",
            p=p,
        )
        == 0
    )
    assert (
        _one(
            "MATCH (c:Chunk {project_id: $p}) WHERE c.text IS NULL OR c.index IS NULL OR c.token_count IS NULL "
            "OR c.document_id IS NULL OR size(c.embedding) <> 384 RETURN count(c) AS n",
            p=p,
        )
        == 0
    )
    assert (
        _one(
            "MATCH (d:Document {project_id: $p})-[:HAS_CHUNK]->(c:Chunk) WHERE c.document_id <> d.id "
            "RETURN count(c) AS n",
            p=p,
        )
        == 0
    )
    assert (
        _one(
            "MATCH (d:Document {project_id: $p}) WHERE d.content_hash IS NULL OR d.status <> 'ready' "
            "OR d.title IS NULL RETURN count(d) AS n",
            p=p,
        )
        == 0
    )
    # Chunk -HAS_ENTITY-> Entity; Entity -RELATED {description, weight, chunk_ids}-> Entity
    assert _one(
        "MATCH (:Chunk {project_id: $p})-[:HAS_ENTITY]->(e:Entity) RETURN count(DISTINCT e) AS n", p=p
    ) == _one("MATCH (e:Entity {project_id: $p}) RETURN count(e) AS n", p=p)
    assert (
        _one(
            "MATCH (e:Entity {project_id: $p}) WHERE e.name IS NULL OR e.type IS NULL RETURN count(e) AS n",
            p=p,
        )
        == 0
    )
    assert (
        _one(
            "MATCH (:Entity {project_id: $p})-[r:RELATED]->(:Entity) WHERE r.weight <= 0 OR size(r.chunk_ids) = 0 "
            "OR r.description IS NULL RETURN count(r) AS n",
            p=p,
        )
        == 0
    )
    assert _one("MATCH (:Entity {project_id: $p})-[r:RELATED]->(:Entity) RETURN count(r) AS n", p=p) > 100
    # Entity|Chunk -IN_COMMUNITY-> Community level 0; child -> parent one level up
    assert (
        _one(
            "MATCH (:Entity {project_id: $p})-[:IN_COMMUNITY]->(c:Community) WHERE c.level <> 0 "
            "RETURN count(*) AS n",
            p=p,
        )
        == 0
    )
    assert (
        _one(
            "MATCH (:Chunk {project_id: $p})-[:IN_COMMUNITY]->(c:Community {level: 0}) RETURN count(*) AS n",
            p=p,
        )
        > 0
    )
    assert (
        _one(
            "MATCH (a:Community {project_id: $p})-[:IN_COMMUNITY]->(b:Community) WHERE b.level <> a.level + 1 "
            "RETURN count(*) AS n",
            p=p,
        )
        == 0
    )
    assert (
        _one(
            "MATCH (c:Community {project_id: $p}) WHERE c.summary IS NULL OR c.title IS NULL OR c.rank IS NULL "
            "OR size(c.embedding) <> 384 RETURN count(c) AS n",
            p=p,
        )
        == 0
    )
    # Document -SOURCED_FROM-> Source
    assert (
        _one(
            "MATCH (d:Document {project_id: $p}) WHERE NOT (d)-[:SOURCED_FROM]->(:Source) RETURN count(d) AS n",
            p=p,
        )
        == 0
    )
    # NEXT_CHUNK only links chunks of one document in index order
    assert (
        _one(
            "MATCH (a:Chunk {project_id: $p})-[:NEXT_CHUNK]->(b:Chunk) WHERE a.document_id <> b.document_id "
            "OR b.index <> a.index + 1 RETURN count(*) AS n",
            p=p,
        )
        == 0
    )
