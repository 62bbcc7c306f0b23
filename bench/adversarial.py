"""Adversarial text against every text-accepting endpoint (issue 28: no request may stall the server).

For each endpoint that takes text (documents as JSON and as an uploaded file, search, memory store
and search, session events, ADK memory, DRIFT `/retrieve`), an 80 KB and a 1 MB input (and, where the
endpoint refuses longer text, one at its limit) of five adversarial kinds is sent next to normal text
of the same size, BENCH_ADVERSARIAL_REPEATS times (default 3) each, interleaved. The kinds are what
made the old regular expressions quadratic: a long run of spaces and tabs with no newline after it
(`[ \\t]+\\n` in text cleaning), "Mr " repeated (PII name cues), "a.a.a…" (the e-mail local part),
"regards,\\n \\n \\n…" (signature blocks), and the words of a name found by its cue repeated one
word short of it (the known-name matcher). The project redacts PII at ingest, so the PII patterns run
in the request where the endpoint uses them.

The figure is the client-side latency of the request (HTTP on loopback), median with min and max:
the worst adversarial kind next to normal text of the same size (the peer, measured in the same run).
The goal: adversarial input answers within the time of normal input. The status of every answer is
recorded (a 400 or 413 for text over an endpoint's limit is the expected answer, and it must come as
fast). The Celery worker is paused (SIGSTOP) while requests are timed, so the ingestion and memory
jobs the requests queue do not compete with the web process for the two cores; it resumes at the end.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.memory import _platform
from bench.rows import row
from bench.startup import PlatformRun, _role

REPEATS = int(os.environ.get("BENCH_ADVERSARIAL_REPEATS", "3"))
REPEATS_INSIDE = True  # bench/run.py runs it once: every figure is already the median of REPEATS runs
SIZES = {"80 KB": 80_000, "1 MB": 1_000_000}
QUERY_LIMIT = 10_000  # RETRIEVAL_MAX_QUERY_CHARS and MEMORY_MAX_QUERY_CHARS (defaults)
MESSAGE_LIMIT = 32_000  # MEMORY_MAX_MESSAGE_CHARS (default)


def _fill(unit: str, size: int, tail: str = "") -> str:
    return (unit * (size // len(unit) + 1))[: size - len(tail)] + tail


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    # a run of blanks never followed by a newline: each start position scanned to the end
    "spaces and tabs": lambda size: _fill(" \t", size, tail="x"),
    "Mr repeated": lambda size: _fill("Mr ", size),
    # the words of a name found by its cue, repeated and cut one word short of it: every word starts
    # a walk of the known-name matcher that fails at its end
    "a cued name's words": lambda size: "Mr Xy Xy Xy Xy Xy Xy. " + _fill("Xy Xy Xy Xy Xy Q ", size - 22),
    "a.a.a": lambda size: _fill("a.", size),
    "regards and blank lines": lambda size: "regards,\n" + _fill(" \n", size - 9),
}

_WORDS = [
    *("the", "a", "of", "to", "and", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at"),
    *("from", "his", "her", "their", "which", "this", "research", "library", "engine", "machine"),
    *("letter", "meeting", "paper", "notes", "travel", "Lisbon", "London", "Paris", "river", "bridge"),
    *("analysis", "chapter", "method", "result", "question", "answer", "report", "table", "number"),
    *("early", "later", "during", "after"),
]
_NAMES = ("Ada Lovelace", "Charles Babbage", "Mary Somerville", "Ana Silva", "John Smith")


def normal_text(size: int, seed: int = 7) -> str:
    """Prose of `size` characters: sentences of common words with some names, a few e-mail
    addresses and phone numbers (what the PII patterns look for at a normal density), paragraphs."""
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 22))]
        if rng.random() < 0.3:
            words.insert(rng.randint(0, len(words)), rng.choice(_NAMES))
        if rng.random() < 0.05:
            words.append(f"(write to {rng.choice(_WORDS)}.{rng.choice(_WORDS)}@example.org)")
        if rng.random() < 0.03:
            words.append(f"call +44 20 7946 {rng.randint(1000, 9999)}")
        sentence = " ".join(words)
        sentence = sentence[0].upper() + sentence[1:] + ("." if rng.random() < 0.85 else ".\n\n")
        parts.append(sentence + " ")
        length += len(sentence) + 1
    return "".join(parts)[:size]


class _Endpoints:
    """One request per text-accepting endpoint, in the bench project."""

    def __init__(self, client: httpx.Client, project: str) -> None:
        self.client, self.project = client, project
        self.base = f"/api/v1/projects/{project}"
        self.user = f"{self.base}/apps/bench/users/bench"

    def setup(self) -> None:
        response = self.client.post(f"{self.user}/sessions", json={"session_id": "adversarial"})
        assert response.status_code in (201, 409), response.text

    def all(self) -> dict[str, Callable[[str], httpx.Response]]:
        c, base, user = self.client, self.base, self.user
        return {
            "documents (JSON)": lambda text: c.post(
                f"{base}/documents", json={"title": "bench", "text": text}
            ),
            "documents (upload)": lambda text: c.post(
                f"{base}/documents", files={"file": ("bench.txt", text.encode(), "text/plain")}
            ),
            "search": lambda text: c.post(f"{base}/search", json={"query": text, "mode": "hybrid"}),
            "memories store": lambda text: c.post(
                f"{base}/memories",
                json={"messages": [{"role": "user", "text": text}], "scope": {"user_id": "bench"}},
            ),
            "memories search": lambda text: c.post(
                f"{base}/memories/search", json={"query": text, "scope": {"user_id": "bench"}}
            ),
            "session events": lambda text: c.post(
                f"{user}/sessions/adversarial/events",
                json={"event": {"author": "user", "content": {"parts": [{"text": text}]}}},
            ),
            "ADK memory": lambda text: c.post(f"{user}/memory", json={"memories": [{"text": text}]}),
            "DRIFT /retrieve": lambda text: c.post(
                "/retrieve", json={"query": text, "project_id": self.project, "top_k": 5}
            ),
        }


# the largest text an endpoint accepts, where that is below 80 KB: measured there too
LIMITS = {
    "search": QUERY_LIMIT,
    "memories search": QUERY_LIMIT,
    "DRIFT /retrieve": QUERY_LIMIT,
    "memories store": MESSAGE_LIMIT,
    "ADK memory": MESSAGE_LIMIT,
}


@contextmanager
def _worker_paused(platform: PlatformRun) -> Iterator[None]:
    """SIGSTOP the Celery worker (and its pool) and beat; SIGCONT them afterwards."""
    stopped = []
    for proc in psutil.Process(platform.proc.pid).children(recursive=True):
        if _role(proc) in ("worker", "beat"):
            with suppress(psutil.Error):
                proc.send_signal(signal.SIGSTOP)
                stopped.append(proc)
    try:
        yield
    finally:
        for proc in stopped:
            with suppress(psutil.Error):
                proc.send_signal(signal.SIGCONT)


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


def _measure(call: Callable[[str], httpx.Response], texts: dict[str, str]) -> dict[str, Any]:
    """Every text REPEATS times, interleaved (normal, each adversarial kind, normal, …)."""
    runs: dict[str, list[float]] = {kind: [] for kind in texts}
    statuses: dict[str, list[int]] = {kind: [] for kind in texts}
    for _ in range(REPEATS):
        for kind, text in texts.items():
            started = time.perf_counter()
            response = call(text)
            runs[kind].append((time.perf_counter() - started) * 1000)
            statuses[kind].append(response.status_code)
    return {
        kind: {**_spread(runs[kind]), "runs_ms": [round(v, 1) for v in runs[kind]], "status": statuses[kind]}
        for kind in texts
    }


def _fmt(spread: dict[str, Any]) -> str:
    codes = "/".join(str(c) for c in sorted(set(spread["status"])))
    return f"{spread['median']} (min {spread['min']}, max {spread['max']}; HTTP {codes})"


def _rows(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Per endpoint and size, the worst adversarial kind (highest median) against normal text. The
    target (issue 28: adversarial input answers within the time of normal input) is the slowest of
    the normal runs: the worst of several kinds' medians sits above one median of the same cost by
    chance alone, so the median of normal text would make equal costs look like misses."""
    out = []
    for name, results in figures["endpoints"].items():
        for label, measured in results.items():
            if not isinstance(measured, dict):
                continue
            worst, normal = measured["worst_adversarial"], measured["normal"]
            codes = {
                k: "/".join(str(c) for c in sorted(set(measured[k]["status"]))) for k in (worst, "normal")
            }
            out.append(
                row(
                    f"{name}, {label}: adversarial, worst of {len(ADVERSARIAL)} kinds ({worst}; HTTP "
                    f"{codes[worst]}; normal text HTTP {codes['normal']}); target: within normal text's runs",
                    measured[worst]["median"],
                    "ms",
                    runs=measured[worst]["runs_ms"],
                    peer=("normal text of the same size", normal["median"]),
                    peer_runs=normal["runs_ms"],
                    target=("<=", normal["max"]),
                )
            )
    return out


