"""A small project inside a large database gets exactly its true top-k (DESIGN.md section 3).

19 other projects hold 100,000 chunks whose vectors are all closer to the query than any chunk of
the small project: a vector index over every project's chunks, queried for the top-k (or any fixed
over-fetch), would return none of the small project's chunks. No such index exists: a project is
scanned exactly until its own index (on its own chunk label) is online.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest

from core import graph
from core.embeddings import get_embedder
from knowledge import tenancy
from knowledge.dto import DocumentInput
from retrieval.retrievers import forget_scope_sizes
from tests.conftest import make_tenant
from tests.retrieval.helpers import ingest_now, search

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

QUERY = "How do glaciers carve valleys and leave moraines behind?"
OTHERS = 19
OTHER_CHUNKS = 100_000


def _texts() -> list[str]:
    topics = [
        "glacier ice",
        "bread baking",
        "volcano lava",
        "river delta",
        "desert dunes",
        "coral reef",
        "mountain pass",
        "city traffic",
        "forest fire",
        "ocean tide",
    ]
    return [
        f"Note {i} about {topics[i % 10]}: observation number {i} on {topics[(i * 3) % 10]}."
        for i in range(50)
    ]


@pytest.fixture(scope="module")
def crowded_database(django_db_blocker):  # type: ignore[no-untyped-def]
    """100,000 chunks of other projects, each a small perturbation of the query's embedding."""
    with django_db_blocker.unblock():
        query_vector = np.array(get_embedder().embed_one(QUERY), dtype=np.float32)
    rng = np.random.default_rng(3)
    others = [str(uuid.uuid4()) for _ in range(OTHERS)]
    started = time.monotonic()
    for start in range(0, OTHER_CHUNKS, 5000):
        vectors = query_vector + rng.normal(scale=0.02, size=(5000, query_vector.size)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = [
            {"id": str(uuid.uuid4()), "p": others[(start + i) % OTHERS], "e": v.tolist()}
            for i, v in enumerate(vectors)
        ]
        graph.write(
            "UNWIND $rows AS r CREATE (:Chunk {id: r.id, project_id: r.p, document_id: 'x', index: 0, "
            "text: 'glaciers carve valleys and leave moraines', embedding: r.e})",
            rows=rows,
        )
    graph.write_autocommit("CALL db.awaitIndexes(600)")
    print(f"loaded {OTHER_CHUNKS} chunks in {time.monotonic() - started:.1f}s")
    yield others
    graph.write_autocommit(
        "MATCH (c:Chunk) WHERE c.project_id IN $others CALL (c) { DETACH DELETE c } IN TRANSACTIONS OF 10000 ROWS",
        others=others,
    )


def _true_top_k(project_id: str, k: int) -> list[tuple[str, float]]:
    rows = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.id AS id, c.embedding AS e", p=project_id)
    q = np.array(get_embedder().embed_one(QUERY))
    scored = [
        (r["id"], float(np.dot(q, r["e"]) / (np.linalg.norm(q) * np.linalg.norm(r["e"])))) for r in rows
    ]
    scored.sort(key=lambda x: (-x[1], x[0]))
    return [(cid, (1 + cos) / 2) for cid, cos in scored[:k]]  # Neo4j's cosine score is (1 + cos) / 2


@pytest.mark.parametrize("exact_max", [1000, 10], ids=["exact-scan", "before-its-own-index"])
def test_small_project_gets_its_true_top_k(crowded_database, settings, exact_max: int) -> None:  # type: ignore[no-untyped-def]
    settings.RETRIEVAL_EXACT_SCAN_MAX_CHUNKS = exact_max
    forget_scope_sizes()
    tenant = make_tenant("small")
    ingest_now(tenant.project.id, [DocumentInput(title=f"n{i}", text=t) for i, t in enumerate(_texts())])
    assert (
        graph.read("MATCH (c:Chunk {project_id: $p}) RETURN count(c) AS n", p=tenant.project.id)[0]["n"] == 50
    )
    # no vector index covers every project's chunks (one would rank the crowd above this project)
    spanning = graph.read(
        "SHOW VECTOR INDEXES YIELD name, labelsOrTypes WHERE 'Chunk' IN labelsOrTypes RETURN name"
    )
    assert spanning == []

    expected = _true_top_k(tenant.project.id, 10)
    body = search(
        tenant.client(tenant.read_key), tenant.project.id, query=QUERY, mode="vector", top_k=10
    ).json()
    got = [(i["chunk_id"], i["score"]) for i in body["items"]]
    assert [cid for cid, _ in got] == [cid for cid, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-5)
    hybrid = search(
        tenant.client(tenant.read_key), tenant.project.id, query=QUERY, mode="hybrid", top_k=10
    ).json()
    assert {i["chunk_id"] for i in hybrid["items"]} <= {
        r["id"] for r in graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.id AS id", p=tenant.project.id)
    }


def test_large_project_uses_its_own_index(crowded_database, settings) -> None:  # type: ignore[no-untyped-def]
    """Above the exact-scan size a project gets its own vector index; its answers match the scan."""
    settings.RETRIEVAL_EXACT_SCAN_MAX_CHUNKS = 20
    forget_scope_sizes()
    tenant = make_tenant("larger")
    ingest_now(tenant.project.id, [DocumentInput(title=f"n{i}", text=t) for i, t in enumerate(_texts())])
    client = tenant.client(tenant.read_key)
    # ingestion asked for the index after commit; here (no commit) the first search asks for it
    first = search(client, tenant.project.id, query=QUERY, mode="vector", top_k=10).json()
    graph.write_autocommit("CALL db.awaitIndexes(300)")
    assert tenancy.project_index_online(tenant.project.id)
    second = search(client, tenant.project.id, query=QUERY, mode="vector", top_k=10).json()
    expected = [cid for cid, _ in _true_top_k(tenant.project.id, 10)]
    assert [i["chunk_id"] for i in first["items"]] == expected  # an exact scan until the index is online
    assert [i["chunk_id"] for i in second["items"]] == expected  # the project's own index
    filtered = search(
        client,
        tenant.project.id,
        query=QUERY,
        mode="vector",
        top_k=3,
        filters={
            "document_ids": [
                graph.read(
                    "MATCH (d:Document {project_id: $p, title: 'n7'}) RETURN d.id AS id", p=tenant.project.id
                )[0]["id"]
            ]
        },
    ).json()
    assert len(filtered["items"]) == 1
