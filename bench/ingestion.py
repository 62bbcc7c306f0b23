"""Ingestion throughput on hotpotqa-100 (994 passages) with the local embedder and no LLM.

The whole platform runs as `make run` starts it (worker concurrency 2); the corpus is posted through
the API in requests of at most 500 documents and timed until every job has succeeded. First, a
same-size warm-up corpus (the passages' sentences reversed, other titles and paths) is ingested into
another project and timed too: the first ingestion after a start also pays Neo4j's JIT compilation,
which a running platform has done. Peer figure: embedding the very same chunks alone, in this process,
in the same run, after the platform has stopped (the floor the graph work is compared to). A second
project ingests the same corpus with pre-extracted entities and relations (derived once here with the
extractive extractor, not timed) to show write throughput without extraction. Communities are then
rebuilt and timed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import django_setup
from bench.rows import row
from bench.startup import PlatformRun, cpu_by_role, cpu_since, neo4j_auth, neo4j_cpu, neo4j_cpu_since

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "bench" / "data" / "hotpotqa-100" / "corpus.json"  # vendored, see its README


def _passages() -> list[tuple[str, list[str]]]:
    """hotpotqa-100's passages: (title, sentences)."""
    return list(json.loads(CORPUS.read_text()).items())


def load_corpus() -> list[dict[str, Any]]:
    return [
        {"title": title, "text": f"{title}. " + "".join(sentences).strip(), "source_path": f"hotpotqa/{i}"}
        for i, (title, sentences) in enumerate(_passages())
    ]


def _post_all(client: httpx.Client, project_id: str, docs: list[dict[str, Any]]) -> tuple[float, list[str]]:
    started = time.perf_counter()
    job_ids = []
    for start in range(0, len(docs), 500):
        response = client.post(
            f"/api/v1/projects/{project_id}/documents", json={"documents": docs[start : start + 500]}
        )
        response.raise_for_status()
        job_ids.append(response.json()["job_id"])
    for job_id in job_ids:
        _wait(client, job_id)
    return time.perf_counter() - started, job_ids


def _wait(client: httpx.Client, job_id: str, timeout: float = 1800) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/api/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            if job["status"] == "failed":
                raise RuntimeError(f"job {job_id} failed: {job['errors']}")
            return job
        time.sleep(0.2)
    raise RuntimeError(f"job {job_id} timed out")


