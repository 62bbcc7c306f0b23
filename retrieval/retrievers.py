"""Retrievers: one base class; vector, fulltext, hybrid and graph search.

A retriever ranks chunk ids within a `Scope` (a project, optionally some of its documents) and
returns `Candidate`s; turning candidates into items (text, document, profile columns) is the
enrichment step in `retrieval.services`.
"""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from neo4j.exceptions import ClientError

from core import graph
from knowledge import tenancy
from retrieval import cypher, lucene, passage_graph, search_core
from retrieval.dto import Candidate, Scope

# Lucene rejects boolean queries with more than 1024 clauses; above this many document ids the
# filter is applied after the fulltext query instead of inside it.
LUCENE_MAX_DOCUMENT_CLAUSES = 500

_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="retrieval")


@dataclass
class Query:
    """The query text and, computed at most once and only when a retriever needs it, its vector."""

    text: str
    embed: Callable[[str], list[float]]
    timings_ms: dict[str, float] = field(default_factory=dict)
    # extra fulltext terms, searched at RETRIEVAL_FEEDBACK_TERM_BOOST (hybrid's feedback round)
    expansion: list[str] = field(default_factory=list)
    # graph mode: what it linked and seeded (the response's debug block), and why it ranked by
    # hybrid instead, when it did
    debug: dict[str, Any] = field(default_factory=dict)
    fallback: dict[str, str] | None = None
    _vector: list[float] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def vector(self) -> list[float]:
        with self._lock:
            if self._vector is None:
                started = time.perf_counter()
                self._vector = self.embed(self.text)
                self.timings_ms["embedding"] = (time.perf_counter() - started) * 1000
            return self._vector


class Retriever(ABC):
    name: str

    def __init__(self, *, scope: Scope) -> None:
        self.scope = scope

    def search(self, query: Query, *, limit: int) -> list[Candidate]:
        started = time.perf_counter()
        found = self._search(query, limit=limit)
        query.timings_ms[self.name] = (time.perf_counter() - started) * 1000
        return found[:limit]

    @abstractmethod
    def _search(self, query: Query, *, limit: int) -> list[Candidate]: ...

    def _params(self) -> dict[str, object]:
        return {
            "project_id": self.scope.project_id,
            "document_ids": self.scope.document_ids,
            "chunk_ids": self.scope.chunk_ids,
        }


# --- scope sizes ---------------------------------------------------------------------------------

_sizes: dict[str, tuple[float, int]] = {}
_sizes_lock = threading.Lock()


def scope_size(scope: Scope) -> int:
    """Chunks in the scope. A whole project's size is cached for RETRIEVAL_SIZE_CACHE_SEC: it only
    steers exact-vs-index, never which results are right."""
    now = time.monotonic()
    if scope.document_ids is None:
        with _sizes_lock:
            cached = _sizes.get(scope.project_id)
        if cached and cached[0] > now:
            return cached[1]
    row = graph.read(cypher.SCOPE_SIZE, project_id=scope.project_id, document_ids=scope.document_ids)[0]
    size = int(row["size"])
    # an empty project is not cached: a size of 0 skips the query, so it would decide the results
    # (a project's first chunks, written by a worker, unseen here for RETRIEVAL_SIZE_CACHE_SEC)
    if scope.document_ids is None and size > 0:
        with _sizes_lock:
            _sizes[scope.project_id] = (now + settings.RETRIEVAL_SIZE_CACHE_SEC, size)
    return size


def forget_scope_sizes() -> None:
    with _sizes_lock:
        _sizes.clear()


# --- retrievers ------------------------------------------------------------------------------------


def _candidates(rows: list[dict[str, object]]) -> list[Candidate]:
    return [Candidate(chunk_id=str(r["chunk_id"]), score=float(r["score"])) for r in rows]  # type: ignore[arg-type]


