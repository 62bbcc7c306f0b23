#!/usr/bin/env python
"""Benchmark harness (make bench). Each benchmark runs --repeats times (3 unless it repeats inside
one run) on a committed tree (--dirty to measure uncommitted changes, recorded), writes
bench/results/<name>.json with the rows of bench/rows.py, the commit, the Neo4j line and JDK, and
the spread of the runs; bench/results/README.md is the combined table.

    python bench/run.py                 # all benchmarks
    python bench/run.py --only startup  # one of them
    python bench/run.py --only memory   # agent memory: store, search among 200,000 memories, forget
    python bench/run.py --only drift    # DRIFT with a 300 ms LLM; extractive answer recall
    python bench/run.py --only locomo   # LoCoMo evidence recall of every memory mode, baselines beside
    python bench/run.py --only memory_ingest   # 10,000 LoCoMo turns stored, embedded in request or worker
    python bench/run.py --only sessions # ADK sessions through the adapter vs ADK's DatabaseSessionService
    python bench/run.py --only agent_framework  # MAF context provider overhead vs bare httpx
    python bench/run.py --only curation # erasure of a heavy user, retention over 1M messages, admin pages
    python bench/run.py --only adversarial  # 80 KB / 1 MB adversarial vs normal text, text endpoints
    python bench/run.py --only conversations  # chat turn, conversation-aware search, reference queries
    python bench/run.py --only portability  # export and import of a 100,000-chunk project
"""

from __future__ import annotations

import argparse
import json
import platform as stdlib_platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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
    conversations,
    curation,
    drift,
    ingestion,
    locomo,
    locomo_answers,
    maf_provider,
    mcp_overhead,
    memory,
    memory_floor,
    memory_ingest,
    portability,
    retrieval,
    rows,
    sessions,
    startup,
)

RESULTS = REPO / "bench" / "results"
BENCHMARKS = {
    "adversarial": adversarial,
    "agent_framework": maf_provider,
    "conversations": conversations,
    "curation": curation,
    "drift": drift,
    "startup": startup,
    "ingestion": ingestion,
    "retrieval": retrieval,
    "mcp": mcp_overhead,
    "memory": memory,
    "memory_floor": memory_floor,
    "memory_ingest": memory_ingest,
    "portability": portability,
    "locomo": locomo,
    "locomo_answers": locomo_answers,
    "sessions": sessions,
}
DEFAULT_REPEATS = 3


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


def code_version() -> dict[str, object]:
    """The commit measured and whether the tree differs from it (results excluded: this writes them)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout

    # results, the README's generated table and the docs do not change what is measured
    changed = [
        line
        for line in git("status", "--porcelain").splitlines()
        if not line[3:].startswith(("bench/results/", "README.md", "docs/"))
    ]
    return {
        "commit": git("rev-parse", "--short=10", "HEAD").strip(),
        "dirty": bool(changed),
        "changed": changed,
    }


def write_table() -> None:
    results = [json.loads(path.read_text()) for path in sorted(RESULTS.glob("*.json"))]
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (bench/run.py) from the JSON files beside this one. Each row says what its",
        "figure is compared with, in its own column: a peer (another system doing the same job) measured in",
        "the same run, a published figure with its source, a floor measured in the same run (a bound the",
        "platform cannot beat: the least time, or for a rate the most), or an issue's target, with whether",
        "the median meets it; a row's context (another figure of the platform, for scale) is in its figure",
        "cell, never in a comparison column. A platform figure",
        "is the median over repeated runs with min–max beside it; the provenance table says which commit,",
        "Neo4j line and JDK each file measured, and how many runs.",
        "",
        "| benchmark | figure | platform | peer, same run | published (source) | floor, same run | target "
        "| result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for r in result["rows"]:
            lines.append(_table_row(result["name"], r))
    lines += [
        "",
        "### Provenance",
        "",
        "| benchmark | commit | tree | Neo4j | JDK | date | runs | wall (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        lines.append(_provenance(result))
    (RESULTS / "README.md").write_text("\n".join(lines) + "\n")
    _write_readme_table(lines[next(i for i, line in enumerate(lines) if line.startswith("| benchmark |")) :])


README = REPO / "README.md"
BEGIN, END = "<!-- bench-table:begin", "<!-- bench-table:end -->"


def _write_readme_table(table: list[str]) -> None:
    """The project README's copy of the table (between its markers), so its figures are the result
    files' and nothing else."""
    text = README.read_text()
    start = text.index(BEGIN)
    start = text.index("\n", start) + 1
    end = text.index(END)
    README.write_text(text[:start] + "\n".join(table) + "\n" + text[end:])


