"""Hierarchical Leiden communities over the entity graph, with titles, summaries, ranks, embeddings.

Level 0 holds the finest communities (entities are members); each higher level clusters the level
below it (graph of communities weighted by the entity edges between them) until the clustering stops
shrinking. Child → parent `IN_COMMUNITY`; chunks link to the level-0 communities of their entities.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from typing import Any

import graspologic_native as gn
from celery import current_app
from django.conf import settings
from neo4j import ManagedTransaction
from pydantic import BaseModel, Field

from core import graph
from core.embeddings import get_embedder
from core.jobs import job_create, job_fail
from core.jobs.tasks import JobOutcome, failure_reason, job_execute
from core.llm.client import chat_json, llm_configured
from core.llm.usage import usage_meter
from core.models import Job
from core.progress.events import job_progress
from core.runtime.redis_client import get_redis
from knowledge import cypher

logger = logging.getLogger(__name__)


def _leiden(edges: list[tuple[str, str, float]], *, max_cluster_size: int, seed: int) -> dict[str, int]:
    """Final (leaf) cluster of each node, from graspologic's hierarchical Leiden."""
    clusters = gn.hierarchical_leiden(edges, max_cluster_size=max_cluster_size, seed=seed, resolution=1.0)
    return {c.node: c.cluster for c in clusters if c.is_final_cluster}


def build_hierarchy(
    edges: list[tuple[str, str, float]], *, max_levels: int, max_cluster_size: int, seed: int = 42
) -> list[dict[str, list[str]]]:
    """Levels of {community_key: member ids}; level 0 members are entity ids, level N members are
    level N-1 community keys."""
    if not edges:
        return []
    levels: list[dict[str, list[str]]] = []
    assignment = _leiden(edges, max_cluster_size=max_cluster_size, seed=seed)
    current: dict[str, list[str]] = defaultdict(list)
    for node, cluster in assignment.items():
        current[f"0-{cluster}"].append(node)
    levels.append(dict(current))
    while len(levels) < max_levels:
        below = levels[-1]
        if len(below) <= 1:
            break
        owner = {member: key for key, members in below.items() for member in members}
        weights: dict[tuple[str, str], float] = defaultdict(float)
        for a, b, w in edges:
            ca, cb = owner.get(a, a), owner.get(b, b)
            if ca != cb:
                weights[(min(ca, cb), max(ca, cb))] += w
        if not weights:
            break
        level = len(levels)
        assignment = _leiden(
            [(a, b, w) for (a, b), w in weights.items()],
            max_cluster_size=max(max_cluster_size, len(below)),
            seed=seed,
        )
        grouped: dict[str, list[str]] = defaultdict(list)
        for key in below:
            grouped[f"{level}-{assignment.get(key, f'solo-{key}')}"].append(key)
        if len(grouped) >= len(below) * 0.9:  # no real coarsening any more
            break
        levels.append(dict(grouped))
        # the edges of the next round connect this level's communities
        edges = [(owner.get(a, a), owner.get(b, b), w) for a, b, w in edges]
        edges = [(a, b, w) for a, b, w in edges if a != b]
    return levels


