"""DRIFT search (seed 002): primer on communities, concurrent community-scoped follow-ups, aggregation.

initializing → expanding_query (HyDE) → retrieving_communities (hierarchical primer, sample chunks)
→ executing_followup × rounds (scoped hybrid retrieval + neighbourhood, local answers)
→ aggregating_results → completed            (or error, then the exception propagates)
"""

from __future__ import annotations

import contextvars
import logging
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core.embeddings import get_embedder
from core.errors import PlatformError
from core.graph.schema import ensure_schema
from core.llm.client import LLMInvalidOutput, llm_configured
from core.models import Project
from core.services import project_embedder_check
from retrieval.drift import citations, selectors
from retrieval.drift.dto import (
    ChunkInfo,
    Community,
    DriftOutcome,
    Followup,
    FollowupContext,
    FollowupResult,
)
from retrieval.drift.progress import Reporter
from retrieval.drift.strategies import Primer, Strategy, strategy_for
from retrieval.dto import Candidate, Scope
from retrieval.retrievers import (
    FulltextRetriever,
    GraphRetriever,
    Query,
    VectorRetriever,
    hybrid_depth,
)
from retrieval.search_core import fuse

logger = logging.getLogger("retrieval.drift")

# Chunks of the question's own search (extractive mode): evidence, and the best of them expand the query.
EVIDENCE_CHUNKS = 5
EXPANSION_CHUNKS = 3

_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="drift")


class _Run:
    """State of one retrieval shared by its steps: every chunk seen (for citation mapping)."""

    def __init__(self, *, project_id: str, query: str, strategy: Strategy, reporter: Reporter) -> None:
        self.project_id = project_id
        self.query = query
        self.strategy = strategy
        self.reporter = reporter
        self.known: dict[str, ChunkInfo] = {}
        self.valid_ids: set[str] = set()
        self.timings_ms: dict[str, float] = {}
        # community id → its chunk ids and their documents (read early)
        self.scopes: dict[str, Future[tuple[list[str], list[str]]]] = {}

    def remember(self, chunks: list[ChunkInfo]) -> None:
        for chunk in chunks:
            self.known.setdefault(chunk.chunk_id, chunk)
            self.valid_ids.add(chunk.chunk_id)

    def timed(self, name: str, started: float) -> None:
        self.timings_ms[name] = round(
            self.timings_ms.get(name, 0.0) + (time.perf_counter() - started) * 1000, 2
        )


def _no_data(run: _Run, reason: str, stats: dict[str, Any]) -> DriftOutcome:
    run.reporter.phase("completed", "No data found for this question", reason)
    return DriftOutcome(
        final_answer="",
        key_facts=[],
        residual_uncertainty="",
        mode=run.strategy.mode,
        no_data_found=True,
        stats=stats,
    )


def drift_search(
    *,
    project_id: str,
    query: str,
    top_k: int | None = None,
    max_depth: int | None = None,
    max_followups: int | None = None,
    community_level: int | None = None,
    retrieval_id: str | None = None,
) -> tuple[DriftOutcome, dict[str, Any]]:
    """Run DRIFT for `query` in the project. Returns the outcome and its usage/timing figures."""
    started = time.perf_counter()
    retrieval_id = retrieval_id or str(uuid.uuid4())
    reporter = Reporter(project_id=project_id, retrieval_id=retrieval_id)
    reporter.phase("initializing", "Starting DRIFT search", f"**Question:** {query[:300]}")
    strategy = strategy_for(llm=llm_configured())
    run = _Run(project_id=project_id, query=query, strategy=strategy, reporter=reporter)
    try:
        outcome = _pipeline(
            run,
            top_k=top_k or settings.DRIFT_TOP_K,
            max_depth=max_depth or settings.DRIFT_MAX_DEPTH,
            max_followups=max_followups or settings.DRIFT_MAX_FOLLOWUPS,
            community_level=community_level,
        )
    except Exception as exc:
        code = exc.code if isinstance(exc, PlatformError) else "internal_error"
        reporter.error("DRIFT search failed", f"**{code}**: {str(exc)[:300]}")
        raise
    figures = {
        "retrieval_id": retrieval_id,
        "usage": strategy.meter.as_dict(),
        "took_ms": round((time.perf_counter() - started) * 1000, 2),
        "timings_ms": run.timings_ms,
    }
    return outcome, figures