def _table_row(name: str, r: dict[str, Any]) -> str:
    unit = r["unit"]
    figure = r["figure"]
    if "context" in r:
        figure += f" (same run, for scale: {r['context']['label']} {rows.show(r['context']['value'])} {unit})"
    spread = rows.spread(r.get("runs"))
    platform = f"{rows.show(r['value'])} {unit}" + (f" ({spread})" if spread else "")
    peer = ""
    if "peer" in r:
        peer_spread = rows.spread(r["peer"].get("runs"))
        peer = f"{r['peer']['label']}: {rows.show(r['peer']['value'])} {unit}" + (
            f" ({peer_spread})" if peer_spread else ""
        )
    published = ""
    if "published" in r:
        p = r["published"]
        published = f"{p['label']}: {rows.show(p['value'])} {unit} ({p['source']})"
    floor = f"{r['floor']['label']}: {rows.show(r['floor']['value'])} {unit}" if "floor" in r else ""
    target = f"{r['target']['op']} {rows.show(r['target']['value'])} {unit}" if "target" in r else ""
    verdict = {True: "met", False: "**missed**", None: ""}[rows.met(r)]
    cells = [name, figure, platform, peer, published, floor, target, verdict]
    return "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"


def _provenance(result: dict[str, Any]) -> str:
    code = result.get("code") or {}
    m = result.get("machine") or {}
    dirty = code.get("dirty")
    tree = "not recorded" if dirty is None else ("**dirty**" if dirty else "clean")
    runs = result.get("repeats", "1 (not recorded)")
    wall = result.get("wall_s") or (result.get("figures") or {}).get("wall_s") or ""
    cells = [
        result["name"],
        code.get("commit", "not recorded"),
        tree,
        m.get("neo4j", "not recorded"),
        m.get("neo4j_jdk", "not recorded"),
        result.get("date", ""),
        runs,
        wall,
    ]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append")
    parser.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help="runs of each benchmark; the table shows the median and min-max (a benchmark that repeats "
        "inside one run, such as adversarial, runs once)",
    )
    parser.add_argument(
        "--dirty", action="store_true", help="measure a tree with uncommitted changes (recorded)"
    )
    args = parser.parse_args()
    code = code_version()
    if code["dirty"] and not args.dirty:
        print("the tree has uncommitted changes; commit them, or pass --dirty (recorded in the results):")
        print("\n".join(f"  {line}" for line in code["changed"]))  # type: ignore[attr-defined]
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    for name in args.only or sorted(BENCHMARKS):
        module = BENCHMARKS[name]
        repeats = 1 if getattr(module, "REPEATS_INSIDE", False) else args.repeats
        started = time.time()
        runs = []
        for i in range(repeats):
            print(f"== {name} (run {i + 1} of {repeats})", flush=True)
            runs.append(module.run())
        result: dict[str, Any] = {
            "name": name,
            "rows": rows.merge_runs([r["rows"] for r in runs]),
            "figures": runs[0].get("figures", {}),
            "figures_of_other_runs": [r.get("figures", {}) for r in runs[1:]],
            "repeats": module.REPEATS if getattr(module, "REPEATS_INSIDE", False) else repeats,
            "code": code,
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
            "wall_s": round(time.time() - started, 1),
        }
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        for r in result["rows"]:
            print("  " + _table_row(name, r))
    write_table()
    print(f"results in {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
