"""Graph reads of DRIFT search: project statistics, hierarchical community primer, sample chunks,
community scopes, chunk details and neighbourhoods."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings

from core import graph
from retrieval.drift import cypher
from retrieval.drift.dto import ChunkInfo, Community, Neighbourhood


def project_stats(*, project_id: str) -> dict[str, Any]:
    row = graph.read(cypher.PROJECT_STATS, project_id=project_id)[0]
    return {
        "chunks": int(row["chunks"]),
        "communities": int(row["communities"]),
        "max_level": int(row["max_level"]) if row["max_level"] is not None else None,
    }


def _communities(rows: list[dict[str, Any]]) -> list[Community]:
    return [
        Community(
            id=r["id"],
            key=str(r["key"] or r["id"]),
            level=int(r["level"] or 0),
            title=r["title"] or "",
            summary=r["summary"] or "",
            score=float(r["score"]),
        )
        for r in rows
    ]


def primer_communities(
    *, project_id: str, vector: list[float], k: int, max_level: int | None, level: int | None = None
) -> list[Community]:
    """Seed 002's hierarchical primer: the highest level first, then lower levels while fewer than
    k/2 were found; every level when there is no hierarchy. `level` pins one level."""
    if level is not None:
        return _communities(
            graph.read(cypher.COMMUNITIES_BY_LEVEL, project_id=project_id, vector=vector, k=k, level=level)
        )
    if not max_level:
        return _communities(
            graph.read(cypher.COMMUNITIES_BY_LEVEL, project_id=project_id, vector=vector, k=k, level=None)
        )
    # level by level: the top levels are small, and usually the first one is enough (one query
    # over all levels at once costs a cosine per community of every level, measured ~5x slower)
    found: list[Community] = []
    for current in range(max_level, -1, -1):
        rows = graph.read(
            cypher.COMMUNITIES_BY_LEVEL, project_id=project_id, vector=vector, k=k - len(found), level=current
        )
        found += _communities(rows)
        if len(found) >= math.ceil(k / 2) or len(found) >= k:
            break
    return found[:k]


def sample_chunks(
    *, project_id: str, community_ids: list[str], vector: list[float], per: int
) -> dict[str, list[ChunkInfo]]:
    """Each community's `per` chunks closest to the query, with their texts: {community id: chunks}."""
    rows = graph.read(
        cypher.COMMUNITY_SAMPLE_CHUNKS,
        project_id=project_id,
        community_ids=community_ids,
        vector=vector,
        per=per,
    )
    return {
        r["community_id"]: [
            ChunkInfo(
                chunk_id=t["chunk_id"],
                document_id=t["document_id"] or "",
                document_name=t["document_name"],
                text=t["text"],
                score=float(t["score"]),
            )
            for t in r["top"]
        ]
        for r in rows
    }


def community_scope(*, project_id: str, community_ids: list[str]) -> tuple[list[str], list[str]]:
    """The chunk ids under the communities and the ids of their documents, each sorted."""
    rows = graph.read(cypher.COMMUNITY_SCOPE, project_id=project_id, community_ids=community_ids)
    if not rows:
        return [], []
    return sorted(rows[0]["chunk_ids"]), sorted(d for d in rows[0]["document_ids"] if d is not None)


def chunks_hydrate(*, project_id: str, chunk_ids: list[str]) -> dict[str, ChunkInfo]:
    if not chunk_ids:
        return {}
    rows = graph.read(cypher.CHUNKS_HYDRATE, project_id=project_id, chunk_ids=chunk_ids)
    return {
        r["chunk_id"]: ChunkInfo(
            chunk_id=r["chunk_id"],
            document_id=r["document_id"] or "",
            document_name=r["document_name"],
            text=r["text"],
        )
        for r in rows
    }


def followup_context(
    *, project_id: str, chunk_ids: list[str]
) -> tuple[list[ChunkInfo], list[Neighbourhood], list[ChunkInfo]]:
    """For hit chunks, in one query: their texts, their neighbourhoods, and their neighbour chunks'
    texts (each neighbour once, in order of first appearance)."""
    if not chunk_ids:
        return [], [], []
    rows = graph.read(
        cypher.NEIGHBOURHOOD_HYDRATED,
        project_id=project_id,
        chunk_ids=chunk_ids,
        max_entities=settings.DRIFT_MAX_ENTITIES,
        max_relations=settings.DRIFT_MAX_RELATIONS,
        max_neighbours=settings.DRIFT_NEIGHBOUR_CHUNKS,
    )
    hits: list[ChunkInfo] = []
    hoods: list[Neighbourhood] = []
    neighbours: dict[str, ChunkInfo] = {}
    for r in rows:
        hits.append(
            ChunkInfo(
                chunk_id=r["chunk_id"],
                document_id=r["document_id"] or "",
                document_name=r["document_name"],
                text=r["text"],
            )
        )
        hoods.append(
            Neighbourhood(
                chunk_id=r["chunk_id"],
                entities=list(r["entities"]),
                relations=list(r["relations"]),
                neighbour_chunk_ids=[n[0] for n in r["neighbours"]],
            )
        )
        for nid, doc_id, doc_name, text in r["neighbours"]:
            neighbours.setdefault(nid, ChunkInfo(nid, doc_id or "", doc_name, text))
    return hits, hoods, list(neighbours.values())
