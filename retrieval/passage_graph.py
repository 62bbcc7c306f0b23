"""Graph mode: a personalized PageRank over the project's passage graph (docs/decisions.md).

The graph has a vertex per chunk. A chunk that names another document's title (a
`(:Chunk)-[:NAMES]->(:Document)` link, made at ingestion by knowledge/title_links.py) has edges to
that document's first ENTRY_CHUNKS chunks. How much of a chunk's walk goes along a link is the named
document's specificity, 1 / n for a document named by n chunks (HippoRAG 2's node specificity): a
document that half the chunks name (a hub) takes almost nothing of any chunk's walk.

A link is also walked back, as HippoRAG 2 walks its passage-entity edges both ways: a named
document's opening chunks lead to the chunks that name it, RETRIEVAL_GRAPH_BACKWARD_WEIGHT of their
walk split evenly among those chunks (so a hub's page spreads its walk thinly). A question that names
a person then reaches the album page that names that person, not only the pages the person's own page
names. Where a chunk's edges would take more than all of its walk, they are scaled down together;
what they do not take goes to a sink vertex without edges, from which the walk restarts at the seeds,
as it does with probability 1 - damping at every step.

A query seeds the walk with the chunks of the documents whose titles it names and with hybrid's
best chunks (`seeds`); igraph's PRPACK solves the PageRank exactly.

Each process keeps the graphs of the RETRIEVAL_GRAPH_CACHE_PROJECTS most recently searched projects.
A graph is built for one `Project.graph_version`, which knowledge bumps after every committed change
to a project's documents, chunks or links; a search that reads a newer version builds the graph again.
A graph once built is never changed, so a search holds one consistent graph however the project
changes meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import igraph
import numpy as np
from django.conf import settings
from neo4j import ManagedTransaction

from core import graph
from core.models import Project
from knowledge.pipeline.titles import TitleMatcher
from retrieval import cypher
from retrieval.dto import Candidate

# A link leads to the named document's opening chunks, where a document says what it is about.
ENTRY_CHUNKS = 4
# Weight a title seed gives each opening chunk of its document besides the chunks' hybrid scores.
ENTRY_SEED = 0.1


@dataclass(frozen=True)
class PassageGraph:
    version: int
    chunk_ids: list[str]
    rows: dict[str, int]  # chunk id -> row
    document_ids: list[str]
    document_rows: dict[str, int]
    document_titles: list[str]
    document_chunks: list[list[int]]  # document row -> its chunk rows, in document order
    titles: TitleMatcher  # names of the documents that have chunks, case folded as for a query
    walk: igraph.Graph  # chunk rows 0..n-1, then the sink
    links: int  # title links between chunks and other documents
    build_ms: float

    def pagerank(self, reset: np.ndarray, damping: float) -> np.ndarray:
        """PageRank of every chunk row, restarting at `reset` (one weight per chunk row)."""
        start = np.append(reset, 0.0)  # never restarts at the sink
        ranks = self.walk.personalized_pagerank(
            directed=True, damping=damping, reset=start.tolist(), weights="weight", implementation="prpack"
        )
        return np.asarray(ranks[:-1], dtype=np.float64)


def _read(project_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    def work(tx: ManagedTransaction) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        documents = tx.run(cypher.PASSAGE_GRAPH_DOCUMENTS, project_id=project_id).data()
        links = tx.run(cypher.PASSAGE_GRAPH_LINKS, project_id=project_id).data()
        return documents, links

    return graph.read_tx(work)


def build(project_id: str, version: int) -> PassageGraph:
    started = time.perf_counter()
    documents, links = _read(project_id)
    chunk_ids: list[str] = []
    chunk_document: list[int] = []
    document_ids: list[str] = []
    document_titles: list[str] = []
    document_chunks: list[list[int]] = []
    for doc in documents:
        if not doc["chunk_ids"]:  # queued, or nothing to index: nothing to rank or walk to
            continue
        row = len(document_ids)
        document_ids.append(str(doc["id"]))
        document_titles.append(str(doc["title"] or ""))
        document_chunks.append(list(range(len(chunk_ids), len(chunk_ids) + len(doc["chunk_ids"]))))
        chunk_ids += [str(c) for c in doc["chunk_ids"]]
        chunk_document += [row] * len(doc["chunk_ids"])
    rows = {c: i for i, c in enumerate(chunk_ids)}
    document_rows = {d: i for i, d in enumerate(document_ids)}

    names: dict[int, set[int]] = {}  # chunk row -> rows of the documents it names
    for link in links:  # a link to or from what changed since the documents were read is left out
        chunk, document = rows.get(link["chunk_id"]), document_rows.get(link["document_id"])
        if chunk is not None and document is not None and chunk_document[chunk] != document:
            names.setdefault(chunk, set()).add(document)
    walk = _walk(names, document_chunks, len(chunk_ids), settings.RETRIEVAL_GRAPH_BACKWARD_WEIGHT)
    return PassageGraph(
        version=version,
        chunk_ids=chunk_ids,
        rows=rows,
        document_ids=document_ids,
        document_rows=document_rows,
        document_titles=document_titles,
        document_chunks=document_chunks,
        titles=TitleMatcher.of(dict(zip(document_ids, document_titles, strict=True)), fold_case=True),
        walk=walk,
        links=sum(len(d) for d in names.values()),
        build_ms=(time.perf_counter() - started) * 1000,
    )


def _walk(
    names: dict[int, set[int]],
    document_chunks: list[list[int]],
    total: int,
    backward: float,
) -> igraph.Graph:
    """The weighted walk over chunk rows 0..total-1 and the sink (row `total`): each link forward
    to the named document's opening chunks at its specificity (1 / chunks naming that document),
    and back from those chunks to the chunk that names it at `backward` / (chunks naming it)."""
    namers: dict[int, list[int]] = {}  # document row -> chunk rows that name it
    for chunk, documents_named in names.items():
        for document in documents_named:
            namers.setdefault(document, []).append(chunk)
    out: dict[int, dict[int, float]] = {}  # chunk row -> target row -> weight
    for chunk, documents_named in names.items():
        share = sum(1.0 / len(namers[d]) for d in documents_named)
        scale = 1.0 / max(share, 1.0)
        targets = out.setdefault(chunk, {})
        for document in documents_named:
            entries = document_chunks[document][:ENTRY_CHUNKS]
            weight = scale / (len(namers[document]) * len(entries))
            for target in entries:
                targets[target] = targets.get(target, 0.0) + weight
    if backward > 0:
        for document, chunks in namers.items():
            for entry in document_chunks[document][:ENTRY_CHUNKS]:
                targets = out.setdefault(entry, {})
                for chunk in chunks:
                    targets[chunk] = targets.get(chunk, 0.0) + backward / len(chunks)
    sink = total
    edges: list[tuple[int, int]] = []
    weights: list[float] = []
    for chunk, targets in out.items():
        taken = sum(targets.values())
        scale = 1.0 / max(taken, 1.0)
        for target, weight in targets.items():
            edges.append((chunk, target))
            weights.append(weight * scale)
        if taken < 1.0:
            edges.append((chunk, sink))
            weights.append(1.0 - taken)
    walk = igraph.Graph(n=total + 1, edges=edges, directed=True)
    walk.es["weight"] = weights
    return walk


# --- the cache -------------------------------------------------------------------------------------

_cache: OrderedDict[str, PassageGraph] = OrderedDict()
_cache_lock = threading.Lock()
_building: dict[str, threading.Lock] = {}


def _cached(project_id: str, version: int) -> PassageGraph | None:
    with _cache_lock:
        found = _cache.get(project_id)
        if found is None or found.version != version:
            return None
        _cache.move_to_end(project_id)
        return found


def passage_graph(project_id: str) -> tuple[PassageGraph, bool]:
    """The project's graph as of its current graph version, and whether it came from the cache.
    Concurrent searches of a changed project build it once."""
    version = Project.objects.filter(pk=project_id).values_list("graph_version", flat=True).first() or 0
    if (found := _cached(project_id, version)) is not None:
        return found, True
    with _cache_lock:
        lock = _building.setdefault(project_id, threading.Lock())
    with lock:
        if (found := _cached(project_id, version)) is not None:
            return found, True
        built = build(project_id, version)
        with _cache_lock:
            _cache[project_id] = built
            _cache.move_to_end(project_id)
            while len(_cache) > max(1, settings.RETRIEVAL_GRAPH_CACHE_PROJECTS):
                _cache.popitem(last=False)
        return built, False


def forget_graphs() -> None:
    with _cache_lock:
        _cache.clear()


# --- seeds -------------------------------------------------------------------------------------------


@dataclass
class Seeds:
    """Where the walk restarts: a weight per chunk row, and what each came from (the debug block)."""

    reset: np.ndarray
    linked: list[dict[str, Any]]
    origin: dict[int, str]


def seeds(
    passages: PassageGraph,
    query: str,
    ranked: list[Candidate],
    *,
    documents: set[int] | None,
) -> Seeds:
    """Seeds of a query: each title it names (weight 1, over the documents of that name in
    `documents`, None: any), and hybrid's RETRIEVAL_GRAPH_SEED_TOP best chunks (weight
    RETRIEVAL_GRAPH_PASSAGE_WEIGHT x score / best score). A named document's weight goes to its
    chunks by their hybrid score, its opening chunks ENTRY_SEED more; a name shared by several
    documents splits its weight the same way."""
    reset = np.zeros(len(passages.chunk_ids))
    origin: dict[int, str] = {}
    best = max((c.score for c in ranked), default=0.0)
    relevance = {
        passages.rows[c.chunk_id]: (c.score / best if best > 0 else 0.0)
        for c in ranked
        if c.chunk_id in passages.rows
    }
    linked = []
    for name, ids in passages.titles.matches(query):
        chosen = [
            passages.document_rows[d]
            for d in sorted(ids)
            if d in passages.document_rows and (documents is None or passages.document_rows[d] in documents)
        ]
        share: dict[int, float] = {}
        for document in chosen:
            chunks = passages.document_chunks[document]
            for position, chunk in enumerate(chunks):
                weight = (ENTRY_SEED if position < ENTRY_CHUNKS else 0.0) + relevance.get(chunk, 0.0)
                if weight > 0:
                    share[chunk] = weight
        total = sum(share.values())
        if not total:
            continue
        for chunk, weight in share.items():
            reset[chunk] += weight / total
            origin.setdefault(chunk, "title")
        linked.append(
            {
                "name": name,
                "documents": [
                    {"id": passages.document_ids[d], "title": passages.document_titles[d]} for d in chosen
                ],
            }
        )
    for candidate in ranked[: settings.RETRIEVAL_GRAPH_SEED_TOP]:
        row = passages.rows.get(candidate.chunk_id)
        if row is not None and best > 0:
            reset[row] += settings.RETRIEVAL_GRAPH_PASSAGE_WEIGHT * candidate.score / best
            origin.setdefault(row, "hybrid")
    return Seeds(reset=reset, linked=linked, origin=origin)
