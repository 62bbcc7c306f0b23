#!/usr/bin/env python
"""Benchmark harness (make bench). Each benchmark prints its figures next to a peer's figure from
the same run and writes bench/results/<name>.json; bench/results/README.md is the combined table.

    python bench/run.py                 # all benchmarks
    python bench/run.py --only startup  # one of them
    python bench/run.py --only memory   # agent memory: store, search among 200,000 memories, forget
    python bench/run.py --only drift    # DRIFT with a 300 ms LLM; extractive answer recall
    python bench/run.py --only sessions # ADK sessions through the adapter vs ADK's DatabaseSessionService
    python bench/run.py --only agent_framework  # MAF context provider overhead vs bare httpx
    python bench/run.py --only curation # erasure of a heavy user, retention over 1M messages, admin pages
    python bench/run.py --only adversarial  # 80 KB / 1 MB adversarial vs normal text, text endpoints
"""

from __future__ import annotations

import argparse
import json
import platform as stdlib_platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# the client packages (the sessions benchmark drives the platform through the ADK adapter)
sys.path[1:1] = [
    str(REPO / "clients" / "platform-client" / "src"),
    str(REPO / "clients" / "google-adk" / "src"),
    str(REPO / "clients" / "agent-framework" / "src"),
]

from bench import (  # noqa: E402
    adversarial,
    curation,
    drift,
    ingestion,
    maf_provider,
    memory,
    retrieval,
    sessions,
    startup,
)

RESULTS = REPO / "bench" / "results"
BENCHMARKS = {
    "adversarial": adversarial.run,
    "agent_framework": maf_provider.run,
    "curation": curation.run,
    "drift": drift.run,
    "startup": startup.run,
    "ingestion": ingestion.run,
    "retrieval": retrieval.run,
    "memory": memory.run,
    "sessions": sessions.run,
}


def machine() -> dict[str, object]:
    import os

    import psutil

    return {
        "python": stdlib_platform.python_version(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": stdlib_platform.release(),
        **embedded_neo4j(),
    }


def embedded_neo4j() -> dict[str, str]:
    """The embedded launcher's Neo4j version and the JDK it was built for (its line follows the JDK)."""
    target = Path(__file__).resolve().parents[1] / "platform" / "neo4j" / "target"
    kernels = sorted((target / "lib").glob("neo4j-kernel-[0-9]*.jar"))
    stamp = target / ".built"
    return {
        "neo4j": kernels[0].stem.removeprefix("neo4j-kernel-") if kernels else "not built",
        "neo4j_jdk": stamp.read_text().strip() if stamp.exists() else "not built",
    }


def write_table() -> None:
    rows = ["| benchmark | figure | platform | peer | peer figure |", "|---|---|---|---|---|"]
    for path in sorted(RESULTS.glob("*.json")):
        result = json.loads(path.read_text())
        for row in result["rows"]:
            rows.append(
                f"| {result['name']} | {row['figure']} | {row['value']} {row['unit']} | {row['peer']} | "
                f"{row['peer_value']} {row['unit']} |"
            )
    header = (
        "# Benchmark results\n\nWritten by `make bench` (bench/run.py); each figure stands next to a peer's "
        "figure measured in the same run. Machine and date are in each JSON file.\n\n"
    )
    (RESULTS / "README.md").write_text(header + "\n".join(rows) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    for name in args.only or sorted(BENCHMARKS):
        print(f"== {name}", flush=True)
        started = time.time()
        result = BENCHMARKS[name]()
        result.update(
            name=name, machine=machine(), date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started))
        )
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        width = max(len(r["figure"]) for r in result["rows"])
        for row in result["rows"]:
            print(
                f"  {row['figure']:<{width}}  {row['value']:>9} {row['unit']:<4}  | {row['peer']}: "
                f"{row['peer_value']} {row['unit']}"
            )
    write_table()
    print(f"results in {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
