"""In-process steps of the export/import benchmark, run inside the platform's Django (`manage.py shell
-c`, against the benchmark's running platform), each in its own process so its peak memory is its own.

    BENCH_STEP=<step> BENCH_ARGS='{"…": …}' \
        python manage.py shell -c "from bench.portability_loader import main; main()"

`load` bulk-writes a knowledge project the shape ingestion leaves (documents, chunks with the
project's chunk label, 384-dim unit vectors of float32 values as both embedders give, entities,
HAS_CHUNK, NEXT_CHUNK, HAS_ENTITY, RELATED); not measured. `export` (with `"server": false`, through
Cypher and orjson as against a server without `kp.transfer.export`), `import` and `erase` time only
their own work and print it.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
import uuid
from array import array
from typing import Any

from bench.curation_loader import _text, _unit

DOC_BATCH = 20


def _float32(vector: list[float]) -> list[float]:
    """The vector as the embedders store it: each value a float32 (MiniLM's output; the OpenAI client
    decodes the API's base64 as float32), held as a double."""
    return array("f", vector).tolist()


def _docs(rng: random.Random, project_id: str, n_docs: int, chunks: int, dims: int) -> list[dict[str, Any]]:
    return [
        {
            "id": str(uuid.uuid4()),
            "title": f"document {rng.randrange(10**9)}",
            "chunks": [
                {
                    "id": str(uuid.uuid4()),
                    "index": i,
                    "text": _text(rng, 60),
                    "embedding": _float32(_unit(rng, dims)),
                }
                for i in range(chunks)
            ],
        }
        for _ in range(n_docs)
    ]


def load(args: dict[str, Any]) -> dict[str, Any]:
    from django.conf import settings

    from core import graph
    from core.services import project_create
    from knowledge.tenancy import chunk_label

    rng = random.Random(args.get("seed", 7))
    project = project_create(name="portability bench")
    label, dims = chunk_label(project.id), settings.EMBEDDINGS_DIMENSIONS
    entities = [str(uuid.uuid4()) for _ in range(args["entities"])]
    graph.write(
        "UNWIND $ids AS id CREATE (:Entity {id: id, project_id: $p, name: 'entity ' + id, key: id, "
        "type: 'concept', description: 'a benchmark entity'})",
        ids=entities,
        p=project.id,
    )
    query = (
        "UNWIND $docs AS doc CREATE (d:Document {id: doc.id, project_id: $p, title: doc.title, "
        "status: 'ready', created_at: datetime(), chunk_count: size(doc.chunks)}) "
        "WITH d, doc UNWIND doc.chunks AS ch "
        f"CREATE (c:Chunk:{label} {{id: ch.id, project_id: $p, document_id: doc.id, index: ch.index, "
        "text: ch.text, search_text: ch.text, token_count: 60, embedding: ch.embedding}) "
        "CREATE (d)-[:HAS_CHUNK]->(c) "
        "WITH c, ch MATCH (e:Entity {id: $entities[ch.index % size($entities)]}) "
        "CREATE (c)-[:HAS_ENTITY]->(e)"
    )
    n_docs = args["chunks"] // args["chunks_per_doc"]
    for start in range(0, n_docs, DOC_BATCH):
        docs = _docs(rng, project.id, min(DOC_BATCH, n_docs - start), args["chunks_per_doc"], dims)
        graph.write(query, docs=docs, p=project.id, entities=entities)
    graph.write(
        "MATCH (d:Document {project_id: $p})-[:HAS_CHUNK]->(c) WITH d, c ORDER BY c.index "
        "WITH d, collect(c) AS cs UNWIND range(0, size(cs) - 2) AS i WITH cs[i] AS a, cs[i + 1] AS b "
        "CREATE (a)-[:NEXT_CHUNK]->(b)",
        p=project.id,
    )
    graph.write(
        "UNWIND range(0, size($ids) - 2) AS i MATCH (a:Entity {id: $ids[i]}), (b:Entity {id: $ids[i + 1]}) "
        "CREATE (a)-[:RELATED {description: 'next', weight: 1.0, chunk_ids: []}]->(b)",
        ids=entities,
    )
    return {"project_id": project.id}


def export(args: dict[str, Any]) -> dict[str, Any]:
    from core import graph
    from core.graph import transfer
    from core.models import Project
    from portability import exporter

    project = Project.objects.get(pk=args["project_id"])
    if args.get("server") is False:  # as against a server without kp.transfer.export
        transfer._server_transfer[id(graph.get_driver())] = False
    path = os.path.join(args["dir"], f"export-{args['run']}.tar.gz")
    started = time.perf_counter()
    with open(path, "wb") as target:
        manifest = exporter.export_ndjson(project, target, lambda phase, done: None)
    took = time.perf_counter() - started
    return {
        "took_s": round(took, 2),
        "nodes": manifest["counts"]["node_total"],
        "relationships": manifest["counts"]["relationship_total"],
        "bytes": os.path.getsize(path),
        "path": path,
    }


def import_(args: dict[str, Any]) -> dict[str, Any]:
    from core.graph.schema import ensure_schema
    from core.services import project_create
    from memory.indexes import ensure_memory_indexes
    from portability import importer

    # what a running worker did once at its first job: not the import's own time
    ensure_schema()
    ensure_memory_indexes()
    project = project_create(name=f"imported {args['run']}")
    started = time.perf_counter()
    with open(args["path"], "rb") as source:
        written = importer.load(source, project_id=project.id, progress=lambda phase, done: None)
    took = time.perf_counter() - started
    return {"took_s": round(took, 2), **written, "project_id": project.id}


def erase(args: dict[str, Any]) -> dict[str, Any]:
    from portability import importer

    started = time.perf_counter()
    removed = importer.erase(args["project_id"])
    return {"took_s": round(time.perf_counter() - started, 2), "removed": removed}


def baseline(args: dict[str, Any]) -> dict[str, Any]:
    """The same process with the portability code imported and nothing done (its memory's floor)."""
    from portability import exporter, importer  # noqa: F401

    return {"took_s": 0.0}


STEPS = {
    "load": load,
    "export": export,
    "import": import_,
    "erase": erase,
    "baseline": baseline,
}


def main() -> None:
    args = json.loads(os.environ.get("BENCH_ARGS", "{}"))
    args.setdefault("dir", tempfile.gettempdir())
    result = STEPS[os.environ["BENCH_STEP"]](args)
    print("BENCH_RESULT " + json.dumps(result), flush=True)
