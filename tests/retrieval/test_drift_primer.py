"""The hierarchical community primer (seed 002 section 4) on hand-made communities."""

from __future__ import annotations

import math
import random

import pytest

from core import graph
from core.graph.schema import ensure_schema
from retrieval.drift import selectors

pytestmark = pytest.mark.usefixtures("clean_graph")


def _unit(angle: float) -> list[float]:
    return [math.cos(angle), math.sin(angle), 0.0, 0.0]


def _community(project_id: str, key: str, level: int, angle: float) -> None:
    graph.write(
        "CREATE (:Community {id: $id, project_id: $p, community: $key, level: $level, title: $key, "
        "summary: 's', embedding: $e})",
        id=f"{project_id}-{key}",
        p=project_id,
        key=key,
        level=level,
        e=_unit(angle),
    )


def test_highest_level_first_then_lower_levels_until_half_of_k() -> None:
    _community("p1", "2-0", 2, 1.0)
    _community("p1", "1-0", 1, 0.5)
    _community("p1", "1-1", 1, 0.6)
    _community("p1", "0-0", 0, 0.0)
    found = selectors.primer_communities(project_id="p1", vector=_unit(0.0), k=4, max_level=2)
    # level 2 gives 1 (< 4/2), so level 1 adds its best; 3 >= 2 stops before level 0
    assert [c.key for c in found] == ["2-0", "1-0", "1-1"]
    enough = selectors.primer_communities(project_id="p1", vector=_unit(0.0), k=2, max_level=2)
    assert [c.key for c in enough] == ["2-0"]


def test_no_hierarchy_searches_every_level_and_a_level_can_be_pinned() -> None:
    _community("p2", "0-0", 0, 0.3)
    _community("p2", "0-1", 0, 0.0)
    flat = selectors.primer_communities(project_id="p2", vector=_unit(0.0), k=5, max_level=0)
    assert [c.key for c in flat] == ["0-1", "0-0"]
    _community("p2", "1-0", 1, 0.1)
    pinned = selectors.primer_communities(project_id="p2", vector=_unit(0.0), k=5, max_level=1, level=0)
    assert [c.key for c in pinned] == ["0-1", "0-0"]


def test_other_projects_communities_never_enter_the_primer() -> None:
    _community("mine", "0-0", 0, 1.2)
    for i in range(50):  # closer to the question, but another tenant's
        _community("theirs", f"0-{i}", 0, 0.0)
    found = selectors.primer_communities(project_id="mine", vector=_unit(0.0), k=5, max_level=0)
    assert [c.id for c in found] == ["mine-0-0"]


def _random_unit(rnd: random.Random, near: list[float] | None = None, noise: float = 1.0) -> list[float]:
    v = [(near[i] if near else 0.0) + rnd.gauss(0, noise) for i in range(384)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def test_a_large_level_comes_from_the_vector_index_with_the_exact_answer_and_this_project_only(
    settings,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ensure_schema()
    settings.DRIFT_EXACT_SCAN_MAX_COMMUNITIES = 20
    settings.DRIFT_PRIMER_OVERFETCH = 1.5  # fetch 33 first: all the other tenant's
    rnd = random.Random(5)
    query = _random_unit(rnd)
    rows = [
        {"id": f"mine-{i}", "p": "mine", "key": f"0-{i}", "level": 0, "e": _random_unit(rnd, query, 0.08)}
        for i in range(60)
    ]
    # another tenant's communities, all closer to the question: the index returns them first, so
    # the over-fetch has to grow before enough of this project's survive the filter
    rows += [
        {"id": f"theirs-{i}", "p": "theirs", "key": f"0-{i}", "level": 0, "e": _random_unit(rnd, query, 0.01)}
        for i in range(200)
    ]
    graph.write(
        "UNWIND $rows AS r CREATE (:Community {id: r.id, project_id: r.p, community: r.key, "
        "level: r.level, title: r.key, summary: 's', embedding: r.e})",
        rows=rows,
    )
    stats = selectors.project_stats(project_id="mine")
    assert stats["level_sizes"] == {0: 60}
    assert stats["population"] == 260
    exact = selectors.primer_communities(project_id="mine", vector=query, k=5, max_level=0)
    queries: list[str] = []
    real_read = graph.read

    def recording_read(query_text: str, **params):  # type: ignore[no-untyped-def]
        queries.append(query_text)
        return real_read(query_text, **params)

    monkeypatch.setattr(graph, "read", recording_read)
    indexed = selectors.primer_communities(
        project_id="mine",
        vector=query,
        k=5,
        max_level=0,
        level_sizes=stats["level_sizes"],
        population=stats["population"],
    )
    assert len(exact) == 5
    assert [c.id for c in indexed] == [c.id for c in exact]
    assert [round(c.score, 6) for c in indexed] == [round(c.score, 6) for c in exact]
    assert len(queries) >= 2 and all("community_embedding" in q for q in queries)  # it grew the fetch
    # a level small enough is scanned exactly
    queries.clear()
    settings.DRIFT_EXACT_SCAN_MAX_COMMUNITIES = 100
    selectors.primer_communities(
        project_id="mine", vector=query, k=5, max_level=0, level_sizes={0: 60}, population=260
    )
    assert len(queries) == 1 and "community_embedding" not in queries[0]


def test_without_an_online_community_index_the_primer_scans_exactly(settings) -> None:  # type: ignore[no-untyped-def]
    from knowledge.cypher import SCHEMA

    ensure_schema()
    settings.DRIFT_EXACT_SCAN_MAX_COMMUNITIES = 1
    rnd = random.Random(9)
    query = _random_unit(rnd)
    for i in range(3):
        graph.write(
            "CREATE (:Community {id: $id, project_id: 'p3', community: $key, level: 0, title: $key, "
            "summary: 's', embedding: $e})",
            id=f"p3-{i}",
            key=f"0-{i}",
            e=_random_unit(rnd, query, 0.5),
        )
    exact = selectors.primer_communities(project_id="p3", vector=query, k=2, max_level=0)
    graph.write_autocommit("DROP INDEX community_embedding IF EXISTS")
    try:
        found = selectors.primer_communities(
            project_id="p3", vector=query, k=2, max_level=0, level_sizes={0: 3}, population=3
        )
    finally:
        graph.write_autocommit(next(s for s in SCHEMA() if "community_embedding" in s))
        graph.write_autocommit("CALL db.awaitIndex('community_embedding', 120)")
    assert len(exact) == 2
    assert [c.id for c in found] == [c.id for c in exact]