def _pipeline(
    run: _Run, *, top_k: int, max_depth: int, max_followups: int, community_level: int | None
) -> DriftOutcome:
    project_embedder_check(project=Project.objects.get(pk=run.project_id))
    ensure_schema()
    stats = selectors.project_stats(project_id=run.project_id)
    outcome_stats: dict[str, Any] = {"communities": 0, "followups": 0, "depth": 0, "chunks_retrieved": 0}
    if stats["chunks"] == 0:
        return _no_data(run, "The project has no chunks yet.", outcome_stats)
    embedder = get_embedder()
    expanded = _expand_query(run, embedder)
    communities, samples = _retrieve_communities(
        run, expanded.vector, stats, top_k=top_k, community_level=community_level, embedder=embedder
    )
    outcome_stats["communities"] = len(communities)
    if not expanded.relevant:
        return _no_data(run, "Nothing in the project is close to this question.", outcome_stats)
    primer = _prime(run, communities, samples, evidence=expanded.evidence, max_followups=max_followups)
    results = _follow_up(
        run, primer, max_depth=max_depth, max_followups=max_followups, embedder=embedder, stats=outcome_stats
    )
    outcome_stats["followups"] = len(results)
    outcome_stats["chunks_retrieved"] = len(run.valid_ids)
    return _aggregate(run, primer, results, outcome_stats)


@dataclass
class _Expanded:
    vector: list[float]  # of the question with its expansion: the primer and follow-ups search by it
    relevant: bool  # something in the project is close to the question itself
    evidence: list[ChunkInfo]  # extractive mode: the question's own graph search


def _expand_query(run: _Run, embedder: Any) -> _Expanded:
    """expanding_query: HyDE (with an LLM) or pseudo-relevance feedback from the question's own graph
    search (without); the question's vector and relevance check run meanwhile."""
    run.reporter.phase("expanding_query", "Expanding the question (HyDE)")
    t = time.perf_counter()

    def question_check() -> tuple[list[float], bool]:
        query_vector = embedder.embed_one(run.query)
        return query_vector, _relevant(run, query_vector=query_vector)

    checked = _pool.submit(contextvars.copy_context().run, question_check)
    hits: list[ChunkInfo] = []
    if run.strategy.mode == "extractive":
        # DRIFT's expansion is itself a feedback step: hybrid's own feedback round is not run here
        found = GraphRetriever(scope=Scope(project_id=run.project_id), feedback=False).search(
            Query(text=run.query, embed=embedder.embed_one), limit=EVIDENCE_CHUNKS
        )
        hits = _hydrate(run, [(c.chunk_id, c.score) for c in found])
    expansion = run.strategy.expand(run.query, hits=hits[:EXPANSION_CHUNKS])
    run.timed("expanding_query", t)
    t = time.perf_counter()
    query_vector, relevant = checked.result()
    vector = embedder.embed_one(f"{run.query}\n\n{expansion}") if expansion else query_vector
    run.timed("embedding", t)
    run.reporter.phase(
        "expanding_query",
        "Query expanded",
        f"**Hypothetical answer:** {expansion[:400]}" if expansion else "No expansion",
    )
    return _Expanded(vector=vector, relevant=relevant, evidence=hits)


