"""Sessions graph: append-event throughput, get_session (last 20 of 10,000 events) and list_sessions
(a user with 10,000 sessions), through the ADK adapter (`adk_knowledge.PlatformSessionService` over
the platform's REST API), next to Google ADK's own `DatabaseSessionService` on SQLite doing the same
through the same ADK interface in the same run.

Everything on the platform side is written through the API (no direct inserts), so the data is what
the platform itself makes. Latencies are client-side: the platform's include HTTP on loopback and the
adapter's conversion to ADK objects; ADK's are in-process calls.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.rows import row
from bench.startup import PlatformRun

BIG_EVENTS = 10_000
MANY_SESSIONS = 10_000
SEQUENTIAL_APPENDS = 500
CONCURRENT_SESSIONS, APPENDS_EACH = 50, 20
GET_REPEATS, LIST_REPEATS = 200, 20
ADK_LIST_REPEATS = 3


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 2)


def _event(i: int, author: str = "user") -> dict[str, Any]:
    return {
        "author": author,
        "invocation_id": f"inv-{i // 4}",
        "content": {
            "role": "user" if author == "user" else "model",
            "parts": [{"text": f"message {i} " + "x" * 80}],
        },
        "actions": {"state_delta": {"turn": i, "temp:scratch": i}},
    }


class _Api:
    def __init__(self, platform: PlatformRun, key: str, project: str) -> None:
        self.base = f"/api/v1/projects/{project}/apps/bench/users"
        self.client = httpx.Client(
            base_url=platform.base, headers={"Authorization": f"Bearer {key}"}, timeout=120
        )

    def create(self, user: str, session_id: str | None = None) -> dict[str, Any]:
        body = {"session_id": session_id} if session_id else {}
        response = self.client.post(f"{self.base}/{user}/sessions", json=body)
        response.raise_for_status()
        return response.json()

    def append(self, user: str, sid: str, event: dict[str, Any], expected: int | None = None) -> int:
        body: dict[str, Any] = {"event": event}
        if expected is not None:
            body["expected_last_update_time"] = expected
        response = self.client.post(f"{self.base}/{user}/sessions/{sid}/events", json=body)
        response.raise_for_status()
        return int(response.json()["last_update_time"])


def _platform_side(platform: PlatformRun, key: str, project: str) -> dict[str, Any]:
    """Setup (10,000 events, 10,000 sessions) goes through the REST API from 4 threads; every
    measured call goes through the ADK adapter (`adk_knowledge.PlatformSessionService`), as an agent
    would make it."""
    api = _Api(platform, key, project)
    out: dict[str, Any] = {}

    # a session of 10,000 events (4 writers; the session lock keeps one linear chain)
    big = api.create("big")["id"]
    started = time.perf_counter()

    def fill(part: int) -> None:
        local = _Api(platform, key, project)
        for i in range(part, BIG_EVENTS, 4):
            local.append("big", big, _event(i, "user" if i % 2 == 0 else "agent"))
        local.client.close()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(fill, range(4)))
    out["fill_10000_events_s"] = round(time.perf_counter() - started, 1)

    # a user with 10,000 sessions
    started = time.perf_counter()

    def make(part: int) -> None:
        local = _Api(platform, key, project)
        for i in range(part, MANY_SESSIONS, 4):
            local.create("many", f"s{i:05d}")
        local.client.close()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(make, range(4)))
    out["fill_10000_sessions_s"] = round(time.perf_counter() - started, 1)
    first = []
    for _ in range(LIST_REPEATS):
        t = time.perf_counter()
        page = api.client.get(f"{api.base}/many/sessions", params={"limit": 100}).json()
        first.append((time.perf_counter() - t) * 1000)
        assert len(page["sessions"]) == 100
    out["list_first_100_ms"] = {"p50": _pct(first, 0.5), "p95": _pct(first, 0.95)}
    api.client.close()
    out.update(asyncio.run(_platform_adk_calls(platform, key, project, big)))
    return out


async def _platform_adk_calls(platform: PlatformRun, key: str, project: str, big: str) -> dict[str, Any]:
    from adk_knowledge import PlatformSessionService
    from google.adk.sessions.base_session_service import GetSessionConfig
    from knowledge_platform_client import PlatformSettings

    settings = PlatformSettings(url=platform.base, api_key=key, project_id=project, timeout=120)
    out: dict[str, Any] = {}
    async with PlatformSessionService(settings=settings) as service:
        warm = await service.create_session(app_name="bench", user_id="warm")
        for i in range(20):
            await service.append_event(warm, _adk_event(i))

        # one session, sequential appends; each carries the optimistic check (the session's revision)
        session = await service.create_session(app_name="bench", user_id="seq")
        started = time.perf_counter()
        for i in range(SEQUENTIAL_APPENDS):
            await service.append_event(session, _adk_event(i))
        out["append_one_session_events_per_s"] = round(
            SEQUENTIAL_APPENDS / (time.perf_counter() - started), 1
        )

        sessions = [
            await service.create_session(app_name="bench", user_id="conc") for _ in range(CONCURRENT_SESSIONS)
        ]

        async def worker(s: Any) -> None:
            for i in range(APPENDS_EACH):
                await service.append_event(s, _adk_event(i))

        started = time.perf_counter()
        await asyncio.gather(*(worker(s) for s in sessions))
        out["append_50_sessions_events_per_s"] = round(
            CONCURRENT_SESSIONS * APPENDS_EACH / (time.perf_counter() - started), 1
        )

        times = []
        for _ in range(GET_REPEATS):
            t = time.perf_counter()
            got = await service.get_session(
                app_name="bench", user_id="big", session_id=big, config=GetSessionConfig(num_recent_events=20)
            )
            times.append((time.perf_counter() - t) * 1000)
            assert got is not None and len(got.events) == 20
        out["get_last_20_of_10000_ms"] = {"p50": _pct(times, 0.5), "p95": _pct(times, 0.95)}

        full = []
        for _ in range(LIST_REPEATS):
            t = time.perf_counter()
            listed = await service.list_sessions(app_name="bench", user_id="many")
            full.append((time.perf_counter() - t) * 1000)
            assert len(listed.sessions) == MANY_SESSIONS
        out["list_all_10000_ms"] = {"p50": _pct(full, 0.5), "p95": _pct(full, 0.95)}
    return out


def _adk_event(i: int, author: str = "user") -> Any:
    from google.adk.events import Event, EventActions
    from google.genai import types

    return Event(
        author=author,
        invocation_id=f"inv-{i // 4}",
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=f"message {i} " + "x" * 80)]
        ),
        actions=EventActions(state_delta={"turn": i, "temp:scratch": i}),
    )


async def _adk_side(db: Path) -> dict[str, Any]:
    from google.adk.sessions import DatabaseSessionService
    from google.adk.sessions.base_session_service import GetSessionConfig

    service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{db}")
    out: dict[str, Any] = {}
    warm = await service.create_session(app_name="bench", user_id="warm")
    for i in range(20):
        await service.append_event(warm, _adk_event(i))

    session = await service.create_session(app_name="bench", user_id="seq")
    started = time.perf_counter()
    for i in range(SEQUENTIAL_APPENDS):
        await service.append_event(session, _adk_event(i))
    out["append_one_session_events_per_s"] = round(SEQUENTIAL_APPENDS / (time.perf_counter() - started), 1)

    sessions = [
        await service.create_session(app_name="bench", user_id="conc") for _ in range(CONCURRENT_SESSIONS)
    ]

    async def worker(s: Any) -> None:
        for i in range(APPENDS_EACH):
            await service.append_event(s, _adk_event(i))

    started = time.perf_counter()
    await asyncio.gather(*(worker(s) for s in sessions))
    out["append_50_sessions_events_per_s"] = round(
        CONCURRENT_SESSIONS * APPENDS_EACH / (time.perf_counter() - started), 1
    )

    big = await service.create_session(app_name="bench", user_id="big")
    started = time.perf_counter()
    for i in range(BIG_EVENTS):
        await service.append_event(big, _adk_event(i, "user" if i % 2 == 0 else "agent"))
    out["fill_10000_events_s"] = round(time.perf_counter() - started, 1)
    times = []
    for _ in range(GET_REPEATS // 4):
        t = time.perf_counter()
        got = await service.get_session(
            app_name="bench", user_id="big", session_id=big.id, config=GetSessionConfig(num_recent_events=20)
        )
        times.append((time.perf_counter() - t) * 1000)
        assert got is not None and len(got.events) == 20
    out["get_last_20_of_10000_ms"] = {"p50": _pct(times, 0.5), "p95": _pct(times, 0.95)}

    started = time.perf_counter()
    for i in range(MANY_SESSIONS):
        await service.create_session(app_name="bench", user_id="many", session_id=f"s{i:05d}")
    out["fill_10000_sessions_s"] = round(time.perf_counter() - started, 1)
    full = []
    for _ in range(ADK_LIST_REPEATS):
        t = time.perf_counter()
        listed = await service.list_sessions(app_name="bench", user_id="many")
        full.append((time.perf_counter() - t) * 1000)
        assert len(listed.sessions) == MANY_SESSIONS
    out["list_all_10000_ms"] = {"p50": _pct(full, 0.5), "p95": _pct(full, 0.95)}
    return out


def run() -> dict[str, Any]:
    import google.adk

    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-sessions-"))
    figures: dict[str, Any] = {"adk_version": google.adk.__version__}
    try:
        platform = PlatformRun(
            tmp / "platform",
            COMMUNITY_REBUILD_DELAY_SEC="-1",
            DEMO_BOOTSTRAP="true",
            API_THROTTLE_RATE="1000000/min",
            MEMORY_PROCESS_ON_STORE="false",
        )
        try:
            platform.wait_healthy()
            time.sleep(2)
            figures["platform"] = _platform_side(
                platform, platform.value("demo API key"), platform.value("demo project")
            )
        finally:
            platform.stop()
        print(f"  platform: {figures['platform']}", flush=True)
        figures["adk"] = asyncio.run(_adk_side(tmp / "adk.db"))
        print(f"  adk: {figures['adk']}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    figures["notes"] = (
        "Platform: adk_knowledge.PlatformSessionService (ADK 2.x BaseSessionService) over the REST API on "
        "loopback HTTP (daphne, one process), the embedded Neo4j (its line is in machine); every append "
        "carries the optimistic check; the per-key rate limit is lifted for the run. ADK: "
        "DatabaseSessionService with sqlite+aiosqlite, in-process calls. list_sessions on the platform "
        "reads all 10,000 through the "
        "API's largest page (limit 10,000); ADK returns them in one call. "
        "Targets (issue 8): get last 20 of 10,000 p95 "
        "<= 50 ms, list 10,000 p95 <= 500 ms."
    )
    return {"rows": _rows(figures), "figures": figures}


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    p, a = f["platform"], f["adk"]
    peer = f"ADK {f['adk_version']} DatabaseSessionService (SQLite)"
    return [
        row(
            "append events, one session (sequential, optimistic check)",
            p["append_one_session_events_per_s"],
            "ev/s",
            peer=(peer, a["append_one_session_events_per_s"]),
        ),
        row(
            "append events, 50 sessions concurrently",
            p["append_50_sessions_events_per_s"],
            "ev/s",
            peer=(peer, a["append_50_sessions_events_per_s"]),
        ),
        row(
            "get_session last 20 of 10,000 events p95",
            p["get_last_20_of_10000_ms"]["p95"],
            "ms",
            peer=(peer, a["get_last_20_of_10000_ms"]["p95"]),
            target=("<=", 50),
        ),
        row(
            "list_sessions all 10,000 of a user p95",
            p["list_all_10000_ms"]["p95"],
            "ms",
            peer=(peer, a["list_all_10000_ms"]["p95"]),
            target=("<=", 500),
        ),
        row(
            "list_sessions first page (100 of 10,000) p95, REST",
            p["list_first_100_ms"]["p95"],
            "ms",
            peer=(peer + ", which cannot page: all 10,000", a["list_all_10000_ms"]["p95"]),
        ),
    ]
