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
import contextlib
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
BURST = 20  # events per append_events call (a turn's events, an import)
CLIENTS, APPENDS_EACH = 8, 100  # concurrent clients, each with its own connection and session
GET_REPEATS, LIST_REPEATS = 200, 20
ADK_LIST_REPEATS = 3
CONTRACT_ROUNDS = 20


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

    def append(self, user: str, sid: str, events: list[dict[str, Any]]) -> int:
        response = self.client.post(f"{self.base}/{user}/sessions/{sid}/events", json={"events": events})
        response.raise_for_status()
        return int(response.json()["revision"])


def _platform_side(platform: PlatformRun, key: str, project: str) -> dict[str, Any]:
    """Setup (10,000 events, 10,000 sessions) goes through the REST API from 4 threads; every
    measured call goes through the ADK adapter (`adk_knowledge.PlatformSessionService`), as an agent
    would make it."""
    api = _Api(platform, key, project)
    out: dict[str, Any] = {}

    # a session of 10,000 events (4 writers of bursts of 100; the session lock keeps one linear chain)
    big = api.create("big")["id"]
    started = time.perf_counter()

    def fill(part: int) -> None:
        local = _Api(platform, key, project)
        for start in range(part * 100, BIG_EVENTS, 400):
            local.append(
                "big", big, [_event(i, "user" if i % 2 == 0 else "agent") for i in range(start, start + 100)]
            )
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
        await service.append_events(warm, [_adk_event(i) for i in range(BURST)])
        out.update(await _append_figures(service, lambda: PlatformSessionService(settings=settings)))
        out["contract_workload_s"] = await _contract_workload(service)

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


async def _append_figures(service: Any, new_client: Any) -> dict[str, Any]:
    """Appends through an ADK session service: one client event by event, one client in bursts of
    BURST (`append_events` where the service has it, else event by event: ADK's services have no burst
    call), and CLIENTS concurrent clients (each its own service, connection and session)."""
    out: dict[str, Any] = {}
    session = await service.create_session(app_name="bench", user_id="seq")
    started = time.perf_counter()
    for i in range(SEQUENTIAL_APPENDS):
        await service.append_event(session, _adk_event(i))
    out["append_one_client_events_per_s"] = round(SEQUENTIAL_APPENDS / (time.perf_counter() - started), 1)

    session = await service.create_session(app_name="bench", user_id="burst")
    started = time.perf_counter()
    for start in range(0, SEQUENTIAL_APPENDS, BURST):
        burst = [_adk_event(i) for i in range(start, start + BURST)]
        if hasattr(service, "append_events"):
            await service.append_events(session, burst)
        else:
            for event in burst:
                await service.append_event(session, event)
    out["append_one_client_bursts_events_per_s"] = round(
        SEQUENTIAL_APPENDS / (time.perf_counter() - started), 1
    )

    clients = [new_client() for _ in range(CLIENTS)] if new_client else [service] * CLIENTS
    sessions = [await c.create_session(app_name="bench", user_id=f"conc-{n}") for n, c in enumerate(clients)]

    async def one_by_one(client: Any, s: Any) -> None:
        for i in range(APPENDS_EACH):
            await client.append_event(s, _adk_event(i))

    async def in_bursts(client: Any, s: Any) -> None:
        for start in range(0, APPENDS_EACH, BURST):
            await client.append_events(s, [_adk_event(i) for i in range(start, start + BURST)])

    started = time.perf_counter()
    await asyncio.gather(*(one_by_one(c, s) for c, s in zip(clients, sessions, strict=True)))
    out["append_8_clients_events_per_s"] = round(CLIENTS * APPENDS_EACH / (time.perf_counter() - started), 1)
    if hasattr(service, "append_events"):
        started = time.perf_counter()
        await asyncio.gather(*(in_bursts(c, s) for c, s in zip(clients, sessions, strict=True)))
        out["append_8_clients_bursts_events_per_s"] = round(
            CLIENTS * APPENDS_EACH / (time.perf_counter() - started), 1
        )
    if new_client:
        for client in clients:
            await client.aclose()
    return out