def _retrieve_communities(
    run: _Run,
    vector: list[float],
    stats: dict[str, Any],
    *,
    top_k: int,
    community_level: int | None,
    embedder: Any,
) -> tuple[list[Community], dict[str, list[ChunkInfo]]]:
    """retrieving_communities: the hierarchical primer's communities and sample chunks of each; with
    no community graph (yet), the project's closest chunks stand in."""
    run.reporter.phase("retrieving_communities", "Finding the communities closest to the question")
    t = time.perf_counter()
    communities = selectors.primer_communities(
        project_id=run.project_id,
        vector=vector,
        k=top_k,
        max_level=stats["max_level"],
        level=community_level,
        level_sizes=stats["level_sizes"],
        population=stats["population"],
    )
    samples = selectors.sample_chunks(
        project_id=run.project_id,
        community_ids=[c.id for c in communities],
        vector=vector,
        per=settings.DRIFT_SAMPLE_CHUNKS,
    )
    run.remember([chunk for chunks in samples.values() for chunk in chunks])
    if not communities:
        found = GraphRetriever(scope=Scope(project_id=run.project_id), feedback=False).search(
            Query(text=run.query, embed=embedder.embed_one, _vector=vector),
            limit=settings.DRIFT_SAMPLE_CHUNKS * 2,
        )
        _hydrate(run, [(c.chunk_id, c.score) for c in found])
    run.timed("retrieving_communities", t)
    return communities, samples


def _prime(
    run: _Run,
    communities: list[Community],
    samples: dict[str, list[ChunkInfo]],
    *,
    evidence: list[ChunkInfo],
    max_followups: int,
) -> Primer:
    """The primer's first follow-ups; the primer communities' chunk sets are read meanwhile."""
    levels = sorted({c.level for c in communities}, reverse=True)
    run.reporter.phase(
        "retrieving_communities",
        f"Found {len(communities)} communities"
        + (f" (levels {', '.join(map(str, levels))})" if levels else ""),
        "\n".join(f"- **{c.title}** (level {c.level}, score {c.score:.3f})" for c in communities),
    )
    t = time.perf_counter()
    for com in communities:
        run.scopes[com.id] = _pool.submit(
            selectors.community_scope, project_id=run.project_id, community_ids=[com.id]
        )
    primer = run.strategy.primer(run.query, communities, samples, max_followups=max_followups)
    primer.evidence = evidence
    run.timed("primer", t)
    if not communities:
        for f in primer.followups:
            f.targets = []
    return primer


def _follow_up(
    run: _Run, primer: Primer, *, max_depth: int, max_followups: int, embedder: Any, stats: dict[str, Any]
) -> list[FollowupResult]:
    """executing_followup: rounds of concurrent, community-scoped follow-ups; each round asks the
    new follow-ups of the most confident answers that want to go on."""
    results: list[FollowupResult] = []
    pending = primer.followups[:max_followups]
    for depth in range(1, max_depth + 1):
        if not pending:
            break
        for f in pending:
            f.depth = depth
        round_results = _round(run, pending, depth=depth, max_depth=max_depth, embedder=embedder)
        results += round_results
        stats["depth"] = depth
        ranked = sorted((r for r in round_results if r.should_continue), key=lambda r: -r.confidence)
        asked = {f.question.lower() for f in [*primer.followups, *(r.followup for r in results)]}
        pending = []
        for r in ranked:
            for f in r.new_followups:
                if f.question.lower() not in asked and len(pending) < max_followups:
                    asked.add(f.question.lower())
                    pending.append(f)
    return results


def _aggregate(
    run: _Run, primer: Primer, results: list[FollowupResult], stats: dict[str, Any]
) -> DriftOutcome:
    """aggregating_results: the final answer and its key facts, citations mapped to known chunks."""
    cited = {c["chunk_id"]: c for r in results for c in r.citations}
    names = citations.document_names(cited.values())
    run.reporter.phase(
        "aggregating_results",
        f"Aggregating {len(results)} follow-up answers",
        ("**Sources:** " + ", ".join(names)) if names else "",
    )
    t = time.perf_counter()
    aggregate = run.strategy.aggregate(run.query, primer, results, known=run.known)
    run.timed("aggregating_results", t)
    key_facts = [
        {
            "fact": fact,
            "citations": citations.enrich(ids, cited=cited, known=run.known, valid_ids=run.valid_ids),
        }
        for fact, ids in aggregate.facts
    ]
    final_names = citations.document_names(c for f in key_facts for c in f["citations"])
    run.reporter.phase(
        "completed",
        "DRIFT search complete",
        ("**Sources:** " + ", ".join(f"[{n}]" for n in final_names)) if final_names else "",
    )
    return DriftOutcome(
        final_answer=aggregate.final_answer,
        key_facts=key_facts,
        residual_uncertainty=aggregate.residual_uncertainty,
        mode=run.strategy.mode,
        stats=stats,
    )


