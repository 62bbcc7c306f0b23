"""Start-up time and peak memory of the platform (`make run`'s process set).

Platform figures: the whole platform from `platform/run.py` (cold: empty directories; warm: the same
directories again), time until Neo4j prints READY and until /healthz answers 200, then a short load
(health checks, authenticated reads, project creations) and each process's peak RSS (VmHWM).
Peers, from the same run: Redis next to Neo4j; Neo4j + Redis alone next to the whole platform;
a bare `django.setup()` process next to each Python process.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.rows import row
from core.runtime.processes import free_ports, spawn_platform, start_neo4j, start_redis

REPO = Path(__file__).resolve().parent.parent
# Every platform a bench starts runs its embedded Neo4j and Redis with these passwords (as `make run`
# does with its generated ones); the bench's own drivers use them too.
os.environ.setdefault("NEO4J_PASSWORD", secrets.token_urlsafe(32))
os.environ.setdefault("REDIS_PASSWORD", secrets.token_urlsafe(32))


def neo4j_auth() -> tuple[str, str]:
    return ("neo4j", os.environ["NEO4J_PASSWORD"])


def redis_password() -> str:
    return os.environ["REDIS_PASSWORD"]


def _vm_hwm_mib(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmHWM:\s+(\d+) kB", text)
    return round(int(match.group(1)) / 1024, 1) if match else None


def _role(proc: psutil.Process) -> str | None:
    try:
        cmd = " ".join(proc.cmdline())
        name = proc.name()
    except psutil.Error:
        return None
    if name == "java" and "Launcher" in cmd:
        return "neo4j"
    if name == "redis-server":
        return "redis"
    if "daphne" in cmd:
        return "web"
    if "celery" in cmd and " worker" in cmd:
        return "worker"
    if "celery" in cmd and " beat" in cmd:
        return "beat"
    return None


class PlatformRun:
    def __init__(self, var_dir: Path, **extra_env: str) -> None:
        self.ports = dict(zip(("neo4j", "redis", "web"), free_ports(3), strict=True))
        env = {k: v for k, v in os.environ.items() if k not in ("NEO4J_URI", "REDIS_URL")}
        env.update(
            VAR_DIR=str(var_dir),
            NEO4J_BOLT_PORT=str(self.ports["neo4j"]),
            REDIS_PORT=str(self.ports["redis"]),
            WEB_PORT=str(self.ports["web"]),
            # benchmarks create many projects with one key; the per-key quota (an abuse control of
            # issue 28) is lifted, as the throttle is where a benchmark needs it
            API_KEY_PROJECT_QUOTA="100000",
        )
        env.update(extra_env)
        self.var_dir = var_dir
        self.base = f"http://127.0.0.1:{self.ports['web']}"
        self.lines: list[tuple[float, str]] = []
        self.t0 = time.monotonic()
        self.proc = spawn_platform(env)
        threading.Thread(target=self._read, daemon=True).start()

    def neo4j_process(self) -> psutil.Process | None:
        """The platform's Neo4j process (None when it runs against an external server)."""
        children = psutil.Process(self.proc.pid).children(recursive=True)
        return next((p for p in children if _role(p) == "neo4j"), None)

    def wait_neo4j_idle(self, *, below_pct: float = 20.0, seconds: int = 5, timeout: float = 900) -> float:
        """Wait until Neo4j has used less than `below_pct` % of a core for `seconds` seconds in a
        row (after a bulk load Lucene merges index segments for minutes, with a full core); returns
        the seconds waited."""
        started = time.monotonic()
        neo4j = self.neo4j_process()
        if neo4j is None:
            return 0.0
        quiet = 0
        last = sum(neo4j.cpu_times()[:2])
        while quiet < seconds and time.monotonic() - started < timeout:
            time.sleep(1)
            now = sum(neo4j.cpu_times()[:2])
            quiet = quiet + 1 if (now - last) * 100 < below_pct else 0
            last = now
        return round(time.monotonic() - started, 1)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.t0, line.rstrip()))

    def when(self, pattern: str) -> float:
        for at, line in self.lines:
            if re.search(pattern, line):
                return round(at, 2)
        raise RuntimeError(f"never printed {pattern!r}:\n" + "\n".join(line for _, line in self.lines[-40:]))

    def value(self, label: str) -> str:
        """A value `make run` printed; the demo key and project come from VAR_DIR/credentials."""
        stored = {"demo API key": "DEMO_API_KEY", "demo project": "DEMO_PROJECT_ID"}
        if label in stored and (self.var_dir / "credentials").is_file():
            for line in (self.var_dir / "credentials").read_text().splitlines():
                name, _, value = line.partition("=")
                if name == stored[label]:
                    return value
        for _, line in self.lines:
            match = re.search(rf"{label}\s+(\S+)$", line)
            if match:
                return match.group(1)
        raise RuntimeError(f"{label} not printed")

    def cli_env(self) -> dict[str, str]:
        """Environment for manage.py commands against this running platform."""
        return {
            **os.environ,
            "VAR_DIR": str(self.var_dir),
            "NEO4J_URI": f"bolt://127.0.0.1:{self.ports['neo4j']}",
            "REDIS_URL": f"redis://:{redis_password()}@127.0.0.1:{self.ports['redis']}/0",
        }

    def wait_healthy(self, timeout: float = 300) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/healthz", timeout=5).status_code == 200:
                    return round(time.monotonic() - self.t0, 2)
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(
            "platform never became healthy:\n" + "\n".join(line for _, line in self.lines[-60:])
        )

    def load(self) -> dict[str, float]:
        time.sleep(0.5)  # the demo key is printed just before the web server listens
        project, key = self.value("demo project"), self.value("demo API key")
        headers = {"Authorization": f"Bearer {key}"}
        timings: dict[str, list[float]] = {"healthz": [], "project_get": [], "project_create": []}
        with httpx.Client(base_url=self.base, timeout=30) as client:
            for i in range(300):
                for name, call in (
                    ("healthz", lambda: client.get("/healthz")),
                    ("project_get", lambda: client.get(f"/api/v1/projects/{project}", headers=headers)),
                ):
                    started = time.perf_counter()
                    response = call()
                    timings[name].append(time.perf_counter() - started)
                    response.raise_for_status()
                if i % 6 == 0:
                    started = time.perf_counter()
                    client.post(
                        "/api/v1/projects", json={"name": f"bench {i}"}, headers=headers
                    ).raise_for_status()
                    timings["project_create"].append(time.perf_counter() - started)
        return {name: round(sorted(v)[len(v) // 2] * 1000, 1) for name, v in timings.items()}

    def wait_warmed_up(self, timeout: float = 300) -> float:
        """Seconds from the start until the web process's warm-up reports done (/healthz)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = httpx.get(f"{self.base}/healthz", timeout=5).json()
            if body.get("warm_up", {}).get("status") in ("done", "off"):
                return round(time.monotonic() - self.t0, 2)
            time.sleep(0.2)
        raise RuntimeError("the warm-up never finished")

    def first_queries(self, passes: int = 2) -> list[dict[str, list[float]]]:
        """Milliseconds of ten queries of each hot kind, first to tenth (ten different questions, none
        the warm-up's), as an agent sends them over HTTP right after the start; then the same ten again
        (the second pass: each question warm, which separates a cold start from a heavier question)."""
        project, key = self.value("demo project"), self.value("demo API key")
        headers = {"Authorization": f"Bearer {key}"}
        calls: dict[str, Any] = {
            **{
                f"search {mode}": lambda q, mode=mode: (
                    f"/api/v1/projects/{project}/search",
                    {"query": q, "mode": mode, "top_k": 10},
                )
                for mode in ("hybrid", "graph", "vector", "fulltext")
            },
            "DRIFT": lambda q: ("/retrieve", {"query": q, "project_id": project}),
            "memory search": lambda q: (
                f"/api/v1/projects/{project}/memories/search",
                {"query": q, "scope": {"user_id": "bench"}, "top_k": 10},
            ),
        }
        out: list[dict[str, list[float]]] = [{name: [] for name in calls} for _ in range(passes)]
        with httpx.Client(base_url=self.base, timeout=120, headers=headers) as client:
            for times in out:
                for question in FIRST_QUESTIONS:  # each kind's first query, then each kind's second, …
                    for name, call in calls.items():
                        path, body = call(question)
                        started = time.perf_counter()
                        client.post(path, json=body).raise_for_status()
                        times[name].append(round((time.perf_counter() - started) * 1000, 1))
        return out

    def peaks(self) -> dict[str, float]:
        peaks: dict[str, float] = {}
        for proc in psutil.Process(self.proc.pid).children(recursive=True):
            role = _role(proc)
            hwm = _vm_hwm_mib(proc.pid)
            if role is None or hwm is None:
                continue
            if role == "worker" and _role(proc.parent()) == "worker":
                role = "worker pool child"
            peaks[role] = max(peaks.get(role, 0.0), hwm)
        return peaks

    def stop(self) -> float:
        started = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=120)
        return round(time.monotonic() - started, 2)


# starts of the platform, each with its first queries, per run of this benchmark (warm-up on)
FIRST_QUERY_STARTS = 3

# ten questions about the demo corpus, none of them one the warm-up asks
FIRST_QUESTIONS = [
    "How are documents split into chunks?",
    "Which embedder does a project use?",
    "How are communities detected?",
    "What keeps one project's data from another's?",
    "How does the platform restart a process that died?",
    "What does the extractive strategy do without an LLM?",
    "Where are entities and relations extracted?",
    "How large is a chunk's overlap?",
    "How is an API key scoped to a project?",
    "What happens when Neo4j is down?",
]


def _bare_django_peak() -> float:
    code = (
        "import os, re, django;"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings'); django.setup();"
        "import config.asgi, core.apis;"
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return round(int(out.stdout.strip().splitlines()[-1]) / 1024, 1)


def _bare_services(tmp: Path) -> dict[str, float]:
    """Peer: Neo4j and Redis alone, started together, cold then warm."""
    out: dict[str, float] = {}
    for phase in ("cold", "warm"):
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=2) as pool:
            neo4j_future = pool.submit(start_neo4j, tmp / "peer-neo4j", password=neo4j_auth()[1])
            redis_future = pool.submit(start_redis, tmp / "peer-redis", password=redis_password())
            results = {"neo4j": neo4j_future.result(), "redis": redis_future.result()}
        out[f"services_{phase}_s"] = round(time.monotonic() - started, 2)
        out[f"redis_{phase}_s"] = round(results["redis"].started_sec, 2)
        out[f"neo4j_alone_{phase}_s"] = round(results["neo4j"].started_sec, 2)
        out["redis_peak_mib"] = _vm_hwm_mib(results["redis"].proc.pid) or 0.0
        for proc in results.values():
            proc.stop()
    return out


def run() -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-startup-"))
    try:
        peer = _bare_services(tmp)
        django_peak = _bare_django_peak()
        figures: dict[str, Any] = {"peer": peer, "bare_django_peak_mib": django_peak}
        for phase in ("cold", "warm"):
            platform = PlatformRun(tmp / "var")
            try:
                healthy = platform.wait_healthy()
                latency = platform.load()
                figures[phase] = {
                    "neo4j_ready_s": platform.when(r"neo4j\s+\| READY"),
                    "redis_ready_s": platform.when(r"Ready to accept connections"),
                    "healthz_200_s": healthy,
                    "median_latency_ms": latency,
                    "peak_rss_mib": platform.peaks(),
                }
            finally:
                figures[phase]["stop_s"] = platform.stop()
        # first query against the tenth, right after a start: with the warm-up (the default) and, as
        # the peer in this run, with the warm-up off (the embedder is still loaded at start). A first
        # query is one sample per start: the warm-up's figures are taken over FIRST_QUERY_STARTS starts
        for phase, rounds, starts in (
            ("first_queries", {}, FIRST_QUERY_STARTS),  # the default WARM_UP_ROUNDS
            ("first_queries_no_warm_up", {"WARM_UP_ROUNDS": "0"}, 1),
        ):
            figures[phase] = {"starts": []}
            for _ in range(starts):
                platform = PlatformRun(tmp / "var", **rounds)
                try:
                    platform.wait_healthy()
                    warmed_up = platform.wait_warmed_up()
                    first_pass, second_pass = platform.first_queries()
                    figures[phase]["starts"].append(
                        {"warmed_up_s": warmed_up, "ms": first_pass, "again_ms": second_pass}
                    )
                finally:
                    platform.stop()
        return {"rows": _rows(figures), "figures": figures}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rows(figures: dict[str, Any]) -> list[dict[str, Any]]:
    peer, django_peak = figures["peer"], figures["bare_django_peak_mib"]
    cold, warm = figures["cold"], figures["warm"]
    rows = [
        row(
            "Neo4j ready, empty store",
            cold["neo4j_ready_s"],
            "s",
            context=("Redis ready, empty dir", cold["redis_ready_s"]),
        ),
        row(
            "Neo4j ready, existing store",
            warm["neo4j_ready_s"],
            "s",
            context=("Redis ready, existing AOF", warm["redis_ready_s"]),
        ),
        row(
            "whole platform /healthz 200, cold",
            cold["healthz_200_s"],
            "s",
            floor=("Neo4j + Redis alone, cold", peer["services_cold_s"]),
        ),
        row(
            "whole platform /healthz 200, warm",
            warm["healthz_200_s"],
            "s",
            floor=("Neo4j + Redis alone, warm", peer["services_warm_s"]),
        ),
        row(
            "whole platform stop (Ctrl-C)",
            warm["stop_s"],
            "s",
            context=("cold run's stop", cold["stop_s"]),
        ),
        row(
            "peak RSS neo4j (JVM, 1g heap)",
            warm["peak_rss_mib"].get("neo4j"),
            "MiB",
            context=("redis", warm["peak_rss_mib"].get("redis")),
        ),
    ]
    for role in ("web", "worker", "worker pool child", "beat"):
        rows.append(
            row(
                f"peak RSS {role}",
                warm["peak_rss_mib"].get(role),
                "MiB",
                context=("a bare django.setup() in the bench process", django_peak),
            )
        )
    warmed, unwarmed = figures["first_queries"]["starts"], figures["first_queries_no_warm_up"]["starts"]
    for name in warmed[0]["ms"]:
        rows.append(
            row(
                f"first {name} after a start (warm-up on; median of {len(warmed)} starts)",
                statistics.median(start["ms"][name][0] for start in warmed),
                "ms",
                peer=("the same with the warm-up off", statistics.median(s["ms"][name][0] for s in unwarmed)),
                floor=(
                    "the same question asked again after all ten",
                    statistics.median(start["again_ms"][name][0] for start in warmed),
                ),
                context=(
                    "median of its 2nd to 10th query",
                    statistics.median(ms for start in warmed for ms in start["ms"][name][1:]),
                ),
            )
        )
    rows.append(
        row(
            "web warm-up done after the start",
            statistics.median(start["warmed_up_s"] for start in warmed),
            "s",
            context=(
                "with the warm-up off (embedder only)",
                statistics.median(start["warmed_up_s"] for start in unwarmed),
            ),
        )
    )
    rows.append(
        row(
            "median GET /api/v1/projects/{id}",
            warm["median_latency_ms"]["project_get"],
            "ms",
            context=("median GET /healthz (4 checks)", warm["median_latency_ms"]["healthz"]),
        )
    )
    return rows


def cpu_by_role(platform: PlatformRun) -> dict[str, float]:
    """CPU seconds used so far by each of the platform's processes, by role (web, worker, …)."""
    out: dict[str, float] = {}
    for proc in psutil.Process(platform.proc.pid).children(recursive=True):
        try:
            role = _role(proc)
            if role == "worker" and _role(proc.parent()) == "worker":
                role = "worker pool children"
            times = proc.cpu_times()
        except psutil.Error:
            continue
        if role is not None:
            out[role] = out.get(role, 0.0) + times.user + times.system
    return out


def cpu_since(platform: PlatformRun, before: dict[str, float]) -> dict[str, float]:
    after = cpu_by_role(platform)
    return {role: round(after[role] - before.get(role, 0.0), 1) for role in sorted(after)}


def neo4j_cpu(platform: PlatformRun) -> dict[str, float]:
    """CPU seconds so far of Neo4j's threads: the JIT compilers apart from the rest (query execution,
    index writes and merges; threads that ended count only in the process total)."""
    neo4j = platform.neo4j_process()
    assert neo4j is not None, "the bench starts its own Neo4j"
    out = {"jit_compiler": 0.0, "process": sum(neo4j.cpu_times()[:2])}
    for task in Path(f"/proc/{neo4j.pid}/task").iterdir():
        try:
            name = (task / "comm").read_text()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if name.startswith(("C1 Compiler", "C2 Compiler")):
            out["jit_compiler"] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def neo4j_cpu_since(platform: PlatformRun, before: dict[str, float]) -> dict[str, float]:
    after = neo4j_cpu(platform)
    jit = after["jit_compiler"] - before["jit_compiler"]
    return {"jit_compiler": round(jit, 1), "rest": round(after["process"] - before["process"] - jit, 1)}