class _Summary(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    summary: str = Field(min_length=1, max_length=4000)
    rating: float = Field(ge=0, le=10)


SUMMARY_PROMPT = """Write a report on this community of entities from a knowledge graph.
Return JSON {{"title": short name, "summary": 2-5 sentences from the material only,
"rating": 0-10 importance}}.

Entities and their descriptions:
{material}"""


def _summarise(members: list[dict[str, Any]]) -> tuple[str, str, float | None]:
    ranked = sorted(members, key=lambda m: (-m["mentions"], m["name"]))
    title = ", ".join(m["name"] for m in ranked[:3])
    if llm_configured():
        material = "\n".join(f"- {m['name']}: {(m['description'] or '')[:300]}" for m in ranked[:30])
        report = chat_json([{"role": "user", "content": SUMMARY_PROMPT.format(material=material)}], _Summary)
        return report.title, report.summary, report.rating
    # extractive: the members' own descriptions, most-mentioned first, as the summary
    sentences: list[str] = []
    for member in ranked:
        for line in (member["description"] or "").split("\n"):
            line = line.strip()
            if line and line not in sentences:
                sentences.append(line)
        if sum(len(s) for s in sentences) > 300:
            break
    summary = " ".join(sentences)[:400] or f"Entities: {', '.join(m['name'] for m in ranked[:10])}"
    return title, summary, None


# the task that runs a rebuild job (knowledge.tasks), named here so a job can be created without it
REBUILD_TASK = "knowledge.tasks.communities_rebuild_job"


def _rebuild_work(job: Job) -> JobOutcome:
    return communities_rebuild(project_id=job.project_id, job=job)


def communities_rebuild(*, project_id: str, job: Job | None = None) -> JobOutcome:
    """Rebuild a project's communities; rebuilds of one project run one at a time (Redis lock)."""
    lock = get_redis().lock(f"kp:communities:lock:{project_id}", timeout=3600, blocking_timeout=1800)
    if not lock.acquire():
        raise RuntimeError("another community rebuild of this project is still running")
    try:
        return _rebuild(project_id=project_id, job=job)
    finally:
        try:
            lock.release()
        except Exception:  # noqa: BLE001 - an expired lock is fine
            logger.warning("community lock of %s had expired", project_id)


def _rebuild(*, project_id: str, job: Job | None) -> JobOutcome:
    started = time.perf_counter()

    def progress(phase: str, pct: int, summary: str) -> None:
        if job is not None:
            job_progress(job, message_type="ingestion_progress", phase=phase, pct=pct, summary=summary)

    with usage_meter() as usage:
        progress("communities", 2, "Embedding entities added since the last enrichment")
        embedded = entities_embed_missing(project_id=project_id)
        progress("communities", 5, "Reading the entity graph")
        rows = graph.read(cypher.ENTITY_GRAPH, project_id=project_id)
        edges = [(r["source"], r["target"], float(r["weight"] or 1.0)) for r in rows]
        progress("communities", 20, f"Clustering {len(edges)} relations (hierarchical Leiden)")
        levels = build_hierarchy(
            edges,
            max_levels=settings.COMMUNITY_MAX_LEVELS,
            max_cluster_size=settings.COMMUNITY_MAX_CLUSTER_SIZE,
        )
        ids = {key: str(uuid.uuid4()) for level in levels for key in level}
        progress("communities", 40, f"Summarising {len(ids)} communities")
        communities = _summarised(project_id, levels, ids)
        progress("communities", 70, "Embedding community summaries")
        vectors = get_embedder().embed([c["summary"] for c in communities]) if communities else []
        for community, vector in zip(communities, vectors, strict=True):
            community["embedding"] = vector
        progress("communities", 90, "Writing communities")
        _write_communities(project_id, levels, ids, communities)
    result = {
        "communities": len(communities),
        "levels": len(levels),
        "entities_embedded": embedded,
        "per_level": [len(level) for level in levels],
        "seconds": round(time.perf_counter() - started, 3),
        "mode": "llm" if llm_configured() else "extractive",
    }
    return JobOutcome(
        counts=result,
        summary=f"{len(communities)} communities on {len(levels)} level(s)",
        timings={"wall_sec": result["seconds"]},
        token_usage=usage.as_dict(),
    )


def _summarised(
    project_id: str, levels: list[dict[str, list[str]]], ids: dict[str, str]
) -> list[dict[str, Any]]:
    """A row per community of every level: its title, summary and rating from the material of its
    entities (those of the communities below it, for a higher level)."""
    entity_members: dict[str, list[str]] = {}
    for depth, level in enumerate(levels):
        for key, members in level.items():
            entity_members[key] = members if depth == 0 else [e for m in members for e in entity_members[m]]
    material_rows = graph.read(
        cypher.COMMUNITY_MATERIAL,
        project_id=project_id,
        communities=[{"key": k, "entity_ids": v[:50]} for k, v in entity_members.items()],
    )
    material = {r["key"]: r["members"] for r in material_rows}
    communities: list[dict[str, Any]] = []
    for depth, level in enumerate(levels):
        for key in level:
            title, summary, rating = _summarise(material.get(key, []))
            size = len(entity_members[key])
            communities.append(
                {
                    "id": ids[key],
                    "community": key,
                    "level": depth,
                    "title": title,
                    "summary": summary,
                    "size": size,
                    "rank": float(rating) if rating is not None else float(size),
                }
            )
    return communities


def _write_communities(
    project_id: str,
    levels: list[dict[str, list[str]]],
    ids: dict[str, str],
    communities: list[dict[str, Any]],
) -> None:
    """Replace the project's communities in one transaction: the new ones, their entity members (the
    lowest level), parent links between levels, and each chunk's communities."""
    member_links = [
        {"entity_id": e, "community_id": ids[key]}
        for key, members in (levels[0].items() if levels else [])
        for e in members
    ]
    parent_links = [
        {"child": ids[child], "parent": ids[key]}
        for level in levels[1:]
        for key, members in level.items()
        for child in members
    ]

    def write(tx: ManagedTransaction) -> None:
        tx.run(cypher.COMMUNITIES_DELETE, project_id=project_id).consume()
        tx.run(cypher.COMMUNITIES_CREATE, project_id=project_id, communities=communities).consume()
        tx.run(cypher.COMMUNITY_MEMBERS_LINK, project_id=project_id, links=member_links).consume()
        tx.run(cypher.COMMUNITY_PARENTS_LINK, links=parent_links).consume()
        tx.run(cypher.CHUNK_COMMUNITIES_LINK, project_id=project_id).consume()

    graph.write_tx(write)


def entities_embed_missing(*, project_id: str, batch: int = 2000) -> int:
    """Enrichment after ingestion: name embeddings for entities that have none yet."""
    embedder = get_embedder()
    done = 0
    while True:
        rows = graph.read(cypher.ENTITIES_WITHOUT_EMBEDDING, project_id=project_id, limit=batch)
        if not rows:
            return done
        vectors = embedder.embed([r["name"] for r in rows])
        graph.write(
            cypher.ENTITY_EMBEDDINGS_SET,
            project_id=project_id,
            rows=[{"id": r["id"], "embedding": v} for r, v in zip(rows, vectors, strict=True)],
        )
        done += len(rows)


# --- debounced automatic rebuild ---------------------------------------------------------------------


def _due_key(project_id: str) -> str:
    return f"kp:communities:due:{project_id}"


def _scheduled_key(project_id: str) -> str:
    return f"kp:communities:scheduled:{project_id}"


def communities_schedule(*, project_id: str) -> None:
    """Ask for a rebuild once ingestion has been quiet for COMMUNITY_REBUILD_DELAY_SEC."""
    delay = settings.COMMUNITY_REBUILD_DELAY_SEC
    if delay < 0:
        return
    client = get_redis()
    client.set(_due_key(project_id), time.time() + delay, ex=int(delay) + 3600)
    if client.set(_scheduled_key(project_id), "1", nx=True, ex=int(delay) + 3600):
        current_app.send_task(
            "knowledge.tasks.communities_rebuild_when_quiet",
            args=(project_id,),
            countdown=delay,
            queue=settings.INGEST_QUEUE,
        )


def communities_rebuild_if_quiet(*, project_id: str) -> float | None:
    """Rebuild when the due time has passed; else return the seconds still to wait."""
    client = get_redis()
    due = float(client.get(_due_key(project_id)) or 0)
    wait = due - time.time()
    if wait > 0.5:
        return wait
    client.delete(_scheduled_key(project_id))
    job = job_create(
        project_id=project_id, kind="communities", task=REBUILD_TASK, queue=settings.INGEST_QUEUE
    )
    try:
        job_execute(job.id, _rebuild_work, message_type="ingestion_progress")
    except Exception as exc:
        job_fail(job_id=job.id, error=failure_reason(exc))
        raise
    return None
