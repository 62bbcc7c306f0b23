"""An import writes its relationship batches PORTABILITY_IMPORT_THREADS at a time. Batches that all
link to the same few nodes, in opposite orders, lock those nodes against each other: every relationship
still lands exactly once (a transaction Neo4j aborts as a deadlock is run again whole)."""

from __future__ import annotations

import io

import pytest

from core import graph
from portability import importer
from tests.conftest import Tenant
from tests.portability.helpers import hand_archive, memory_rows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_graph")]

MEMORIES, HUBS = 300, 3


def _relationships(ids: list[str], hubs: list[str]) -> list[dict[str, object]]:
    def rel(kind: str, start: str, end: str, order: int) -> dict[str, object]:
        return {
            "type": kind,
            "start_label": "Memory",
            "start": start,
            "end_label": "Memory",
            "end": end,
            "props": {"order": order},
        }

    rels = [rel("NEXT", a, b, 0) for a, b in zip(ids, ids[1:], strict=False)]
    for i, memory in enumerate(ids):
        for order, hub in enumerate(hubs if i % 2 == 0 else list(reversed(hubs))):
            rels.append(rel("ABOUT", memory, hub, order))
    return rels


def test_relationship_batches_sharing_nodes_land_exactly_once(tenant_a: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    settings.PORTABILITY_BATCH = 10  # 120 relationship batches, two in flight at a time
    settings.PORTABILITY_IMPORT_THREADS = 2
    rows = memory_rows(MEMORIES + HUBS)
    ids = [row["props"]["id"] for row in rows]
    memories, hubs = ids[:MEMORIES], ids[MEMORIES:]
    rels = _relationships(memories, hubs)
    seen: list[tuple[str, int]] = []

    written = importer.load(
        io.BytesIO(hand_archive(rows, rels)),
        project_id=tenant_a.project.id,
        progress=lambda phase, done: seen.append((phase, done)),
    )

    assert written == {"nodes": MEMORIES + HUBS, "relationships": len(rels)}
    counts = graph.read(
        "MATCH (a:Memory {project_id: $p})-[r]->(b:Memory {project_id: $p}) "
        "RETURN type(r) AS type, count(r) AS n, count(DISTINCT [a.id, b.id]) AS pairs ORDER BY type",
        p=tenant_a.project.id,
    )
    assert counts == [
        {"type": "ABOUT", "n": MEMORIES * HUBS, "pairs": MEMORIES * HUBS},
        {"type": "NEXT", "n": MEMORIES - 1, "pairs": MEMORIES - 1},
    ]
    assert graph.read("MATCH (:Memory {id: $hub})<-[r:ABOUT]-() RETURN count(r) AS n", hub=hubs[0]) == [
        {"n": MEMORIES}
    ]
    # progress rose in order, nodes first, and reached every row
    relationship_counts = [done for phase, done in seen if phase == "relationships"]
    assert relationship_counts == sorted(relationship_counts) and relationship_counts[-1] == len(rels)
    assert max(i for i, (phase, _) in enumerate(seen) if phase == "nodes") < seen.index(
        ("relationships", relationship_counts[0])
    )