class VectorRetriever(Retriever):
    """Cosine similarity to the query embedding, correct per tenant.

    Neo4j's vector index cannot pre-filter by project (DESIGN.md section 3), so:
    - a scope of at most RETRIEVAL_EXACT_SCAN_MAX_CHUNKS chunks is scanned exactly;
    - a larger project has its own vector index (on its per-project chunk label), queried for the
      top-k directly, or over-fetched by the share of a document filter;
    - until that index is online (Neo4j fills it in the background), the scope is scanned exactly.
    The over-fetch grows 4× while too few hits survive; past RETRIEVAL_MAX_INDEX_CANDIDATES the scope
    is scanned exactly, so the answer is never short. No index spans other projects' chunks.
    """

    name = "vector"

    def _search(self, query: Query, *, limit: int) -> list[Candidate]:
        if self.scope.chunk_ids is not None:  # a given set of chunks: looked up by id and scored exactly
            if not self.scope.chunk_ids:
                return []
            rows = graph.read(cypher.VECTOR_EXACT_IDS, vector=query.vector(), limit=limit, **self._params())
            return _candidates(rows)
        size = scope_size(self.scope)
        if size == 0:
            return []
        vector = query.vector()
        if size <= settings.RETRIEVAL_EXACT_SCAN_MAX_CHUNKS:
            return self._exact(vector, limit)
        project_id = self.scope.project_id
        project_size = size if self.scope.document_ids is None else scope_size(Scope(project_id=project_id))
        if tenancy.project_index_online(project_id):
            try:
                return self._index(tenancy.chunk_vector_index(project_id), project_size, size, vector, limit)
            except ClientError:  # the index went away: look it up again next time
                tenancy.project_index_forget(project_id)
        return self._exact(vector, limit)

    def _index(
        self, index: str, population: int, size: int, vector: list[float], limit: int
    ) -> list[Candidate]:
        # the index ranks on quantised vectors: its candidates are re-scored exactly in the query
        def index_query(fetch: int) -> list[Candidate]:
            return _candidates(
                graph.read(
                    cypher.VECTOR_INDEX,
                    index=index,
                    fetch=fetch,
                    vector=vector,
                    limit=limit,
                    **self._params(),
                )
            )

        return search_core.over_fetched(
            index_query, lambda: self._exact(vector, limit), limit=limit, population=population, size=size
        )

    def _exact(self, vector: list[float], limit: int) -> list[Candidate]:
        return _candidates(graph.read(cypher.VECTOR_EXACT, vector=vector, limit=limit, **self._params()))


# The response's `fallback` while a project's fulltext index is not online yet.
FULLTEXT_BUILDING = {
    "mode": "vector",
    "reason": "this project's fulltext index is still being built: ranked by vector similarity alone",
}


def fulltext_ready(project_id: str) -> bool:
    """Whether the project's own fulltext index answers queries (its chunks' `search_text`, BM25
    statistics of its own); when it is missing it is asked for. It is online from a project's first
    chunk; it is being built only after an import that stopped waiting for it or an analyzer change
    (`reindex_chunks`), and meanwhile fulltext and hybrid search rank by vector, saying so."""
    return tenancy.project_fulltext_online(project_id)


def _fulltext_building(scope: Scope) -> bool:
    """The project's fulltext index is not online while it has chunks to rank (a project without
    any has nothing to rank either way: its index, just asked for, is online within moments)."""
    return not fulltext_ready(scope.project_id) and scope_size(Scope(project_id=scope.project_id)) > 0


class FulltextRetriever(Retriever):
    """Lucene BM25 over the project's own chunk fulltext index; by vector while that is being built
    (`fulltext_ready`, the query's `fallback` says so)."""

    name = "fulltext"

    def _search(self, query: Query, *, limit: int) -> list[Candidate]:
        if _fulltext_building(self.scope):
            query.fallback = dict(FULLTEXT_BUILDING)
            return VectorRetriever(scope=self.scope).search(query, limit=limit)
        return self.bm25(query, limit=limit)

    def bm25(self, query: Query, *, limit: int) -> list[Candidate]:
        """The Lucene hits alone: none while the project's index is being built."""
        if not fulltext_ready(self.scope.project_id):
            return []
        terms = lucene.query_terms(query.text, max_terms=settings.RETRIEVAL_MAX_QUERY_TERMS)
        ids = self.scope.document_ids
        if self.scope.chunk_ids is not None:
            return self._among_chunks(terms, limit)
        in_lucene = ids is None or len(ids) <= LUCENE_MAX_DOCUMENT_CLAUSES
        text = lucene.chunk_query(
            terms,
            project_id=None,
            document_ids=ids if in_lucene else None,
            expansion=query.expansion,
            expansion_boost=settings.RETRIEVAL_FEEDBACK_TERM_BOOST,
            field="search_text",
        )
        if not text:
            return []
        fetch = limit if in_lucene else limit * 4
        while True:
            rows = self._query(cypher.FULLTEXT, lucene=text, fetch=fetch, limit=limit)
            # Lucene returned fewer than asked: nothing more to find
            if in_lucene or len(rows) >= limit or fetch >= settings.RETRIEVAL_MAX_INDEX_CANDIDATES:
                return _candidates(rows)
            fetch *= 4

    def _query(self, query: str, **params: object) -> list[dict[str, Any]]:
        index = tenancy.chunk_fulltext_index(self.scope.project_id)
        try:
            return graph.read(query, index=index, **params, **self._params())
        except ClientError:  # the project's index went away: look it up again next time
            tenancy.project_fulltext_forget(self.scope.project_id)
            raise

    def _among_chunks(self, terms: list[str], limit: int) -> list[Candidate]:
        """BM25 restricted to the scope's chunk ids.

        When the scope names its chunks' documents (at most LUCENE_MAX_DOCUMENT_CLAUSES), Lucene
        searches only those documents, and the fetch grows 4× only while Lucene filled it. Otherwise
        the project's hits are over-fetched by the set's share of the project. Either way the hits
        are then filtered to the set."""
        chunk_ids = self.scope.chunk_ids or []
        documents = self.scope.document_ids
        if documents is not None and len(documents) > LUCENE_MAX_DOCUMENT_CLAUSES:
            documents = None
        text = lucene.chunk_query(terms, project_id=None, document_ids=documents, field="search_text")
        if not text or not chunk_ids:
            return []
        if documents:
            fetch = limit * 4
            while True:
                row = self._query(cypher.FULLTEXT_AMONG, lucene=text, fetch=fetch)[0]
                if row["fetched"] < fetch or fetch >= settings.RETRIEVAL_MAX_INDEX_CANDIDATES:
                    hits = sorted(row["hits"], key=lambda h: (-h["score"], h["chunk_id"]))
                    return _candidates(hits[:limit])
                fetch = min(fetch * 4, settings.RETRIEVAL_MAX_INDEX_CANDIDATES)
        project_size = scope_size(Scope(project_id=self.scope.project_id))
        share = project_size / max(1, len(chunk_ids))
        fetch = min(settings.RETRIEVAL_MAX_INDEX_CANDIDATES, max(limit * 4, math.ceil(limit * share * 2)))
        return _candidates(self._query(cypher.FULLTEXT, lucene=text, fetch=fetch, limit=limit))


