"""The hierarchical community primer (seed 002 section 4) on hand-made communities."""

from __future__ import annotations

import math

import pytest

from core import graph
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
