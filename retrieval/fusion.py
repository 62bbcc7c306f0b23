"""Fusing ranked lists of (chunk id, score): reciprocal rank fusion and normalised linear fusion."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.dto import Candidate


def reciprocal_rank(rankings: Sequence[Sequence[Candidate]], *, k: int = 60) -> list[Candidate]:
    """score(d) = Σ 1 / (k + rank_i(d)), rank from 1; ties broken by the first list's order."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, cand in enumerate(ranking, start=1):
            fused[cand.chunk_id] = fused.get(cand.chunk_id, 0.0) + 1.0 / (k + rank)
    return ordered(fused)


def linear(
    rankings: Sequence[Sequence[Candidate]], *, weights: Sequence[float], normalise: str = "max"
) -> list[Candidate]:
    """score(d) = Σ w_i · n_i(d), where n_i scales list i to [0, 1] and a missing entry counts 0.

    `normalise="max"` divides by the list's best score (neo4j-graphrag's choice); `"minmax"` maps the
    list's worst score to 0 and its best to 1.
    """
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    if normalise not in ("max", "minmax"):
        raise ValueError("normalise is max or minmax")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if not ranking:
            continue
        high = max(c.score for c in ranking)
        low = min(c.score for c in ranking) if normalise == "minmax" else 0.0
        span = high - low
        for cand in ranking:
            part = (cand.score - low) / span if span > 0 else 1.0
            fused[cand.chunk_id] = fused.get(cand.chunk_id, 0.0) + weight * part
    return ordered(fused)


def ordered(scores: dict[str, float]) -> list[Candidate]:
    """Candidates by score, best first; equal scores keep the dict's order."""
    # dicts keep insertion order and sorted() is stable: equal scores stay in first-seen order
    return [Candidate(chunk_id=cid, score=s) for cid, s in sorted(scores.items(), key=lambda kv: -kv[1])]
