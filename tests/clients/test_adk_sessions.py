"""adk_knowledge.PlatformSessionService: ADK's session service contract on the real platform."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from adk_knowledge import PlatformSessionService
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from knowledge_platform_client import NotFoundError, PermissionDeniedError, PlatformSettings

from core import graph
from tests.clients.conftest import Platform
from tests.conftest import Tenant

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _event(
    author: str, text: str, *, ts: float | None = None, delta: dict | None = None, **extra: object
) -> Event:
    fields: dict[str, object] = {
        "author": author,
        "invocation_id": "inv-1",
        "content": types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
        **extra,
    }
    if ts is not None:
        fields["timestamp"] = ts
    if delta is not None:
        fields["actions"] = EventActions(state_delta=delta)
    return Event(**fields)  # type: ignore[arg-type]


async def test_create_append_get_with_state_scopes(platform_web: Platform, client_tenant: Tenant) -> None:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as service:
        session = await service.create_session(
            app_name="shop", user_id="ana", state={"cart": [], "app:currency": "EUR", "temp:draft": 1}
        )
        assert session.state == {"cart": [], "app:currency": "EUR"}
        for i in range(4):
            await service.append_event(
                session,
                _event(
                    "user" if i % 2 == 0 else "shop_agent",
                    f"turn {i}",
                    ts=1_000.0 + i,
                    delta={"cart": [f"item{i}"], "user:visits": i, "temp:scratch": i},
                ),
            )
        # the in-memory session saw temp state during the invocation; storage never did
        assert session.state["temp:scratch"] == 3
        stored = await service.get_session(app_name="shop", user_id="ana", session_id=session.id)
        assert stored is not None
        assert stored.state == {"cart": ["item3"], "app:currency": "EUR", "user:visits": 3}
        assert [e.content.parts[0].text for e in stored.events] == [f"turn {i}" for i in range(4)]  # type: ignore[union-attr, index]
        assert [e.id for e in stored.events] == [e.id for e in session.events]
        assert all("temp:scratch" not in e.actions.state_delta for e in stored.events)
        assert stored.last_update_time == pytest.approx(session.last_update_time)
        recent = await service.get_session(
            app_name="shop",
            user_id="ana",
            session_id=session.id,
            config=GetSessionConfig(num_recent_events=2),
        )
        assert [e.timestamp for e in recent.events] == [1002.0, 1003.0]  # type: ignore[union-attr]
        after = await service.get_session(
            app_name="shop",
            user_id="ana",
            session_id=session.id,
            config=GetSessionConfig(after_timestamp=1001.0),
        )
        assert [e.timestamp for e in after.events] == [1001.0, 1002.0, 1003.0]  # type: ignore[union-attr]
        # user: and app: state reach the user's other sessions; get_user_state reads it without one
        second = await service.create_session(app_name="shop", user_id="ana")
        assert second.state == {"app:currency": "EUR", "user:visits": 3}
        assert await service.get_user_state(app_name="shop", user_id="ana") == {"visits": 3}
        other_user = await service.create_session(app_name="shop", user_id="bob")
        assert other_user.state == {"app:currency": "EUR"}


async def test_a_stale_session_object_cannot_write(platform_web: Platform, client_tenant: Tenant) -> None:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as service:
        created = await service.create_session(app_name="a", user_id="u", session_id="s1")
        first = await service.get_session(app_name="a", user_id="u", session_id="s1")
        second = await service.get_session(app_name="a", user_id="u", session_id="s1")
        assert first is not None and second is not None and created.id == "s1"
        await service.append_event(first, _event("user", "from the first reader", delta={"owner": "first"}))
        with pytest.raises(StaleSessionError):
            await service.append_event(second, _event("user", "from the second", delta={"owner": "second"}))
        stored = await service.get_session(app_name="a", user_id="u", session_id="s1")
        assert [e.content.parts[0].text for e in stored.events] == ["from the first reader"]  # type: ignore[union-attr, index]
        assert stored.state == {"owner": "first"}  # type: ignore[union-attr]
        # the winner keeps writing: its revision followed each append
        await service.append_event(first, _event("user", "again"))
        reloaded = await service.get_session(app_name="a", user_id="u", session_id="s1")
        await service.append_event(reloaded, _event("user", "after reload"))  # type: ignore[arg-type]


async def test_concurrent_appends_from_one_revision_exactly_one_wins(
    platform_web: Platform, client_tenant: Tenant
) -> None:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as service:
        await service.create_session(app_name="a", user_id="u", session_id="race")
        readers = [await service.get_session(app_name="a", user_id="u", session_id="race") for _ in range(4)]
        outcomes = await asyncio.gather(
            *(service.append_event(r, _event("user", f"writer {i}")) for i, r in enumerate(readers)),  # type: ignore[arg-type]
            return_exceptions=True,
        )
        assert sum(isinstance(o, Event) for o in outcomes) == 1
        assert sum(isinstance(o, StaleSessionError) for o in outcomes) == 3
        stored = await service.get_session(app_name="a", user_id="u", session_id="race")
        assert len(stored.events) == 1  # type: ignore[union-attr]


async def test_partial_events_are_not_stored(platform_web: Platform, client_tenant: Tenant) -> None:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as service:
        session = await service.create_session(app_name="a", user_id="u")
        await service.append_event(session, _event("agent", "stream chun", partial=True))
        stored = await service.get_session(app_name="a", user_id="u", session_id=session.id)
        assert stored is not None and stored.events == []


async def test_tool_calls_become_graph_nodes(platform_web: Platform, client_tenant: Tenant) -> None:
    settings = platform_web.settings(client_tenant)
    async with PlatformSessionService(settings=settings) as service:
        session = await service.create_session(app_name="a", user_id="u")
        call = types.FunctionCall(id="call-1", name="get_weather", args={"city": "Porto"})
        reply = types.FunctionResponse(id="call-1", name="get_weather", response={"temp_c": 21})
        await service.append_event(
            session,
            Event(
                author="agent", content=types.Content(role="model", parts=[types.Part(function_call=call)])
            ),
        )
        await service.append_event(
            session,
            Event(
                author="agent",
                content=types.Content(role="user", parts=[types.Part(function_response=reply)]),
            ),
        )
        stored = await service.get_session(app_name="a", user_id="u", session_id=session.id)
        assert stored.events[0].get_function_calls()[0].args == {"city": "Porto"}  # type: ignore[union-attr]
        assert stored.events[1].get_function_responses()[0].response == {"temp_c": 21}  # type: ignore[union-attr]
    stats = httpx.get(
        f"{settings.url}/api/v1/projects/{settings.project_id}/apps/a/users/u/sessions/{session.id}/tool-calls",
        headers={"Authorization": f"Bearer {settings.api_key.get_secret_value()}"},
    ).json()
    [tool] = stats["tools"]
    assert tool["name"] == "get_weather" and tool["calls"] == 1 and tool["responded"] == 1


async def test_list_orders_oldest_first_and_spans_users(
    platform_web: Platform, client_tenant: Tenant
) -> None:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as service:
        for sid in ("s1", "s2", "s3"):
            await service.create_session(app_name="a", user_id="ana", session_id=sid)
        await service.create_session(app_name="a", user_id="bob", session_id="b1")
        await service.create_session(app_name="other", user_id="ana", session_id="x1")
        s1 = await service.get_session(app_name="a", user_id="ana", session_id="s1")
        await service.append_event(s1, _event("user", "s1 is now the most recent"))  # type: ignore[arg-type]
        mine = await service.list_sessions(app_name="a", user_id="ana")
        assert [s.id for s in mine.sessions] == ["s2", "s3", "s1"]
        assert all(s.events == [] for s in mine.sessions)
        everyone = await service.list_sessions(app_name="a")
        assert sorted((s.user_id, s.id) for s in everyone.sessions) == [
            ("ana", "s1"),
            ("ana", "s2"),
            ("ana", "s3"),
            ("bob", "b1"),
        ]
        assert everyone.sessions[-1].id == "s1"


async def test_duplicates_missing_and_deleted(platform_web: Platform, client_tenant: Tenant) -> None:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as service:
        session = await service.create_session(app_name="a", user_id="u", session_id="dup")
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name="a", user_id="u", session_id="dup")
        assert await service.get_session(app_name="a", user_id="u", session_id="nope") is None
        await service.delete_session(app_name="a", user_id="u", session_id="nope")  # no error
        await service.append_event(session, _event("user", "hello", delta={"user:seen": True}))
        await service.delete_session(app_name="a", user_id="u", session_id="dup")
        assert await service.get_session(app_name="a", user_id="u", session_id="dup") is None
        # the cascade took the events and their edges; the user's shared state stays
        left = graph.read(
            "MATCH (e:Event {project_id: $p}) RETURN count(e) AS events", p=client_tenant.project.id
        )[0]
        assert left == {"events": 0}
        assert await service.get_user_state(app_name="a", user_id="u") == {"seen": True}
        with pytest.raises(SessionNotFoundError):
            await service.append_event(session, _event("user", "into the void"))


async def test_tenants_and_scopes_hold(
    platform_web: Platform, client_tenant: Tenant, other_tenant: Tenant
) -> None:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as mine:
        session = await mine.create_session(app_name="a", user_id="u", session_id="private")
        await mine.append_event(session, _event("user", "secret plans"))
    # another project's key naming this project: the platform answers 404 for the whole project
    trespass = PlatformSettings(
        url=platform_web.base,
        api_key=other_tenant.write_key.key,
        project_id=client_tenant.project.id,
    )
    async with PlatformSessionService(settings=trespass) as intruder:
        assert await intruder.get_session(app_name="a", user_id="u", session_id="private") is None
        with pytest.raises(NotFoundError):
            await intruder.list_sessions(app_name="a", user_id="u")
        with pytest.raises(NotFoundError):
            await intruder.create_session(app_name="a", user_id="u")
    # its own project does not have the session, and listing there is empty
    async with PlatformSessionService(settings=platform_web.settings(other_tenant)) as theirs:
        assert await theirs.get_session(app_name="a", user_id="u", session_id="private") is None
        assert (await theirs.list_sessions(app_name="a")).sessions == []
    # a read-only key reads but cannot append
    async with PlatformSessionService(settings=platform_web.settings(client_tenant, key="read")) as reader:
        stored = await reader.get_session(app_name="a", user_id="u", session_id="private")
        assert stored is not None and len(stored.events) == 1
        with pytest.raises(PermissionDeniedError):
            await reader.append_event(stored, _event("user", "not allowed"))


async def test_a_burst_of_events_goes_in_one_call(platform_web: Platform, client_tenant: Tenant) -> None:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as service:
        session = await service.create_session(app_name="a", user_id="u", session_id="burst")
        stale = await service.get_session(app_name="a", user_id="u", session_id="burst")
        events = [
            _event("user", f"turn {i}", ts=100.0 + i, delta={"n": i, "temp:t": i}) for i in range(5)
        ] + [Event(author="user", partial=True)]
        stored = await service.append_events(session, events)
        assert len(stored) == 5 and session.state["temp:t"] == 4 and session.last_update_time == 104.0
        got = await service.get_session(app_name="a", user_id="u", session_id="burst")
        assert got is not None and got.state == {"n": 4} and got.last_update_time == 104.0
        assert [e.id for e in got.events] == [e.id for e in session.events]
        await service.append_event(session, _event("user", "after the burst"))  # its revision followed
        with pytest.raises(StaleSessionError):
            await service.append_events(stale, [_event("user", "from a stale copy")])  # type: ignore[arg-type]
        assert len((await service.get_session(app_name="a", user_id="u", session_id="burst")).events) == 6  # type: ignore[union-attr]
