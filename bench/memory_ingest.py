"""Storing a long-conversation corpus through the API with server-side embeddings (issue 34, item 4).

10,000 turns of locomo-dev (its five conversations again under new users until 10,000), one request
per session, the speaker as `author_name` and the session's date as the time, the local embedder, the
default processing job per store. Two ways, each into its own project of one platform:
- embedding in the request (the default): the store answers 201 once the lines are embedded;
- `embed_in_worker`: the store answers 202 at once and the worker's processing job embeds the lines.
For each: how fast the API answered every store, and how fast everything was done (every processing
job succeeded: embeddings, facts, preferences, mentions, summaries). With `embed_in_worker`, also how
fast every message was embedded (the issue's target: "finish embedding at >= 300 messages/s"): from
the first store to the last embedding written, read from the jobs (start + `embed_sec` of each job
that embedded something; a job also embeds the stores queued behind it, memory/embedding.py). The
floor is the platform's local embedder embedding the same 10,000 turns alone as the platform does (one
line per sentence of a turn of several: memory.vectors), in this process, with nothing else running;
the same embedder on whole lines, and sentence-transformers on PyTorch, beside it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import django_setup
from bench.baselines import encoder
from bench.conversations import _Client
from bench.locomo import conversations, session_messages
from bench.memory import _platform
from bench.rows import row
from core.embeddings.local import cores, onnx_encoder
from memory import text as message_text

TURNS = 10_000
TARGET = 300.0  # messages/s, issue 34: "finish embedding at >= 300 messages/s on this machine"


def _requests() -> list[tuple[dict[str, str], list[dict[str, Any]]]]:
    """(scope, messages) per session, over the conversations again and again until TURNS turns."""
    convs = conversations()
    out: list[tuple[dict[str, str], list[dict[str, Any]]]] = []
    left, copy = TURNS, 0
    while left > 0:
        for conv in convs:
            for key, stamp, turns in conv["sessions"]:
                taken = turns[:left]
                if not taken:
                    return out
                messages = session_messages(conv, stamp, taken)
                out.append(({"user_id": f"{conv['id']}-{copy}", "thread_id": key}, messages))
                left -= len(taken)
        copy += 1
    return out


def _store_all(client: _Client, requests: list[Any], *, in_worker: bool) -> dict[str, float]:
    started, wall = time.perf_counter(), time.time()
    jobs = []
    for scope, messages in requests:
        body = {"messages": messages, "scope": scope, "embed_in_worker": in_worker}
        stored = client.call("POST", "memories", body)
        assert stored["embedding_pending"] is in_worker, stored
        jobs.append(stored["job_id"])
    answered = time.perf_counter() - started
    for job_id in jobs:
        client.wait(job_id, poll=0.2)
    done = time.perf_counter() - started
    out = {
        "api_msg_s": round(TURNS / answered, 1),
        "done_msg_s": round(TURNS / done, 1),
        "answered_s": round(answered, 1),
        "done_s": round(done, 1),
    }
    if in_worker:
        embedded = _embedded_at(client, jobs) - wall
        out |= {"embedded_msg_s": round(TURNS / embedded, 1), "embedded_s": round(embedded, 1)}
    return out


def _embedded_at(client: _Client, job_ids: list[str]) -> float:
    """When the last message got its embedding (the server's clock, this machine's): the latest
    start + `embed_sec` of the jobs that embedded something. They must have embedded every turn."""
    last, total = 0.0, 0
    for job_id in job_ids:
        job = client.http.get(f"/api/v1/jobs/{job_id}").json()
        if job["counts"].get("embedded"):
            total += job["counts"]["embedded"]
            started = datetime.fromisoformat(job["started_at"]).timestamp()
            last = max(last, started + job["timings"]["embed_sec"])
    if total != TURNS:
        raise RuntimeError(f"the jobs embedded {total} messages, not {TURNS}")
    return last


def _embedding_alone(requests: list[Any]) -> dict[str, float]:
    """The same turns embedded in this process with nothing else running, on every core, as messages
    per second: by the platform's local embedder (ONNX Runtime) as the platform embeds them (one line
    per sentence when MEMORY_SENTENCE_VECTORS is on: memory.vectors) and as whole lines, and
    sentence-transformers on PyTorch on the whole lines beside it, each running EMBEDDINGS_LOCAL_BATCH
    texts at a time as the platform does."""
    django_setup()
    from django.conf import settings

    from memory.vectors import pieces

    batch = settings.EMBEDDINGS_LOCAL_BATCH
    messages = [m for _scope, batch_of in requests for m in batch_of]
    lines = [
        message_text.line(
            text=m["text"], role=m["role"], author_name=m["author_name"], timestamp=m["timestamp"]
        )
        for m in messages
    ]
    platform_lines = [line for m in messages for line in pieces(m)]
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kp-bench-onnx-") as models:
        platform = onnx_encoder(Path(models))
        platform.encode(lines[:64], batch_size=batch, threads=cores())  # loaded and warm
        for name, texts in (("onnx", lines), ("onnx_as_stored", platform_lines)):
            started = time.perf_counter()
            platform.encode(texts, batch_size=batch, threads=cores())
            timings[name] = time.perf_counter() - started
    model = encoder()
    model.encode(lines[:64], batch_size=batch, show_progress_bar=False)
    started = time.perf_counter()
    model.encode(lines, batch_size=batch, normalize_embeddings=True, show_progress_bar=False)
    timings["torch"] = time.perf_counter() - started
    out = {name: round(len(messages) / sec, 1) for name, sec in timings.items()}
    out["lines_per_message_as_stored"] = round(len(platform_lines) / len(messages), 2)
    return out


def run() -> dict[str, Any]:
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-ingest-"))
    requests = _requests()
    figures: dict[str, Any] = {"turns": sum(len(m) for _s, m in requests), "requests": len(requests)}
    try:
        with _platform(tmp, "ingest") as (platform, admin):
            for name, in_worker in (("in_request", False), ("in_worker", True)):
                client = _Client(platform, admin)
                figures[name] = _store_all(client, requests, in_worker=in_worker)
                client.http.close()
                print(f"  {name}: {figures[name]}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures["embedding_alone_msg_s"] = _embedding_alone(requests)
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    print(f"  {figures}", flush=True)
    return {"rows": _rows(figures), "figures": figures}


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    alone = f["embedding_alone_msg_s"]
    stored = alone.get("onnx_as_stored", alone["onnx"])
    floor = (
        "the platform's local embedder (ONNX Runtime) alone on the same turns as the platform embeds "
        "them (one line per sentence), in process",
        stored,
    )
    out = [
        row(
            "the local embedder alone on the 10,000 turns as whole lines, in process, every core: "
            "ONNX Runtime",
            alone["onnx"],
            "msg/s",
            peer=("sentence-transformers on PyTorch (the runtime before), same run", alone["torch"]),
        ),
        row(
            "the local embedder alone on the 10,000 turns as the platform embeds them (one line per "
            f"sentence, {alone.get('lines_per_message_as_stored', 1.0)} lines per turn): ONNX Runtime",
            stored,
            "msg/s",
        ),
        row(
            "10,000 locomo-dev turns stored, embed_in_worker (202 at once): every message embedded",
            f["in_worker"]["embedded_msg_s"],
            "msg/s",
            floor=floor,
            target=(">=", TARGET),
        ),
    ]
    for name, label in (
        ("in_worker", "embed_in_worker (202 at once)"),
        ("in_request", "embedded in the request (201)"),
    ):
        got = f[name]
        out.append(
            row(f"10,000 locomo-dev turns stored, {label}: stores answered", got["api_msg_s"], "msg/s")
        )
        out.append(
            row(
                f"10,000 locomo-dev turns stored, {label}: every processing job done (embedded and derived)",
                got["done_msg_s"],
                "msg/s",
                floor=floor,
            )
        )
    return out
