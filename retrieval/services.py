"""Search: resolve filters to a scope, rank with a retriever, enrich the hits, format a context."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future
from typing import Any

from django.conf import settings
from django.db import transaction

from core import graph
from core.embeddings import get_embedder
from core.errors import InvalidInput
from core.graph.schema import ensure_schema
from core.models import Project
from core.services import project_embedder_check
from core.text.metadata import encode_pair
from knowledge.pipeline.parsing import standardise_source_path
from retrieval import cypher, profiles
from retrieval.dto import Candidate, Scope, SearchFilters, SearchItem, SearchResult
from retrieval.models import RetrievalProfile, RetrievalProfileVersion
from retrieval.retrievers import RETRIEVERS, HybridRetriever, Query, VectorRetriever
from retrieval.selectors import profile_get


def _scope(project_id: str, filters: SearchFilters) -> Scope | None:
    """The project, narrowed by the filters to some documents; None when no document matches."""
    if filters.empty:
        return Scope(project_id=project_id)
    prefix = None
    if filters.source_path_prefix:
        prefix = standardise_source_path(filters.source_path_prefix) or ""
        if filters.source_path_prefix.rstrip().endswith(("/", "\\")) and not prefix.endswith("/"):
            prefix += "/"
    rows = graph.read(
        cypher.DOCUMENTS_MATCHING,
        project_id=project_id,
        ids=filters.document_ids,
        prefix=prefix,
        pairs=[encode_pair(k, v) for k, v in filters.metadata.items()],
        limit=settings.RETRIEVAL_FILTER_MAX_DOCUMENTS + 1,
    )
    if len(rows) > settings.RETRIEVAL_FILTER_MAX_DOCUMENTS:
        raise InvalidInput(
            f"the filters match more than {settings.RETRIEVAL_FILTER_MAX_DOCUMENTS} documents; narrow them",
            details={"field": "filters"},
        )
    if not rows:
        return None
    return Scope(project_id=project_id, document_ids=sorted(r["id"] for r in rows))


def _item(row: dict[str, Any], prefix: str = "") -> SearchItem:
    metadata: dict[str, Any] = {
        "source_path": row[f"{prefix}source_path"],
        "chunk_index": row[f"{prefix}chunk_index"],
    }
    document_metadata = json.loads(row[f"{prefix}metadata_json"] or "{}")
    if document_metadata:
        metadata["document_metadata"] = document_metadata
    return SearchItem(
        chunk_id=row[f"{prefix}chunk_id"],
        document_id=row[f"{prefix}document_id"],
        document_name=row[f"{prefix}document_name"],
        text=row.get("text") or "",
        score=float(row.get("score") or 0.0),
        metadata=metadata,
    )


def _enrich(project_id: str, ranked: list[Candidate], profile: RetrievalProfile | None) -> list[SearchItem]:
    hits = [{"chunk_id": c.chunk_id, "score": c.score} for c in ranked]
    if not hits:
        return []
    if profile is None:
        rows = graph.read(cypher.HITS_HYDRATE, project_id=project_id, hits=hits)
        by_id = {r["chunk_id"]: _item(r) for r in rows}
        return [by_id[c.chunk_id] for c in ranked if c.chunk_id in by_id]
    rows = profiles.profile_run(
        body=profile.retrieval_query, columns=profile.columns, project_id=project_id, hits=hits
    )
    items: dict[str, SearchItem] = {}
    extra_columns = [c for c in profile.columns if c not in profiles.REQUIRED_COLUMNS]
    for row in rows:
        if row["__chunk_id"] in items:  # a profile may return several rows per hit: keep the first
            continue
        item = _item(row, prefix="__")
        item.extras = {c: row.get(c) for c in extra_columns}
        item.metadata.update(item.extras)
        items[row["__chunk_id"]] = item
    # the profile's score decides the order; the retriever's order breaks ties
    order = {c.chunk_id: i for i, c in enumerate(ranked)}
    return sorted(items.values(), key=lambda it: (-it.score, order[str(it.chunk_id)]))


def _format_value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_format_value(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def context_format(items: list[SearchItem]) -> str:
    """Seed 000's context text: `[Score: 0.892] [key: value] …` then the text, one block per item."""
    blocks = []
    for item in items:
        head = [f"[Score: {item.score:.3f}]", f"[document: {item.document_name}]"]
        head += [
            f"[{key}: {_format_value(value)}]"
            for key, value in item.extras.items()
            if value is not None and value != [] and value != ""
        ]
        blocks.append(" ".join(head) + "\n" + item.text)
    return "\n\n".join(blocks)