class HybridRetriever(Retriever):
    """Vector and fulltext candidates fused (RETRIEVAL_HYBRID_FUSION: `linear` or `rrf`), then one
    round of pseudo-relevance feedback (RETRIEVAL_HYBRID_FEEDBACK).

    The fulltext query runs on a worker thread while this one embeds the query and runs the vector
    query; the feedback round runs its two queries side by side the same way.

    Feedback: the best hit often names what a multi-hop question asks about next (the film, the
    band, the city). Its embedding is added to the query vector (× RETRIEVAL_FEEDBACK_VECTOR_WEIGHT)
    and its words to the fulltext query (boost RETRIEVAL_FEEDBACK_TERM_BOOST, Lucene's idf weighs
    them), and both indexes are searched again. The first round's best RETRIEVAL_FEEDBACK_KEEP hits
    keep their places; the second round ranks the rest, its scores scaled to rank below them. On
    hotpotqa-100 this lifts recall@5 from 81.0 to 86.5 and leaves recall@2 as it was (bench/results).
    """

    name = "hybrid"

    def __init__(self, *, scope: Scope, feedback: bool | None = None) -> None:
        super().__init__(scope=scope)
        self.vector = VectorRetriever(scope=scope)
        self.fulltext = FulltextRetriever(scope=scope)
        self.feedback = settings.RETRIEVAL_HYBRID_FEEDBACK if feedback is None else feedback

    def _search(self, query: Query, *, limit: int) -> list[Candidate]:
        depth = hybrid_depth(limit)
        first = self._round(query, depth)
        keep = settings.RETRIEVAL_FEEDBACK_KEEP
        if not self.feedback or limit <= keep or len(first) <= keep:
            return first
        started = time.perf_counter()
        second = self._feedback(query, first[0], depth)
        query.timings_ms["feedback"] = (time.perf_counter() - started) * 1000
        return first if second is None else pin(first[:keep], second)

    def _round(self, query: Query, depth: int) -> list[Candidate]:
        if _fulltext_building(self.scope):
            query.fallback = dict(FULLTEXT_BUILDING)
            return self.vector.search(query, limit=depth)
        # the fulltext query needs no vector: Neo4j runs it while this thread embeds the query (when
        # not embedded yet) and runs the vector query
        fulltext = _pool.submit(self.fulltext.search, query, limit=depth)
        by_vector = self.vector.search(query, limit=depth)
        return search_core.fuse(by_vector, fulltext.result())

    def _feedback(self, query: Query, best: Candidate, depth: int) -> list[Candidate] | None:
        rows = graph.read(cypher.FEEDBACK_SOURCE, chunk_id=best.chunk_id, project_id=self.scope.project_id)
        if not rows:  # deleted between the two queries
            return None
        vector = query.vector()
        embedding = rows[0]["embedding"]
        if embedding is not None and len(embedding) == len(vector):
            weight = settings.RETRIEVAL_FEEDBACK_VECTOR_WEIGHT
            vector = _unit([q + weight * float(e) for q, e in zip(vector, embedding, strict=True)])
        # words the query already has are dropped by lucene.chunk_query
        words = lucene.query_terms(str(rows[0]["text"] or ""), max_terms=settings.RETRIEVAL_FEEDBACK_TERMS)
        return self._round(Query(text=query.text, embed=query.embed, expansion=words, _vector=vector), depth)


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def pin(kept: list[Candidate], ranked: list[Candidate]) -> list[Candidate]:
    """`kept` in its order, then the rest of `ranked`; their scores are scaled so that none ranks
    above the last kept hit."""
    ids = {c.chunk_id for c in kept}
    rest = [c for c in ranked if c.chunk_id not in ids]
    if not kept or not rest or rest[0].score <= kept[-1].score:
        return [*kept, *rest]
    scale = kept[-1].score / rest[0].score if rest[0].score > 0 else 0.0
    return [*kept, *(Candidate(chunk_id=c.chunk_id, score=c.score * scale) for c in rest)]


