"""Export and import (issue 35): a 100,000-chunk project exported to an archive and imported into a new
project, against the whole platform (`platform/run.py`).

The project is bulk-written the shape ingestion leaves (bench/portability_loader.py `load`: 1,000
documents of 100 chunks with 384-dim unit vectors of float32 values, 5,000 entities, HAS_CHUNK, NEXT_CHUNK,
HAS_ENTITY and RELATED). Each step runs in its own `manage.py shell` process beside the running
platform, its resident memory sampled every 20 ms:

1. Export, three times: `portability.exporter.export_ndjson` (what the export job runs) writing the
   archive; nodes per second of its own time, and the process's peak memory. The embedded Neo4j
   writes the lines itself (`kp.transfer.export`). Peer in the same run: the same export through
   Cypher and orjson, as against an external server without the procedure. Floor of memory: the
   peak of the same process doing nothing (Django and the libraries).
2. Import, three times, after the source project's graph is erased (its ids would collide):
   `portability.importer.load` (what the import job runs) into a new project each time, whose
   graph is erased before the next run; nodes per second, and the counts checked against the source.

BENCH_PORTABILITY_SCALE (default 1) scales the project down for a quick try; committed figures use 1.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.curation import _step as _curation_step
from bench.memory import _platform
from bench.rows import row

SCALE = float(os.environ.get("BENCH_PORTABILITY_SCALE", "1"))
REPEATS_INSIDE = True
REPEATS = 3
CHUNKS = int(100_000 * SCALE)
ENTITIES = int(5_000 * SCALE)


def _step(platform: Any, step: str, **args: Any) -> tuple[dict[str, Any], float, float]:
    return _curation_step(platform, step, loader="bench.portability_loader", **args)


def _runs(platform: Any, project_id: str, scratch: Path) -> dict[str, Any]:
    figures: dict[str, Any] = {"export": [], "cypher_export": [], "import": []}
    for run in range(REPEATS):
        result, peak, _wall = _step(platform, "export", project_id=project_id, run=run, dir=str(scratch))
        figures["export"].append({**result, "peak_mib": peak})
        print(f"  export {run + 1}: {figures['export'][-1]}", flush=True)
        result, peak, _wall = _step(
            platform, "export", project_id=project_id, run=run, dir=str(scratch), server=False
        )
        figures["cypher_export"].append({**result, "peak_mib": peak})
        print(f"  export through Cypher {run + 1}: {figures['cypher_export'][-1]}", flush=True)
    figures["baseline_peak_mib"] = _step(platform, "baseline")[1]
    _step(platform, "erase", project_id=project_id)
    archive = figures["export"][-1]["path"]
    for run in range(REPEATS):
        result, peak, _wall = _step(platform, "import", path=archive, run=run)
        figures["import"].append({**result, "peak_mib": peak})
        print(f"  import {run + 1}: {figures['import'][-1]}", flush=True)
        _step(platform, "erase", project_id=result["project_id"])
    return figures


def run() -> dict[str, Any]:
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-portability-"))
    scratch = tmp / "archives"
    scratch.mkdir()
    try:
        with _platform(tmp, "portability", MEMORY_PROCESS_ON_STORE="false") as (platform, _admin):
            loaded, _peak, load_s = _step(
                platform, "load", chunks=CHUNKS, chunks_per_doc=100, entities=ENTITIES
            )
            print(f"  loaded {CHUNKS:,} chunks in {load_s} s", flush=True)
            figures = _runs(platform, loaded["project_id"], scratch)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures["scale"], figures["chunks"] = SCALE, CHUNKS
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    return {"rows": _rows(figures), "figures": figures}


def _rate(step: dict[str, Any]) -> float:
    return round(step["nodes"] / step["took_s"]) if step["took_s"] else 0.0


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    exports, cypher, imports = f["export"], f["cypher_export"], f["import"]
    export_rates, cypher_rates = [_rate(s) for s in exports], [_rate(s) for s in cypher]
    import_rates, peaks = [_rate(s) for s in imports], [s["peak_mib"] for s in exports]
    nodes, rels = exports[0]["nodes"], exports[0]["relationships"]
    size_mib = round(exports[0]["bytes"] / 2**20, 1)
    return [
        row(
            f"export of a {f['chunks']:,}-chunk project ({nodes:,} nodes, {rels:,} relationships; "
            f"archive {size_mib} MiB)",
            statistics.median(export_rates),
            "nodes/s",
            peer=(
                "the same export through Cypher and orjson (an external server without the procedure)",
                statistics.median(cypher_rates),
            ),
            peer_runs=cypher_rates,
            target=(">=", 20_000),
            runs=export_rates,
        ),
        row(
            "export process peak resident memory",
            statistics.median(peaks),
            "MiB",
            floor=("the same process doing nothing", f["baseline_peak_mib"]),
            target=("<=", 500),
            runs=peaks,
        ),
        row(
            f"import of that archive into a new project ({nodes:,} nodes, {rels:,} relationships)",
            statistics.median(import_rates),
            "nodes/s",
            target=(">=", 10_000),
            runs=import_rates,
        ),
    ]
