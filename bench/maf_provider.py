"""Agent Framework provider: the overhead `KnowledgeContextProvider` adds around the platform's calls.

`make run`'s platform (sample corpus in the demo project) serves a real MAF `Agent` whose chat model
is the sample's local OpenAI-compatible server. For 200 runs we read the provider's own clock:
`before_run` time minus the platform's `took_ms` is the overhead of the provider, the HTTP client and
the platform's HTTP path (routing, auth, JSON). With memory on, the provider asks for both searches in
one request (`POST …/search:with-memory`), whose `took_ms` covers both. The peer
makes the same requests with a bare `httpx.AsyncClient` in the same run, so its wall minus `took_ms`
is the floor any HTTP client pays. Then `after_run`: storing a 2-message turn, next to the same store
posted with bare httpx.

(The module is not called agent_framework: `python bench/run.py` puts bench/ on sys.path, where such
a name would shadow the Agent Framework package.)
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.rows import row
from bench.startup import REPO, PlatformRun

RUNS = 200
WARMUP = 10
QUESTIONS = [
    "How are communities built from entities?",
    "What does hybrid search combine?",
    "How is a document split into chunks?",
    "Which events does ingestion report?",
    "What does the DRIFT search do first?",
]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 2)


def _spread(values: list[float]) -> dict[str, float]:
    return {"p50": _pct(values, 0.5), "p95": _pct(values, 0.95), "max": round(max(values), 2)}


def _side_figures(totals: list[float], overheads: list[float], stores: list[float]) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "before_run_ms": _spread(totals),
        "overhead_ms": _spread(overheads),
        "runs": len(totals),
    }
    if stores:
        figures["after_run_store_2_messages_ms"] = _spread(stores)
    return figures


def _wait_corpus(base: str, project: str, key: str, timeout: float = 300) -> int:
    headers = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        docs = httpx.get(f"{base}/api/v1/projects/{project}/documents?limit=500", headers=headers, timeout=30)
        items = docs.json()["items"]
        if items and all(d["status"] in ("ready", "failed") for d in items):
            return len(items)
        time.sleep(1)
    raise RuntimeError("the sample corpus was never ingested")


async def _provider_side(base: str, project: str, key: str) -> dict[str, Any]:
    from agent_framework import Agent
    from agent_framework.openai import OpenAIChatCompletionClient
    from agent_framework_knowledge import KnowledgeContextProvider
    from knowledge_platform_client import PlatformSettings

    sys.path.insert(0, str(REPO / "clients" / "agent-framework" / "samples"))
    from local_chat_model import LocalChatModel

    model = LocalChatModel()
    chat = OpenAIChatCompletionClient(model="local", api_key="offline", base_url=model.base_url)
    settings = PlatformSettings(url=base, api_key=key, project_id=project)
    out: dict[str, Any] = {}
    try:
        for name, config in (
            ("knowledge", {}),
            ("knowledge+memory", {"memory_enabled": True, "user_id": "bench-user"}),
        ):
            provider = KnowledgeContextProvider(settings=settings, top_k=5, **config)
            overheads: list[float] = []
            totals: list[float] = []
            stores: list[float] = []
            async with provider:
                agent = Agent(client=chat, instructions="Answer.", context_providers=[provider])
                for i in range(WARMUP + RUNS):
                    await agent.run(QUESTIONS[i % len(QUESTIONS)], session=agent.create_session())
                    t = provider.timings
                    if i < WARMUP or t.before_run_ms is None or t.platform_took_ms is None:
                        continue
                    totals.append(t.before_run_ms)
                    overheads.append(t.before_run_ms - t.platform_took_ms)
                    if t.after_run_ms is not None and config:
                        stores.append(t.after_run_ms)
            out[name] = _side_figures(totals, overheads, stores)
    finally:
        model.close()
    return out


async def _bare_side(base: str, project: str, key: str) -> dict[str, Any]:
    """The same requests with a bare httpx client: search (with memory on, search and memory search in
    one request), then the 2-message store, exactly as the provider sends them."""
    headers = {"Authorization": f"Bearer {key}"}
    search_path = f"/api/v1/projects/{project}/search"
    memory_path = f"/api/v1/projects/{project}/memories"
    scope = {"user_id": "bench-bare"}
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        for name, with_memory in (("knowledge", False), ("knowledge+memory", True)):
            overheads: list[float] = []
            totals: list[float] = []
            stores: list[float] = []
            for i in range(WARMUP + RUNS):
                question = QUESTIONS[i % len(QUESTIONS)]
                started = time.perf_counter()
                body: dict[str, Any] = {"query": question, "mode": "hybrid", "top_k": 5}
                if with_memory:  # both searches in one request, as the provider sends them
                    body["memory"] = {"scope": scope, "top_k": 5, "depth": "messages"}
                    answer = await client.post(f"{search_path}:with-memory", json=body)
                else:
                    answer = await client.post(search_path, json=body)
                answer.raise_for_status()
                wall = (time.perf_counter() - started) * 1000
                took = float(answer.json()["took_ms"])
                if with_memory:
                    started = time.perf_counter()
                    messages = [{"role": "user", "text": question}, {"role": "assistant", "text": "Answer."}]
                    stored = await client.post(memory_path, json={"messages": messages, "scope": scope})
                    stored.raise_for_status()
                    store_ms = (time.perf_counter() - started) * 1000
                if i < WARMUP:
                    continue
                totals.append(wall)
                overheads.append(wall - took)
                if with_memory:
                    stores.append(store_ms)
            out[name] = _side_figures(totals, overheads, stores)
    return out


@contextmanager
def demo_platform(prefix: str) -> Iterator[tuple[str, str, str, int]]:
    """`make run`'s platform in a temporary directory, once its sample corpus is ingested: (base URL,
    demo project, demo key, documents). Memory processing is off so the worker does not compete for
    the 2 cores, and the throttle is lifted."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        platform = PlatformRun(
            tmp / "platform",
            DEMO_BOOTSTRAP="true",
            API_THROTTLE_RATE="1000000/min",
            MEMORY_PROCESS_ON_STORE="false",
        )
        try:
            platform.wait_healthy()
            time.sleep(1)
            project, key = platform.value("demo project"), platform.value("demo API key")
            yield platform.base, project, key, _wait_corpus(platform.base, project, key)
        finally:
            platform.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run() -> dict[str, Any]:
    import agent_framework

    started = time.perf_counter()
    figures: dict[str, Any] = {"agent_framework_version": agent_framework.__version__}
    with demo_platform("kp-bench-maf-") as (base, project, key, documents):
        figures["documents"] = documents
        # interleave the two sides twice so neither gets the quieter half of the run
        provider_runs, bare_runs = [], []
        for _ in range(2):
            bare_runs.append(asyncio.run(_bare_side(base, project, key)))
            provider_runs.append(asyncio.run(_provider_side(base, project, key)))
        figures["provider"] = provider_runs[-1]
        figures["bare_httpx"] = bare_runs[-1]
        figures["first_pass"] = {"provider": provider_runs[0], "bare_httpx": bare_runs[0]}
    print(f"  provider: {figures['provider']}\n  bare httpx: {figures['bare_httpx']}", flush=True)
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    figures["notes"] = (
        f"{RUNS} agent runs per configuration after {WARMUP} warm-up runs, each in a new MAF session; "
        "knowledge = hybrid search top 5 of the sample corpus; knowledge+memory adds the user's memory "
        "search in the same request (POST search:with-memory) and stores each 2-message turn. Overhead = "
        "before_run time - the platform's took_ms, so it includes the platform's HTTP path. Memory "
        "processing (facts, summaries) is off so the worker does not compete for the 2 cores. The second "
        "of two interleaved passes is reported; the first is in first_pass. Target: overhead p95 <= 12 ms "
        "(issue 33; issue 7 asked <= 15 ms)."
    )
    return {"rows": _rows(figures), "figures": figures}


# issue 33: "MAF before_run p95 stays <= 12 ms" (the overhead; issue 7 asked <= 15 ms)
TARGET_MS = 12.0


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    def pair(side: str, config: str, key: str) -> list[float]:
        spread = f[side][config][key]
        return [spread["p50"], spread["p95"]]

    peer = "bare httpx.AsyncClient, same requests"
    figures = [
        ("before_run overhead p50 / p95, knowledge search", "knowledge", "overhead_ms", TARGET_MS),
        (
            "before_run overhead p50 / p95, knowledge + memory search",
            "knowledge+memory",
            "overhead_ms",
            TARGET_MS,
        ),
        ("before_run total p50 / p95, knowledge + memory", "knowledge+memory", "before_run_ms", None),
        (
            "after_run store of a 2-message turn p50 / p95",
            "knowledge+memory",
            "after_run_store_2_messages_ms",
            None,
        ),
    ]
    return [
        row(
            label,
            pair("provider", config, key),
            "ms",
            peer=(peer, pair("bare_httpx", config, key)),
            target=("<=", target) if target is not None else None,  # on the p95
        )
        for label, config, key, target in figures
    ]