def _hydrate(run: _Run, scored: list[tuple[str, float]]) -> list[ChunkInfo]:
    ids = list(dict.fromkeys(i for i, _s in scored))
    infos = selectors.chunks_hydrate(
        project_id=run.project_id, chunk_ids=[i for i in ids if i not in run.known]
    )
    run.remember(list(infos.values()))
    score: dict[str, float] = {}
    for i, s in scored:
        score.setdefault(i, s)
    out = []
    for i in ids:
        info = run.known.get(i)
        if info is not None:
            out.append(ChunkInfo(info.chunk_id, info.document_id, info.document_name, info.text, score[i]))
    return out


def _relevant(run: _Run, *, query_vector: list[float]) -> bool:
    """Something is relevant when a chunk is close enough to the question itself (not to its HyDE
    expansion, which an LLM writes for any question) or a term of the question is in a chunk's text."""
    scope = Scope(project_id=run.project_id)
    query = Query(text=run.query, embed=lambda _t: query_vector)
    best = VectorRetriever(scope=scope).search(query, limit=1)
    if best and best[0].score >= settings.DRIFT_MIN_RELEVANCE:
        return True
    return bool(FulltextRetriever(scope=scope).bm25(query, limit=1))


def _round(
    run: _Run, followups: list[Followup], *, depth: int, max_depth: int, embedder: Any
) -> list[FollowupResult]:
    """One round: the follow-ups run side by side (at most DRIFT_CONCURRENCY); one that fails or takes
    longer than DRIFT_FOLLOWUP_TIMEOUT_SEC is dropped with a warning, the others go on."""
    low = 40 + 40 * (depth - 1) // max_depth
    span = 40 // max_depth
    texts = [f.text for f in followups]
    # BM25 needs no vector: each follow-up's scoped fulltext search runs while the questions embed
    lexical = [_pool.submit(contextvars.copy_context().run, _lexical, run, f) for f in followups]
    t = time.perf_counter()
    for f, vec in zip(followups, embedder.embed(texts), strict=True):
        f.vector = vec
    run.timed("embedding", t)
    run.reporter.phase(
        "executing_followup",
        f"Round {depth}: {len(followups)} follow-up question{'s' if len(followups) != 1 else ''}",
        "\n".join(f"- {f.question}" for f in followups),
        pct=low,
    )
    results: list[FollowupResult] = []
    limit = max(1, settings.DRIFT_CONCURRENCY)
    queue = list(zip(followups, lexical, strict=True))
    running: dict[Future[FollowupResult], Followup] = {}
    deadline: dict[Future[FollowupResult], float] = {}
    done_count = 0
    while queue or running:
        while queue and len(running) < limit:
            f, found_by_text = queue.pop(0)
            ctx = contextvars.copy_context()
            future = _pool.submit(ctx.run, _followup, run, f, found_by_text)
            running[future] = f
            deadline[future] = time.monotonic() + settings.DRIFT_FOLLOWUP_TIMEOUT_SEC
        timeout = max(0.0, min(deadline[fu] for fu in running) - time.monotonic())
        finished, _ = wait(list(running), timeout=timeout, return_when=FIRST_COMPLETED)
        now = time.monotonic()
        for future in list(running):
            f = running[future]
            if future in finished:
                done_count += 1
                del running[future]
                try:
                    result = future.result()
                except LLMInvalidOutput as exc:
                    _drop(run, f, "drift_followup_invalid_output", exc.message)
                    continue
                except PlatformError as exc:
                    if exc.status_code >= 500 and exc.code != "llm_invalid_output":
                        raise  # the LLM or the database is down: the search fails
                    _drop(run, f, "drift_followup_failed", exc.message)
                    continue
                results.append(result)
                _report_followup(
                    run,
                    result,
                    pct=low + span * done_count // len(followups),
                    n=done_count,
                    total=len(followups),
                )
            elif now >= deadline[future]:
                done_count += 1
                del running[future]
                future.cancel()
                _drop(
                    run,
                    f,
                    "drift_followup_timeout",
                    f"no answer within {settings.DRIFT_FOLLOWUP_TIMEOUT_SEC}s",
                )
    return results


