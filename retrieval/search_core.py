"""The search core: how every ranked search of the platform finds and fuses candidates.

Knowledge retrieval (retrieval/retrievers.py), memory search (memory/selectors.py) and, through
memory, the sessions' memory search all rank with these:
- `over_fetched`: an approximate vector index that cannot filter by tenant asked for more than
  needed, by the scope's share of what the index holds, until enough of the scope's hits survive;
  past RETRIEVAL_MAX_INDEX_CANDIDATES the scope is scanned exactly, so an answer is never short;
- `fuse`: vector and fulltext candidates fused the one way RETRIEVAL_HYBRID_FUSION says (`linear`:
  min-max normalised, RETRIEVAL_HYBRID_ALPHA on the vector side; `rrf`: reciprocal rank,
  RETRIEVAL_RRF_K);
- Lucene queries are built from user text by retrieval/lucene.py, never handed over as syntax.
Callers bring their own Cypher (labels, scope predicates) and turn rows into `Candidate`s.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from django.conf import settings

from retrieval import fusion
from retrieval.dto import Candidate


def over_fetched(
    index_query: Callable[[int], list[Candidate]],
    exact: Callable[[], list[Candidate]],
    *,
    limit: int,
    population: int,
    size: int,
) -> list[Candidate]:
    """The best `limit` of a scope of `size` items, from an index of `population` items.

    `index_query(fetch)` asks the index for its `fetch` best, keeps the scope's and scores them
    exactly; it starts at the scope's share of the index × RETRIEVAL_OVERFETCH (at least
    RETRIEVAL_INDEX_MIN_CANDIDATES) and grows 4× while fewer than min(limit, size) survive. `exact()`
    scans the scope when even RETRIEVAL_MAX_INDEX_CANDIDATES are not enough."""
    ceiling = settings.RETRIEVAL_MAX_INDEX_CANDIDATES
    fetch = min(
        ceiling,
        max(
            settings.RETRIEVAL_INDEX_MIN_CANDIDATES,
            limit,
            math.ceil(limit * population / max(size, 1) * settings.RETRIEVAL_OVERFETCH),
        ),
    )
    while True:
        found = index_query(fetch)
        if len(found) >= min(limit, size) or fetch >= population:
            return found
        if fetch >= ceiling:
            return exact()
        fetch = min(ceiling, fetch * 4)


def fuse(by_vector: list[Candidate], by_text: list[Candidate]) -> list[Candidate]:
    """Hybrid's fusion of a vector and a fulltext ranking (RETRIEVAL_HYBRID_FUSION)."""
    if settings.RETRIEVAL_HYBRID_FUSION == "rrf":
        return fusion.reciprocal_rank([by_vector, by_text], k=settings.RETRIEVAL_RRF_K)
    alpha = settings.RETRIEVAL_HYBRID_ALPHA
    return fusion.linear([by_vector, by_text], weights=[alpha, 1 - alpha], normalise="minmax")
