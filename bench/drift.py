"""DRIFT search (POST /retrieve) on hotpotqa-100: LLM calls, tokens, wall time, time to the first
progress event and the platform's own overhead, with a local OpenAI-compatible server answering every
chat call after a fixed 300 ms; and the extractive mode's answer recall on the 100 questions.

Peers in the same run: Microsoft GraphRAG's DRIFT defaults (primer folds 5, drift_k_followups 20,
n_depth 3) give its call count and latency floor at the same 300 ms per call (computed from its
published defaults, not run); for answer recall, the platform's own hybrid search (is the gold answer
anywhere in the top-5 chunks' text?).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from bench.ingestion import _issue_key, _post_all, _wait, load_corpus
from bench.retrieval import load_questions
from bench.rows import row
from bench.startup import PlatformRun, _role, redis_password
from tests.support.openai_server import FakeOpenAI, Step, token_encoding

LLM_DELAY_SEC = 0.3
BENCH_LLM_MODEL = (
    "gpt-4o-mini"  # the platform's default LLM_MODEL; the fake answers as it, tokens counted for it
)
GRAPHRAG_CALLS = 1 + 5 + 20 * 3 + 1  # HyDE + primer folds + k_followups per depth + reduce
GRAPHRAG_ROUNDS = 1 + 1 + 3 + 1  # folds and each depth's follow-ups run side by side
_CHUNKS = re.compile(r"Valid chunk ids: (.*)")
_COMMUNITIES = re.compile(r"Valid community ids: (.*)")
_QUESTION = re.compile(r"Follow-up question: (.*)")


# warm-up questions, not among the timed ones: about corpus titles, so that they find data and run
# every step (follow-ups, neighbourhoods). The figures are for a warm server: Neo4j plans each query
# shape on first use and plans it again, with compiled expressions, once it has run ~10 times, and its
# JVM compiles the hot paths over thousands of queries (a trivial read took 3.6 ms after the first
# few hundred reads of a fresh platform, 0.7 ms after ~15,000). The extractive run warms up with 20;
# the LLM run with 200, the fake model answering them at once (about 75 s instead of 7 minutes).
WARMUP_QUESTIONS = 20
WARMUP_QUESTIONS_LLM = 200


def _warmup_questions(n: int = WARMUP_QUESTIONS) -> list[str]:
    titles = [doc["title"] for doc in load_corpus()]
    step = max(1, len(titles) // n)
    return [f"What is known about {title}?" for title in titles[::step][:n]]


def _listed(pattern: re.Pattern[str], text: str) -> list[str]:
    match = pattern.search(text)
    return [x.strip() for x in match.group(1).split(",") if x.strip()] if match else []


def _text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def _kind(text: str) -> str:
    """Which step of DRIFT a chat request is (the prompts' own markers)."""
    if "DRIFT-Search Primer" in text:
        return "primer"
    if "DRIFT-Search Local Executor" in text:
        return "round 2" if "Follow-up question: Deeper:" in text else "round 1"
    if "DRIFT-Search Aggregator" in text:
        return "aggregator"
    return "HyDE"


class _CallLog:
    """The fake server's responder: records when each chat request arrived and what it was for (the
    responder runs on arrival, before the server's 300 ms wait), then answers as `_model` does."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Step:
        arrived = time.perf_counter()
        with self._lock:
            self.calls.append((arrived, _kind(_text(body))))
        return _model(body)

    def take(self) -> list[tuple[float, str]]:
        with self._lock:
            calls, self.calls = self.calls, []
        return sorted(calls)


def _model(body: dict[str, Any]) -> Step:
    """Answers like a model that follows the prompts: real ids from the lists, a few sentences each."""
    text = _text(body)
    sentences = "The evidence names the people, places and dates involved. " * 3
    if "DRIFT-Search Primer" in text:
        communities = _listed(_COMMUNITIES, text) or ["none"]
        followups = [
            {"question": f"Which entities of community {c} answer the question?", "target_communities": [c]}
            for c in (communities * 5)[:5]
        ]
        return Step(
            content=json.dumps({"initial_answer": sentences, "followups": followups, "rationale": "r"})
        )
    if "DRIFT-Search Local Executor" in text:
        ids = _listed(_CHUNKS, text)
        question = (_QUESTION.search(text) or re.search("(.*)", "")).group(1)  # type: ignore[union-attr]
        deeper = question.startswith("Deeper:")
        return Step(
            content=json.dumps(
                {
                    "answer": sentences,
                    "citations": [{"chunk_id": i, "span": "quoted evidence"} for i in ids[:2]],
                    "new_followups": [] if deeper else [{"question": f"Deeper: {question[:80]}"}],
                    "confidence": 0.7,
                    "should_continue": not deeper,
                }
            )
        )
    if "DRIFT-Search Aggregator" in text:
        ids = _listed(_CHUNKS, text)
        facts = [{"fact": sentences, "citations": ids[i : i + 2]} for i in range(0, min(len(ids), 6), 2)]
        return Step(
            content=json.dumps({"final_answer": sentences, "key_facts": facts, "residual_uncertainty": ""})
        )
    return Step(content=sentences)  # HyDE


class _FirstEvents:
    """Arrival time of the first progress event of each retrieval id (Redis pub/sub)."""

    def __init__(self, port: int) -> None:
        self.first: dict[str, float] = {}
        self._pubsub = redis.Redis(port=port, password=redis_password()).pubsub()
        self._pubsub.subscribe("ui:retrieval_progress")
        self._pubsub.get_message(timeout=2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0.05)
            if message and message["type"] == "message":
                rid = json.loads(message["data"]).get("retrieval_id")
                if rid and rid not in self.first:
                    self.first[rid] = time.perf_counter()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._pubsub.close()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 1)


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": _pct(values, 0.5), "p95": _pct(values, 0.95), "max": round(max(values), 1)}


def _found(answer: str, texts: list[str]) -> bool:
    needle = answer.strip().lower()
    return bool(needle) and any(needle in t.lower() for t in texts)


def _drift_texts(body: dict[str, Any]) -> list[str]:
    return [body.get("final_answer") or ""] + [f.get("fact") or "" for f in body.get("key_facts") or []]


def _start(var: Path, **env: str) -> tuple[PlatformRun, str]:
    platform = PlatformRun(var, COMMUNITY_REBUILD_DELAY_SEC="-1", DEMO_BOOTSTRAP="true", **env)
    platform.wait_healthy()
    time.sleep(1)
    return platform, platform.value("demo API key")


def run() -> dict[str, Any]:
    started = time.perf_counter()
    questions = load_questions()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-drift-"))
    fake = FakeOpenAI().start()
    log = _CallLog()
    figures: dict[str, Any] = {"questions": len(questions), "llm_delay_ms": LLM_DELAY_SEC * 1000}
    try:
        # 1. ingest and cluster without an LLM, then the extractive mode and its peer
        platform, admin = _start(tmp / "var")
        try:
            with httpx.Client(base_url=platform.base, timeout=600) as client:
                client.headers["Authorization"] = f"Bearer {admin}"
                project = client.post("/api/v1/projects", json={"name": "hotpotqa-drift"}).json()["id"]
                key = _issue_key(project, platform.cli_env())
                client.headers["Authorization"] = f"Bearer {key}"
                _post_all(client, project, load_corpus())
                _wait(client, client.post(f"/api/v1/projects/{project}/communities:rebuild").json()["job_id"])
                figures["extractive"] = _extractive(client, project, questions)
                print(f"  extractive: {figures['extractive']}", flush=True)
        finally:
            platform.stop()
        # 2. the same data with the (fake, 300 ms) LLM
        fake.chat_delay_sec = LLM_DELAY_SEC
        fake.responder = log
        platform, _admin = _start(
            tmp / "var",
            LLM_PROVIDER="openai",
            LLM_BASE_URL=fake.base_url,
            LLM_API_KEY="bench",
            LLM_MODEL=BENCH_LLM_MODEL,
        )
        try:
            with httpx.Client(base_url=platform.base, timeout=600) as client:
                client.headers["Authorization"] = f"Bearer {key}"
                figures["llm"] = _llm(client, project, questions, platform, fake, log)
                # the fake reports usage counted with tiktoken for the configured model
                figures["llm"]["token_encoding"] = token_encoding(BENCH_LLM_MODEL)[1]
                print(f"  llm: {figures['llm']}", flush=True)
        finally:
            platform.stop()
    finally:
        fake.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    figures["graphrag_defaults"] = {
        "llm_calls": GRAPHRAG_CALLS,
        "sequential_rounds": GRAPHRAG_ROUNDS,
        "wall_floor_ms": round(GRAPHRAG_ROUNDS * LLM_DELAY_SEC * 1000),
        "source": "computed from GraphRAG's published DRIFT defaults (primer folds 5, drift_k_followups 20, "
        "n_depth 3, concurrency 32), not run",
    }
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    return _wrap_up(figures)


def _extractive(client: httpx.Client, project: str, questions: list[dict[str, Any]]) -> dict[str, Any]:
    for warm in _warmup_questions():  # not among the timed ones
        client.post("/retrieve", json={"query": warm, "project_id": project})
    found = peer_found = 0
    walls: list[float] = []
    peer_walls: list[float] = []
    timings: list[dict[str, float]] = []
    for q in questions:
        t = time.perf_counter()
        response = client.post("/retrieve", json={"query": q["question"], "project_id": project})
        walls.append((time.perf_counter() - t) * 1000)
        response.raise_for_status()
        body = response.json()
        assert body["mode"] == "extractive", body
        assert body["usage"]["llm_calls"] == 0, body["usage"]
        timings.append(body["timings_ms"])
        found += _found(q["answer"], _drift_texts(body))
        t = time.perf_counter()
        response = client.post(
            f"/api/v1/projects/{project}/search", json={"query": q["question"], "mode": "hybrid", "top_k": 5}
        )
        peer_walls.append((time.perf_counter() - t) * 1000)
        response.raise_for_status()
        peer_found += _found(q["answer"], [" ".join(h["text"] for h in response.json()["items"][:5])])
    n = len(questions)
    return {
        "answer_recall_pct": round(100 * found / n, 1),
        "hybrid_top5_answer_in_context_pct": round(100 * peer_found / n, 1),
        "wall_ms": _spread(walls),
        "hybrid_wall_ms": _spread(peer_walls),
        "timings_ms": {
            k: _spread([tm.get(k, 0.0) for tm in timings]) for k in sorted({k for tm in timings for k in tm})
        },
    }


def _llm(
    client: httpx.Client,
    project: str,
    questions: list[dict[str, Any]],
    platform: PlatformRun,
    fake: FakeOpenAI,
    log: _CallLog,
) -> dict[str, Any]:
    """The 100 questions one after the other at default settings (no knobs in the request)."""
    listener = _FirstEvents(platform.ports["redis"])
    delay, fake.chat_delay_sec = fake.chat_delay_sec, 0.0
    for warm in _warmup_questions(WARMUP_QUESTIONS_LLM):  # not among the timed ones
        client.post("/retrieve", json={"query": warm, "project_id": project})
    fake.chat_delay_sec = delay
    time.sleep(0.2)
    log.take()
    per_query: list[dict[str, Any]] = []
    cpu_before, clock_before = _cpu_seconds(platform), time.perf_counter()
    try:
        for number, q in enumerate(questions):
            rid = uuid.uuid4().hex
            before = len(fake.requests_to("/chat/completions"))
            t = time.perf_counter()
            response = client.post(
                "/retrieve", json={"query": q["question"], "project_id": project, "retrieval_id": rid}
            )
            done = time.perf_counter()
            response.raise_for_status()
            body = response.json()
            assert body["mode"] == "llm", body
            served = len(fake.requests_to("/chat/completions")) - before
            assert served == body["usage"]["llm_calls"], (served, body["usage"])
            time.sleep(0.05)  # the last events are still on their way; nothing else runs meanwhile
            rounds = 3 + body["stats"]["depth"]
            wall = (done - t) * 1000
            per_query.append(
                {
                    "query_number": number,
                    "wall_ms": wall,
                    "took_ms": body["took_ms"],
                    "rounds": rounds,
                    "first_event_ms": (listener.first[rid] - t) * 1000 if rid in listener.first else None,
                    "usage": body["usage"],
                    "stats": body["stats"],
                    "timings_ms": body["timings_ms"],
                    "overhead_parts_ms": _overhead_parts(t, done, log.take()),
                }
            )
        cpu = _cpu_use(cpu_before, _cpu_seconds(platform), time.perf_counter() - clock_before, len(per_query))
    finally:
        listener.close()
    return {**_llm_figures(per_query), "cpu": cpu}


def _cpu_seconds(platform: PlatformRun) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each role of the platform, and by this process
    (the bench client, its Redis listener and the fake LLM server)."""
    used: dict[str, float] = {}
    for proc in psutil.Process(platform.proc.pid).children(recursive=True):
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        role = _role(proc) or "other"
        used[role] = used.get(role, 0.0) + times.user + times.system
    own = psutil.Process().cpu_times()
    used["bench process (client + fake LLM)"] = own.user + own.system
    return used


def _cpu_use(
    before: dict[str, float], after: dict[str, float], elapsed: float, queries: int
) -> dict[str, Any]:
    per_query = {role: round(1000 * (after[role] - before.get(role, 0.0)) / queries, 1) for role in after}
    total = sum(after[role] - before.get(role, 0.0) for role in after)
    return {
        "cpu_ms_per_query": per_query,
        "cores_busy_mean": round(total / elapsed, 2),
        "cores": psutil.cpu_count(),
        "note": "CPU time of each process role over the timed queries (with the 50 ms pauses between them)",
    }


def _overhead_parts(start: float, end: float, calls: list[tuple[float, str]]) -> dict[str, float] | None:
    """Where the platform's own time goes, from when each LLM request reached the server: the gaps
    between one round's last request being answered (arrival + 300 ms) and the next round's first
    request, and the spread of a round's concurrent requests. They add up to wall − rounds × 300 ms."""
    delay = LLM_DELAY_SEC
    order = ["HyDE", "primer", "round 1", "round 2", "aggregator"]
    rounds = [(k, [a for a, kind in calls if kind == k]) for k in order]
    rounds = [(k, arrivals) for k, arrivals in rounds if arrivals]
    if [k for k, _ in rounds][:2] != ["HyDE", "primer"] or rounds[-1][0] != "aggregator":
        return None
    parts = {f"request -> {rounds[0][0]} call": rounds[0][1][0] - start}
    for (prev, prev_at), (name, at) in zip(rounds, rounds[1:], strict=False):
        if len(prev_at) > 1:
            parts[f"{prev} calls spread"] = prev_at[-1] - prev_at[0]
        parts[f"{prev} answered -> {name} call"] = at[0] - (prev_at[-1] + delay)
    parts[f"{rounds[-1][0]} answered -> response"] = end - (rounds[-1][1][-1] + delay)
    return {name: round(seconds * 1000, 1) for name, seconds in parts.items()}


def _spread(values: list[float]) -> dict[str, float]:
    return {**_stats(values), "mean": round(sum(values) / len(values), 1)}


def _llm_figures(per_query: list[dict[str, Any]]) -> dict[str, Any]:
    def col(key: str) -> list[float]:
        return [float(p[key]) for p in per_query if p[key] is not None]

    usage = {k: [float(p["usage"][k]) for p in per_query] for k in per_query[0]["usage"]}
    rounds = col("rounds")
    floors = [r * LLM_DELAY_SEC * 1000 for r in rounds]
    walls = col("wall_ms")
    overheads = [w - f for w, f in zip(walls, floors, strict=True)]
    ratios = [w / f for w, f in zip(walls, floors, strict=True)]
    firsts = col("first_event_ms")
    # the named phases of timings_ms; the follow-up rounds are the rest of took_ms (their retrieval
    # and answers; the follow-ups' question embeddings are counted under "embedding")
    timing_keys = sorted({k for p in per_query for k in p["timings_ms"]})
    timings = {k: [p["timings_ms"].get(k, 0.0) for p in per_query] for k in timing_keys}
    timings["follow-up rounds (took_ms - the above)"] = [
        p["took_ms"] - sum(p["timings_ms"].values()) for p in per_query
    ]
    timings["took_ms (inside drift_search)"] = col("took_ms")
    timings["outside drift_search (HTTP, auth, DRF; wall - took_ms)"] = [
        p["wall_ms"] - p["took_ms"] for p in per_query
    ]
    parts_seen = [p["overhead_parts_ms"] for p in per_query if p["overhead_parts_ms"]]
    part_names = list(dict.fromkeys(k for parts in parts_seen for k in parts))
    stats_keys = sorted({k for p in per_query for k in p["stats"]})
    return {
        "queries": len(per_query),
        "llm_calls": _spread(usage["llm_calls"]),
        "prompt_tokens": _spread(usage["prompt_tokens"]),
        "completion_tokens": _spread(usage["completion_tokens"]),
        "sequential_rounds": _spread(rounds),
        "wall_ms": _spread(walls),
        "wall_over_rounds_x_300ms": {
            k: round(v / 1000, 3) for k, v in _stats([r * 1000 for r in ratios]).items()
        }
        | {"share_within_1_3_pct": round(100 * sum(r <= 1.3 for r in ratios) / len(ratios), 1)},
        "first_event_ms": _spread(firsts) if firsts else None,
        "first_events_seen": len(firsts),
        "overhead_ms": _spread(overheads),
        "overhead_parts_ms": {n: _spread([p[n] for p in parts_seen if n in p]) for n in part_names},
        "overhead_parts_queries": len(parts_seen),
        "timings_ms": {k: _spread(v) for k, v in timings.items()},
        "stats": {k: _spread([float(p["stats"].get(k, 0)) for p in per_query]) for k in stats_keys},
        "slowest_queries": _slowest(per_query, ratios),
    }


def _slowest(per_query: list[dict[str, Any]], ratios: list[float], n: int = 3) -> list[dict[str, Any]]:
    """The queries of the worst wall/floor ratio with their breakdown, to tell an outlier from a trend."""
    worst = sorted(range(len(per_query)), key=lambda i: ratios[i], reverse=True)[:n]
    return [
        {
            "query_number": per_query[i]["query_number"],
            "ratio": round(ratios[i], 3),
            "wall_ms": round(per_query[i]["wall_ms"], 1),
            "timings_ms": per_query[i]["timings_ms"],
            "overhead_parts_ms": per_query[i]["overhead_parts_ms"],
        }
        for i in worst
    ]


def _targets(f: dict[str, Any]) -> dict[str, dict[str, Any]]:
    llm = f["llm"]
    ratio = llm["wall_over_rounds_x_300ms"]
    first = llm["first_event_ms"] or {"max": float("inf"), "p95": float("inf")}
    checks = {
        "llm_calls_per_query <= 22 (every query)": (llm["llm_calls"]["max"], 22),
        "wall <= 1.3 x rounds x 300 ms (every query: max ratio)": (ratio["max"], 1.3),
        "wall <= 1.3 x rounds x 300 ms (p95 ratio)": (ratio["p95"], 1.3),
        "first progress event <= 100 ms (every query: max)": (first["max"], 100),
        "first progress event <= 100 ms (p95)": (first["p95"], 100),
        "overhead p95 <= 400 ms": (llm["overhead_ms"]["p95"], 400),
    }
    return {
        name: {"value": value, "target": limit, "met": value <= limit}
        for name, (value, limit) in checks.items()
    }


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    llm, ex, peer = f["llm"], f["extractive"], f["graphrag_defaults"]
    # not run here: computed from GraphRAG's published DRIFT configuration defaults
    source = "computed from GraphRAG's published DRIFT defaults, not run"
    ratio = llm["wall_over_rounds_x_300ms"]
    first = llm["first_event_ms"] or {"p50": None, "p95": None, "max": None}
    over = llm["overhead_ms"]
    return [
        row(
            "LLM calls per query, max",
            llm["llm_calls"]["max"],
            "calls",
            published=("GraphRAG DRIFT", peer["llm_calls"], source),
            target=("<=", 22),
        ),
        row(
            "sequential LLM rounds per query, max",
            llm["sequential_rounds"]["max"],
            "rounds",
            published=("GraphRAG DRIFT", peer["sequential_rounds"], source),
        ),
        row(
            "wall time p50 / p95 at 300 ms per LLM call",
            [llm["wall_ms"]["p50"], llm["wall_ms"]["p95"]],
            "ms",
            published=("GraphRAG DRIFT: its rounds x 300 ms", peer["wall_floor_ms"], source),
        ),
        row(
            "wall / (rounds x 300 ms), p50 / p95 / max",
            [ratio["p50"], ratio["p95"], ratio["max"]],
            "x",
            target=("<=", 1.3),  # on the max: every query
        ),
        row(
            "first progress event p50 / p95 / max",
            [first["p50"], first["p95"], first["max"]],
            "ms",
            target=("<=", 100),  # on the max: every query
        ),
        row(
            "platform overhead p50 / p95 / max",
            [over["p50"], over["p95"], over["max"]],
            "ms",
            target=("<=", 400),
            target_component=1,  # the p95
        ),
        row(
            "prompt / completion tokens per query, mean ("
            + (
                f"tiktoken {llm['token_encoding']}"
                if "token_encoding" in llm
                else "the fake server's whitespace word counts, not tokens: a run before issue 29"
            )
            + ")",
            [round(llm["prompt_tokens"]["mean"]), round(llm["completion_tokens"]["mean"])],
            "tokens",
        ),
        row(
            "extractive DRIFT answer recall (100 questions)",
            ex["answer_recall_pct"],
            "%",
            context=("hybrid top-5 answer-in-context", ex["hybrid_top5_answer_in_context_pct"]),
            target=(">=", 40),  # issue 38
        ),
        row(
            "extractive DRIFT wall time p50 / p95",
            [ex["wall_ms"]["p50"], ex["wall_ms"]["p95"]],
            "ms",
            context=("hybrid search p50 / p95", [ex["hybrid_wall_ms"]["p50"], ex["hybrid_wall_ms"]["p95"]]),
        ),
    ]


NOTES = [
    "The LLM is a local OpenAI-compatible HTTP server (tests/support/openai_server.py) in the bench "
    "process that answers every chat request after exactly 300 ms, with JSON shaped as the prompts ask: "
    "the primer proposes DRIFT_MAX_FOLLOWUPS (5) follow-ups aimed at listed communities, each depth-1 answer "
    "cites 2 listed chunk ids and proposes 1 new follow-up with should_continue true (so a second round "
    "runs), depth-2 answers propose none, the aggregator cites ids from its list. The platform is "
    "configured with its default LLM_MODEL (gpt-4o-mini) and the server reports usage counted with "
    "tiktoken: the content tokens of every message, without OpenAI's per-message framing, in "
    "cl100k_base (gpt-4o-mini's o200k_base is not available offline; the row names the encoding). "
    "Embeddings are the platform's local model (not the fake server). The server "
    "sets TCP_NODELAY: without it, its two writes per answer (headers, body) stalled some answers by a "
    "delayed ACK (~40 ms, every aggregator call), which earlier runs counted as platform overhead.",
    "Corpus ingested and clustered without an LLM (extractive); the same VAR_DIR is then restarted with "
    "the LLM environment for the timed run. 200 warm-up queries about corpus titles (not among the 100; "
    "they run every step; the fake model answers them without its 300 ms wait) before timing: Neo4j plans "
    "each query shape, then plans it again with compiled expressions after ~10 runs, and its JVM compiles "
    "the hot paths over thousands of queries (a trivial read: 3.6 ms after a few hundred reads of a fresh "
    "platform, 0.7 ms after ~15,000; with 20 warm-up queries the timed ones ran on a half-warm server); "
    "the 100 questions run one after the other, no knobs in the request (platform defaults).",
    "sequential LLM rounds = 3 + stats.depth (HyDE, primer, one per follow-up round, aggregation); each "
    "round waits at least 300 ms on the model, so overhead = wall - rounds x 300 ms is the platform's own "
    "time (plus HTTP to the model and JSON handling).",
    "overhead_parts_ms splits that overhead using the arrival time of each LLM request at the server: "
    "'X answered -> Y call' is from X's last request + 300 ms to Y's first request; 'X calls spread' is "
    "how far apart a round's concurrent requests arrived. The parts add up to the overhead.",
    "first_event_ms: the bench subscribes to the platform Redis channel ui:retrieval_progress before "
    "sending, passes its own retrieval_id, and times the request's send to the first event with that id.",
    "The GraphRAG figures are computed from its published DRIFT defaults (graphrag/config/defaults.py: "
    "primer folds 5, drift_k_followups 20, n_depth 3, concurrency 32), not run: 1 query expansion + 5 "
    "primer folds + 20 x 3 local searches + 1 reduce = 67 calls; folds and each depth's 20 follow-ups "
    "fit in one concurrent round, so 6 sequential rounds, floor 1.8 s at 300 ms per call.",
    "Extractive answer recall: the gold answer (case-insensitive) in final_answer or any key fact. Peer: "
    "the same check on the concatenated text of the top-5 hybrid search items (answer in context).",
]


def _wrap_up(figures: dict[str, Any]) -> dict[str, Any]:
    figures["targets"] = _targets(figures)
    figures["notes"] = NOTES
    return {"rows": _rows(figures), "figures": figures}