def hybrid_depth(limit: int) -> int:
    """How many candidates each retriever gives a hybrid search of `limit` results."""
    return max(limit, settings.RETRIEVAL_HYBRID_CANDIDATES)


class GraphRetriever(Retriever):
    """A personalized PageRank over the project's passage graph (retrieval/passage_graph.py), seeded
    with the titles the query names and hybrid's best chunks. A project whose chunks name no other
    document's title has no graph to walk: it is ranked by hybrid, and `query.fallback` says so.
    Chunks the walk does not reach follow, in hybrid's order."""

    name = "graph"

    def __init__(self, *, scope: Scope, feedback: bool | None = None) -> None:
        super().__init__(scope=scope)
        self.hybrid = HybridRetriever(scope=scope, feedback=feedback)

    def _search(self, query: Query, *, limit: int) -> list[Candidate]:
        ranked = self.hybrid.search(query, limit=hybrid_depth(limit))
        return self.walk(query, ranked, limit=limit)

    def walk(self, query: Query, ranked: list[Candidate], *, limit: int) -> list[Candidate]:
        """`ranked` (a fused ranking of this scope) re-ranked by the walk seeded with it and with the
        titles `query.text` names; `ranked` itself where the project has no graph to walk."""
        started = time.perf_counter()
        passages, cached = passage_graph.passage_graph(self.scope.project_id)
        query.timings_ms["graph_load"] = (time.perf_counter() - started) * 1000
        query.debug["graph"] = {
            "version": passages.version,
            "chunks": len(passages.chunk_ids),
            "links": passages.links,
            "cached": cached,
            "build_ms": round(passages.build_ms, 2),
        }
        if passages.links == 0:
            # hybrid's own fallback (by vector alone, the fulltext index being built) says more
            query.fallback = query.fallback or {
                "mode": "hybrid",
                "reason": "no chunk of this project names another document's title yet: no graph to walk",
            }
            return ranked[:limit]
        started = time.perf_counter()
        documents = (
            None
            if self.scope.document_ids is None
            else {passages.document_rows[d] for d in self.scope.document_ids if d in passages.document_rows}
        )
        seeds = passage_graph.seeds(passages, query.text, ranked, documents=documents)
        query.debug["linked"] = seeds.linked
        if not seeds.reset.any():
            return ranked[:limit]
        ranks = passages.pagerank(seeds.reset, settings.RETRIEVAL_GRAPH_DAMPING)
        query.debug["seeds"] = [
            {"chunk_id": passages.chunk_ids[row], "weight": round(float(seeds.reset[row]), 4), "from": origin}
            for row, origin in sorted(seeds.origin.items(), key=lambda item: -seeds.reset[item[0]])
        ]
        allowed = self._allowed(passages, documents)
        best = float(ranks.max())
        walked: list[Candidate] = []
        for row in np.argsort(-ranks, kind="stable"):
            if ranks[row] <= 0 or len(walked) >= limit:
                break
            if allowed is None or row in allowed:
                walked.append(Candidate(chunk_id=passages.chunk_ids[row], score=float(ranks[row]) / best))
        query.timings_ms["pagerank"] = (time.perf_counter() - started) * 1000
        return pin(walked, ranked)[:limit]

    def _allowed(self, passages: passage_graph.PassageGraph, documents: set[int] | None) -> set[int] | None:
        """Chunk rows the scope allows; None: all of them."""
        if self.scope.chunk_ids is not None:
            return {passages.rows[c] for c in self.scope.chunk_ids if c in passages.rows}
        if documents is not None:
            return {row for d in documents for row in passages.document_chunks[d]}
        return None


RETRIEVERS: dict[str, type[Retriever]] = {
    r.name: r for r in (VectorRetriever, FulltextRetriever, HybridRetriever, GraphRetriever)
}