def run() -> dict[str, Any]:
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-adversarial-"))
    figures: dict[str, Any] = {"repeats": REPEATS, "endpoints": {}}
    try:
        env = {"API_THROTTLE_RATE": "100000/min", "API_PROBE_RATE": "100000/min"}
        with _platform(tmp, "var", **env) as (platform, admin):
            headers = {"Authorization": f"Bearer {admin}"}
            with httpx.Client(base_url=platform.base, headers=headers, timeout=900) as client:
                project = client.get("/api/v1/projects").json()["items"][0]["id"]
                # the project redacts PII at ingest: the PII patterns run in the request
                privacy = client.patch(
                    f"/api/v1/projects/{project}/privacy", json={"redact_pii_at_ingest": True}
                )
                assert privacy.status_code == 200, privacy.text
                endpoints = _Endpoints(client, project)
                endpoints.setup()
                with _worker_paused(platform):
                    for name, call in endpoints.all().items():
                        warm = call(normal_text(2_000, seed=1))  # first-call costs out of the figures
                        sizes = dict(SIZES)
                        if name in LIMITS:
                            sizes = {f"{LIMITS[name]:,} chars (its limit)": LIMITS[name], **sizes}
                        results: dict[str, Any] = {"warm_up_status": warm.status_code}
                        for label, size in sizes.items():
                            texts = {"normal": normal_text(size)}
                            texts.update({kind: make(size) for kind, make in ADVERSARIAL.items()})
                            measured = _measure(call, texts)
                            worst = max(ADVERSARIAL, key=lambda kind: measured[kind]["median"])
                            results[label] = {"size_chars": size, "worst_adversarial": worst, **measured}
                            print(
                                f"  {name:<20} {label:<28} adversarial {_fmt(measured[worst])}"
                                f"  normal {_fmt(measured['normal'])}",
                                flush=True,
                            )
                        figures["endpoints"][name] = results
        figures["wall_s"] = round(time.perf_counter() - started, 1)
        return {"rows": _rows(figures), "figures": figures}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