def _drop(run: _Run, followup: Followup, event: str, reason: str) -> None:
    logger.warning(
        event, extra={"drift": {"event": event, "question": followup.question[:200], "reason": reason[:300]}}
    )
    run.reporter.phase("executing_followup", f"Follow-up dropped: {followup.question[:120]}", reason[:300])


def _report_followup(run: _Run, result: FollowupResult, *, pct: int, n: int, total: int) -> None:
    lines = citations.followup_lines(result.citations)
    details = f"**{result.followup.question}**\n\n{citations.excerpt(result.answer, 400)}"
    if lines:
        details += "\n\n" + "\n".join(f"- {line}" for line in lines)
    run.reporter.phase(
        "executing_followup",
        f"Follow-up {n}/{total} answered (confidence {result.confidence:.2f})",
        details,
        pct=pct,
    )


def _followup_scope(run: _Run, targets: list[str]) -> Scope:
    """The chunks under the target communities, and their documents (which let the fulltext index
    narrow its search): from the sets read during the primer when there are."""
    if not targets:
        return Scope(project_id=run.project_id)
    if all(t in run.scopes for t in targets):
        chunk_ids: set[str] = set()
        document_ids: set[str] = set()
        for target in targets:
            chunks, documents = run.scopes[target].result()
            chunk_ids.update(chunks)
            document_ids.update(documents)
        return Scope(
            project_id=run.project_id, chunk_ids=sorted(chunk_ids), document_ids=sorted(document_ids)
        )
    chunks, documents = selectors.community_scope(project_id=run.project_id, community_ids=targets)
    return Scope(project_id=run.project_id, chunk_ids=chunks, document_ids=documents)


def _lexical(run: _Run, followup: Followup) -> tuple[Scope, list[Candidate]]:
    """A follow-up's scope and its fulltext candidates there (as deep as a hybrid search's)."""
    scope = _followup_scope(run, followup.targets)
    q = Query(text=followup.text, embed=lambda _t: [])
    return scope, FulltextRetriever(scope=scope).bm25(q, limit=hybrid_depth(settings.DRIFT_FOLLOWUP_CHUNKS))


def _followup(
    run: _Run, followup: Followup, lexical: Future[tuple[Scope, list[Candidate]]]
) -> FollowupResult:
    """Scoped retrieval over the target communities' chunks as graph mode ranks (vector + the
    fulltext candidates found meanwhile, fused as a hybrid search fuses them, then walked from the
    titles the follow-up names and those hits), neighbourhood expansion, then the local answer."""
    project_id = run.project_id
    scope, by_text = lexical.result()
    assert followup.vector is not None
    q = Query(text=followup.text, embed=lambda _t: [], _vector=followup.vector)
    by_vector = VectorRetriever(scope=scope).search(q, limit=hybrid_depth(settings.DRIFT_FOLLOWUP_CHUNKS))
    found = GraphRetriever(scope=scope).walk(
        q, fuse(by_vector, by_text), limit=settings.DRIFT_FOLLOWUP_CHUNKS
    )
    score = {c.chunk_id: c.score for c in found}
    # texts, neighbourhoods and neighbour texts in one round trip
    infos, hoods, neighbour_infos = selectors.followup_context(project_id=project_id, chunk_ids=list(score))
    hits = [ChunkInfo(c.chunk_id, c.document_id, c.document_name, c.text, score[c.chunk_id]) for c in infos]
    hit_ids = {c.chunk_id for c in hits}
    neighbour_pool = [n for n in neighbour_infos if n.chunk_id not in hit_ids]
    neighbour_ids = [n.chunk_id for n in neighbour_pool]
    neighbours = neighbour_pool[: settings.DRIFT_NEIGHBOUR_CHUNKS]
    run.remember([*hits, *neighbours])
    valid = hit_ids | set(neighbour_ids)
    run.valid_ids.update(valid)
    context = FollowupContext(chunks=[*hits, *neighbours], neighbourhoods=hoods, valid_ids=valid)
    return run.strategy.local(run.query, followup, context)
