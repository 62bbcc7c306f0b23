"""The search core's over-fetch: grows while too few of the scope's hits survive, never answers short."""

from __future__ import annotations

import pytest

from retrieval.dto import Candidate
from retrieval.search_core import over_fetched

pytestmark = pytest.mark.unit


def _index(survivors_per_fetch: float, asked: list[int]):  # type: ignore[no-untyped-def]
    """An index whose every `1 / survivors_per_fetch`-th candidate belongs to the scope."""

    def query(fetch: int) -> list[Candidate]:
        asked.append(fetch)
        return [Candidate(f"c{i}", 1.0 - i / 1000) for i in range(int(fetch * survivors_per_fetch))][:10]

    return query


def test_over_fetch_starts_at_the_scopes_share_and_grows_fourfold(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RETRIEVAL_INDEX_MIN_CANDIDATES = 10
    settings.RETRIEVAL_OVERFETCH = 1.0
    settings.RETRIEVAL_MAX_INDEX_CANDIDATES = 100_000
    asked: list[int] = []
    found = over_fetched(
        _index(0.001, asked), lambda: [], limit=10, population=100_000, size=1_000
    )  # 1 in 1,000 survives; the scope is 1 % of the index
    assert asked == [1_000, 4_000, 16_000]
    assert len(found) == 10


def test_past_the_ceiling_the_scope_is_scanned_exactly(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RETRIEVAL_INDEX_MIN_CANDIDATES = 10
    settings.RETRIEVAL_OVERFETCH = 1.0
    settings.RETRIEVAL_MAX_INDEX_CANDIDATES = 2_000
    asked: list[int] = []
    exact = [Candidate(f"e{i}", 1.0) for i in range(10)]
    found = over_fetched(_index(0.0001, asked), lambda: exact, limit=10, population=100_000, size=1_000)
    assert asked == [1_000, 2_000]
    assert found == exact


def test_a_small_scope_needs_only_what_it_holds(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RETRIEVAL_INDEX_MIN_CANDIDATES = 100
    asked: list[int] = []
    found = over_fetched(_index(0.01, asked), lambda: [], limit=10, population=500, size=3)
    # min(limit, size) = 3 hits are enough: one query
    assert len(asked) == 1 and len(found) >= 3