def search_run(
    *,
    project_id: str,
    query: str,
    mode: str,
    top_k: int,
    filters: SearchFilters | None = None,
    profile_name: str | None = None,
    include_context: bool = False,
    feedback: bool | None = None,
    debug: bool = False,
    vector: list[float] | Future[list[float]] | None = None,
) -> SearchResult:
    """`feedback` turns hybrid's feedback round on or off for this search (None: the setting);
    `debug` returns what graph mode linked and seeded; `vector` is the query's embedding when the
    caller has it already, or the Future of one being computed (taken only when a retriever needs
    it: hybrid's fulltext query runs meanwhile), computed here otherwise."""
    started = time.perf_counter()
    if mode not in RETRIEVERS:
        raise InvalidInput(f"unknown mode {mode!r}", details={"field": "mode", "modes": sorted(RETRIEVERS)})
    profile = profile_get(name=profile_name, project_id=project_id) if profile_name else None
    if mode != "fulltext":
        project_embedder_check(project=Project.objects.get(pk=project_id))
    ensure_schema()
    if isinstance(vector, Future):
        pending = vector
        q = Query(text=query, embed=lambda _text: pending.result())
    else:
        q = Query(text=query, embed=get_embedder().embed_one, _vector=vector)
    scope = _scope(project_id, filters or SearchFilters())
    ranked: list[Candidate] = []
    if scope is not None:
        retriever = (
            HybridRetriever(scope=scope, feedback=feedback)
            if mode == "hybrid"
            else RETRIEVERS[mode](scope=scope)
        )
        ranked = retriever.search(q, limit=top_k)
    enrich_started = time.perf_counter()
    items = _enrich(project_id, ranked, profile)[:top_k]
    q.timings_ms["enrichment"] = (time.perf_counter() - enrich_started) * 1000
    return SearchResult(
        items=items,
        mode=mode,
        profile={"name": profile.name, "version": profile.version} if profile else None,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
        timings_ms={k: round(v, 2) for k, v in q.timings_ms.items()},
        context=context_format(items) if include_context else None,
        debug=q.debug if debug else None,
        fallback=q.fallback,
    )


def chunks_nearest(
    *, project_id: str, document_ids: list[str], vector: list[float], top_k: int
) -> list[SearchItem]:
    """The `top_k` chunks of these documents nearest `vector`, ranked as vector search ranks them.
    Neo4j only, no SQL (callable from a worker thread): the caller has checked the project's
    embedder, as `search_run` does."""
    if not document_ids:
        return []
    ensure_schema()
    scope = Scope(project_id=project_id, document_ids=sorted(set(document_ids)))
    query = Query(text="", embed=get_embedder().embed_one, _vector=vector)
    return _enrich(project_id, VectorRetriever(scope=scope).search(query, limit=top_k), None)[:top_k]


# --- profiles ---------------------------------------------------------------------------------------


def profile_save(
    *,
    name: str,
    retrieval_query: str,
    description: str = "",
    enabled: bool = True,
    project_id: str | None = None,
    user: str = "",
    builtin: bool = False,
) -> RetrievalProfile:
    """Create or change a profile: validated with EXPLAIN first, then a new version is recorded."""
    columns = profiles.profile_check(retrieval_query)
    body = retrieval_query.strip().rstrip(";").strip()
    with transaction.atomic():
        profile = RetrievalProfile.objects.select_for_update().filter(name=name).first()
        if profile is None:
            profile = RetrievalProfile(name=name, version=0, builtin=builtin)
        changed = profile.retrieval_query != body or profile.columns != columns
        profile.description = description
        profile.enabled = enabled
        profile.project_id = project_id
        profile.updated_by = user
        if changed or profile.pk is None:
            profile.version += 1
            profile.retrieval_query, profile.columns = body, columns
        profile.full_clean()
        profile.save()
        if changed:
            RetrievalProfileVersion.objects.create(
                profile=profile,
                version=profile.version,
                retrieval_query=body,
                columns=columns,
                created_by=user,
            )
    return profile