def warm_up_corpus(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As many documents of the same kind, not the same texts: each passage's sentences in reverse
    order, under its own title and path (for the first ingestion after the platform starts)."""
    return [
        {
            "title": f"Warm-up {i}: {title}",
            "text": f"{title}. " + "".join(reversed(sentences)).strip(),
            "source_path": f"warm-up/{i}",
        }
        for i, (title, sentences) in enumerate(_passages())
    ][: len(docs)]


def _embedding_floor(docs: list[dict[str, Any]]) -> tuple[float, int]:
    """Chunk exactly as the platform does and embed those chunks alone."""
    django_setup()
    from core.embeddings import make_embedder
    from knowledge.pipeline.chunking import chunk_text

    chunks = [c.text for d in docs for c in chunk_text(d["text"], size=600, overlap=100)]
    embedder = make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384, batch_size=64)
    embedder.embed(chunks[:8])  # load the model outside the timing, as the workers have by then
    started = time.perf_counter()
    embedder.embed(chunks)
    return time.perf_counter() - started, len(chunks)


def _pre_extracted(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from knowledge.pipeline.extraction import extract_extractive

    out = []
    for doc in docs:
        result = extract_extractive(doc["text"])
        out.append(
            {
                **doc,
                "source_path": doc["source_path"] + "-given",
                "entities": [
                    {"name": e.name, "type": e.type, "description": e.description} for e in result.entities
                ],
                "relations": [
                    {"source": r.source, "target": r.target, "description": r.description, "weight": r.weight}
                    for r in result.relations
                ],
            }
        )
    return out


def _shape(client: httpx.Client, platform: PlatformRun) -> dict[str, Any]:
    from neo4j import GraphDatabase

    checks = {
        "documents_without_chunks": "MATCH (d:Document) WHERE NOT (d)-[:HAS_CHUNK]->() RETURN count(d) AS n",
        "chunks_without_document": "MATCH (c:Chunk) WHERE NOT ()-[:HAS_CHUNK]->(c) RETURN count(c) AS n",
        "chunks_without_embedding": "MATCH (c:Chunk) WHERE c.embedding IS NULL RETURN count(c) AS n",
        "entities_without_chunk": "MATCH (e:Entity) WHERE NOT ()-[:HAS_ENTITY]->(e) RETURN count(e) AS n",
        "nodes_without_project": "MATCH (n) WHERE n.project_id IS NULL RETURN count(n) AS n",
        "community_edges_skipping_a_level": "MATCH (a:Community)-[:IN_COMMUNITY]->(b:Community) "
        "WHERE b.level <> a.level + 1 RETURN count(*) AS n",
        "duplicate_entity_keys": "MATCH (e:Entity) WITH e.project_id AS p, e.key AS k, count(*) AS c "
        "WHERE c > 1 RETURN count(*) AS n",
    }
    with GraphDatabase.driver(f"bolt://127.0.0.1:{platform.ports['neo4j']}", auth=neo4j_auth()) as driver:
        return {name: driver.execute_query(q).records[0]["n"] for name, q in checks.items()}


def _issue_key(project_id: str, env: dict[str, str], scopes: str = "write") -> str:
    """A key for a bench project (write scope unless told), issued through the CLI against the
    running platform."""
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "create_api_key",
            "--project",
            project_id,
            "--name",
            "bench",
            "--scopes",
            scopes,
            "--rate-limit",
            "100000/min",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def _peak_roles(platform: PlatformRun) -> dict[str, float]:
    return platform.peaks()


def run() -> dict[str, Any]:
    docs = load_corpus()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-ingest-"))
    platform = PlatformRun(tmp / "var", COMMUNITY_REBUILD_DELAY_SEC="-1", DEMO_BOOTSTRAP="true")
    try:
        platform.wait_healthy()
        time.sleep(0.5)
        key = platform.value("demo API key")
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=platform.base, headers=headers, timeout=300) as client:
            # the demo key belongs to the demo project; keys for the bench projects come from the CLI
            env = platform.cli_env()
            # the first ingestion after a start also pays Neo4j's JIT compilation (its compiler
            # threads took 25.6 of Neo4j's 41.9 CPU-seconds in a fresh platform's first ingest):
            # timed and reported, then the corpus itself is timed on the warm platform
            warm_project = client.post("/api/v1/projects", json={"name": "warm-up"}).json()["id"]
            client.headers["Authorization"] = f"Bearer {_issue_key(warm_project, env)}"
            threads = neo4j_cpu(platform)
            cold_sec, _ = _post_all(client, warm_project, warm_up_corpus(docs))
            neo4j_during_cold = neo4j_cpu_since(platform, threads)
            client.headers["Authorization"] = f"Bearer {key}"

            project = client.post("/api/v1/projects", json={"name": "hotpotqa"}).json()["id"]
            bench_key = _issue_key(project, env)
            client.headers["Authorization"] = f"Bearer {bench_key}"

            cpu, threads = cpu_by_role(platform), neo4j_cpu(platform)
            ingest_sec, job_ids = _post_all(client, project, docs)
            cpu_during_ingest = cpu_since(platform, cpu)
            neo4j_during_ingest = neo4j_cpu_since(platform, threads)
            jobs = [client.get(f"/api/v1/jobs/{j}").json() for j in job_ids]
            chunks = sum(j["counts"].get("chunks", 0) for j in jobs)
            entities = sum(j["counts"].get("entities", 0) for j in jobs)
            stage = {
                k: round(sum(j["timings"].get(k, 0) for j in jobs), 2)
                for k in sorted({key for j in jobs for key in j["timings"]})
            }

            rebuild = client.post(f"/api/v1/projects/{project}/communities:rebuild").json()
            community_job = _wait(client, rebuild["job_id"])
            peaks = _peak_roles(platform)
            shape = _shape(client, platform)

            given_docs = _pre_extracted(docs)
            project2 = client.post(
                "/api/v1/projects",
                json={"name": "hotpotqa-given"},
                headers={"Authorization": f"Bearer {key}"},
            ).json()["id"]
            bench_key2 = _issue_key(project2, env)
            client.headers["Authorization"] = f"Bearer {bench_key2}"
            given_sec, _ = _post_all(client, project2, given_docs)
    finally:
        platform.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    floor_sec, floor_chunks = _embedding_floor(docs)  # alone: the platform has stopped

    ratio = round(ingest_sec / floor_sec, 2)
    figures = {
        "documents": len(docs),
        "chunks": chunks,
        "embedding_floor_chunks": floor_chunks,
        "entities": entities,
        "ingest_sec": round(ingest_sec, 2),
        "embedding_floor_sec": round(floor_sec, 2),
        "ratio": ratio,
        "first_ingest_after_start_sec": round(cold_sec, 2),
        "first_ingest_ratio": round(cold_sec / floor_sec, 2),
        "neo4j_cpu_s_during_first_ingest": neo4j_during_cold,
        "stage_seconds_summed_over_workers": stage,
        "cpu_s_during_ingest_by_role": cpu_during_ingest,
        "neo4j_cpu_s_during_ingest": neo4j_during_ingest,
        "pre_extracted_sec": round(given_sec, 2),
        "communities": community_job["counts"],
        "peak_rss_mib": peaks,
        "graph_shape_violations": shape,
    }
    return {"rows": _rows(figures), "figures": figures}


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    docs, floor_sec, ingest_sec = f["documents"], f["embedding_floor_sec"], f["ingest_sec"]
    peaks = f["peak_rss_mib"]
    return [
        row(
            "ingest hotpotqa-100 end to end",
            round(ingest_sec, 1),
            "s",
            floor=("embedding the same chunks alone", round(floor_sec, 1)),
        ),
        row("ingestion time / embedding floor", f["ratio"], "x", target=("<=", 1.5)),
        row(
            "first ingest after start (same-size warm-up corpus) / embedding floor",
            f["first_ingest_ratio"],
            "x",
            context=("warm platform (above)", f["ratio"]),
        ),
        row(
            "documents per second",
            round(docs / ingest_sec, 1),
            "doc/s",
            floor=("embedding alone", round(docs / floor_sec, 1)),
        ),
        row(
            "chunks per second",
            round(f["chunks"] / ingest_sec, 1),
            "chunk/s",
            floor=("embedding alone", round(f.get("embedding_floor_chunks", f["chunks"]) / floor_sec, 1)),
        ),
        row(
            "documents per second, pre-extracted graph",
            round(docs / f["pre_extracted_sec"], 1),
            "doc/s",
            context=("with extraction", round(docs / ingest_sec, 1)),
        ),
        row(f"community rebuild ({f['communities']['levels']} levels)", f["communities"]["seconds"], "s"),
        row(
            "peak RSS worker pool child",
            peaks.get("worker pool child"),
            "MiB",
            context=("worker main", peaks.get("worker")),
        ),
        row("peak RSS web", peaks.get("web"), "MiB", context=("neo4j", peaks.get("neo4j"))),
    ]