async def _contract_workload(service: Any) -> float:
    """The operations of the ADK session contract (tests/clients/test_adk_session_contract.py) as one
    workload, CONTRACT_ROUNDS times: create with scoped state, get, list by user and by app, appends
    with state deltas, reads by num_recent_events and after_timestamp, user state, a stale writer
    refused, delete, a missing session. Seconds in total."""
    from google.adk.errors import StaleSessionError
    from google.adk.sessions.base_session_service import GetSessionConfig

    started = time.perf_counter()
    for r in range(CONTRACT_ROUNDS):
        app, user = f"contract-{r}", "u"
        session = await service.create_session(
            app_name=app,
            user_id=user,
            session_id=f"s{r}",
            state={"k": 1, "app:a": 1, "user:u": 1, "temp:t": 1},
        )
        assert await service.get_session(app_name=app, user_id=user, session_id=session.id) is not None
        for i in range(5):
            await service.append_event(session, _adk_event(i))
        other = await service.create_session(app_name=app, user_id="v")
        await service.list_sessions(app_name=app, user_id=user)
        await service.list_sessions(app_name=app)
        await service.get_session(
            app_name=app, user_id=user, session_id=session.id, config=GetSessionConfig(num_recent_events=3)
        )
        await service.get_session(
            app_name=app, user_id=user, session_id=session.id, config=GetSessionConfig(after_timestamp=0.0)
        )
        await service.get_user_state(app_name=app, user_id=user)
        stale = await service.get_session(app_name=app, user_id=user, session_id=session.id)
        await service.append_event(session, _adk_event(5))
        with contextlib.suppress(StaleSessionError):  # refused by the platform and ADK's database backend
            await service.append_event(stale, _adk_event(6))
        await service.delete_session(app_name=app, user_id="v", session_id=other.id)
        await service.delete_session(app_name=app, user_id=user, session_id=session.id)
        assert await service.get_session(app_name=app, user_id=user, session_id=session.id) is None
    return round(time.perf_counter() - started, 2)


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
    from google.adk.sessions import DatabaseSessionService, InMemorySessionService
    from google.adk.sessions.base_session_service import GetSessionConfig

    url = f"sqlite+aiosqlite:///{db}"
    service = DatabaseSessionService(db_url=url)
    out: dict[str, Any] = {}
    warm = await service.create_session(app_name="bench", user_id="warm")
    for i in range(20):
        await service.append_event(warm, _adk_event(i))
    # ADK's SQLite backend serialises writers on one file: its concurrent clients share the service
    out.update(await _append_figures(service, None))
    out["contract_workload_s"] = await _contract_workload(service)
    memory = InMemorySessionService()
    out["in_memory"] = await _append_figures(memory, None)
    out["in_memory"]["contract_workload_s"] = await _contract_workload(memory)

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
    await service.close()
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
        "carries the optimistic check; the per-key rate limit is lifted for the run. Bursts: "
        f"append_events with {BURST} events per call (one request, one transaction); {CLIENTS} clients: "
        "each its own PlatformSessionService, connection pool and session. ADK: DatabaseSessionService "
        "with sqlite+aiosqlite and InMemorySessionService, in-process calls (no burst call: event by "
        f"event; {CLIENTS} clients share the service). The contract workload: the ADK session contract's "
        f"operations, {CONTRACT_ROUNDS} rounds. list_sessions on the platform reads all 10,000 through the "
        "API's largest page (limit 10,000); ADK returns them in one call. Targets: issue 33 (appends, "
        "get_session, contract workload), issue 8 (list)."
    )
    return {"rows": _rows(figures), "figures": figures}


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    p, a = f["platform"], f["adk"]
    m = a["in_memory"]
    peer = f"ADK {f['adk_version']} DatabaseSessionService (SQLite)"
    memory = f"ADK {f['adk_version']} InMemorySessionService"
    ratio = round(p["contract_workload_s"] / a["contract_workload_s"], 2)
    return [
        row(
            "append events, one client, event by event (optimistic check)",
            p["append_one_client_events_per_s"],
            "ev/s",
            peer=(peer, a["append_one_client_events_per_s"]),
            floor=(memory, m["append_one_client_events_per_s"]),
        ),
        row(
            f"append events, one client, bursts of {BURST} (append_events)",
            p["append_one_client_bursts_events_per_s"],
            "ev/s",
            peer=(peer + ", event by event", a["append_one_client_bursts_events_per_s"]),
            floor=(memory, m["append_one_client_bursts_events_per_s"]),
            target=(">=", 400),
        ),
        row(
            f"append events, {CLIENTS} concurrent clients, event by event",
            p["append_8_clients_events_per_s"],
            "ev/s",
            peer=(peer, a["append_8_clients_events_per_s"]),
            floor=(memory, m["append_8_clients_events_per_s"]),
        ),
        row(
            f"append events, {CLIENTS} concurrent clients, bursts of {BURST}",
            p["append_8_clients_bursts_events_per_s"],
            "ev/s",
            peer=(peer + ", event by event", a["append_8_clients_events_per_s"]),
            floor=(memory, m["append_8_clients_events_per_s"]),
            target=(">=", 1500),
        ),
        row(
            "get_session last 20 of 10,000 events p95",
            p["get_last_20_of_10000_ms"]["p95"],
            "ms",
            peer=(peer, a["get_last_20_of_10000_ms"]["p95"]),
            target=("<=", 10),
        ),
        row(
            f"ADK session contract workload ({CONTRACT_ROUNDS} rounds), total time",
            p["contract_workload_s"],
            "s",
            peer=(peer, a["contract_workload_s"]),
            floor=(memory, m["contract_workload_s"]),
        ),
        row(
            "ADK session contract workload, platform time / DatabaseSessionService's (same run)",
            ratio,
            "x",
            target=("<=", 1.2),
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
