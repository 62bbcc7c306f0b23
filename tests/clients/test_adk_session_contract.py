# Skipped from ADK's module: SQLite URL tests and SQLAlchemy rollback spies (local-database internals).
"""ADK's session-service contract, behaviour by behaviour, on adk_knowledge.PlatformSessionService and
the real platform (Neo4j, Redis, daphne), plus the id, ordering and staleness rules ADK's own services
follow (InMemorySessionService trims ids; DatabaseSessionService 2.13 rejects stale writers)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import pytest
from adk_knowledge import PlatformSessionService
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types

from tests.clients.conftest import Platform
from tests.conftest import Tenant

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

USER = "user-1"
PADDED = [pytest.param(" order-42", id="leading-space"), pytest.param("order-42\n", id="trailing-newline")]
ODD_IDS = [
    pytest.param("s/C", id="slash"),
    pytest.param("..", id="dotdot"),
    pytest.param(".", id="dot"),
    pytest.param("~x", id="tilde"),
    pytest.param("a%2Fb", id="percent-escape"),
    pytest.param("with space", id="space"),
    pytest.param("ünïcødé/路径", id="unicode-slash"),
    pytest.param("?q=1#frag", id="query-fragment"),
    pytest.param("a\\b", id="backslash"),
    pytest.param("é/" * 128, id="256-chars"),
]


def _event(
    *,
    ts: float | None = None,
    text: str | None = None,
    delta: dict[str, Any] | None = None,
    invocation: str = "inv-1",
    **fields: object,
) -> Event:
    values: dict[str, object] = {"invocation_id": invocation, "author": "user", **fields}
    if ts is not None:
        values["timestamp"] = ts
    if text is not None:
        values["content"] = types.Content(role="user", parts=[types.Part(text=text)])
    if delta is not None:
        values["actions"] = EventActions(state_delta=delta)
    return Event(**values)  # type: ignore[arg-type]


def _stamps(session: Session | None) -> list[float]:
    assert session is not None
    return [e.timestamp for e in session.events]


def _invocations(session: Session | None) -> list[str]:
    assert session is not None
    return [e.invocation_id for e in session.events]


@pytest.fixture
def app() -> str:
    return f"app-{uuid4().hex[:8]}"


@pytest.fixture
async def service(platform_web: Platform, client_tenant: Tenant) -> AsyncIterator[PlatformSessionService]:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as opened:
        yield opened


async def _with_stamped_events(service: PlatformSessionService, app: str, stamps: list[float]) -> Session:
    session = await service.create_session(app_name=app, user_id=USER)
    for position, stamp in enumerate(stamps):
        await service.append_event(session, _event(ts=stamp, invocation=f"inv-{position}"))
    return session


# --- create, get, delete ---------------------------------------------------------------------------


async def test_get_of_a_missing_session_is_none(service: PlatformSessionService, app: str) -> None:
    assert await service.get_session(app_name=app, user_id=USER, session_id="123") is None


async def test_created_session_carries_its_app_user_generated_id_and_state(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER, state={"key": "value"})
    assert (session.app_name, session.user_id, session.state) == (app, USER, {"key": "value"})
    assert session.id


async def test_created_session_last_update_time_is_not_in_the_future(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER)
    assert session.last_update_time <= time.time()


async def test_get_returns_a_session_equal_to_the_created_one(
    service: PlatformSessionService, app: str
) -> None:
    created = await service.create_session(app_name=app, user_id=USER, state={"key": "value"})
    got = await service.get_session(app_name=app, user_id=USER, session_id=created.id)
    assert got == created
    assert got is not None and got.last_update_time <= time.time()


async def test_deleted_session_is_no_longer_found(service: PlatformSessionService, app: str) -> None:
    created = await service.create_session(app_name=app, user_id=USER)
    await service.delete_session(app_name=app, user_id=USER, session_id=created.id)
    assert await service.get_session(app_name=app, user_id=USER, session_id=created.id) is None


async def test_deleting_a_missing_session_is_a_no_op(service: PlatformSessionService, app: str) -> None:
    await service.delete_session(app_name=app, user_id=USER, session_id="never-created")


async def test_create_with_an_existing_id_is_already_exists_error(
    service: PlatformSessionService, app: str
) -> None:
    await service.create_session(app_name=app, user_id=USER, session_id="existing_session")
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=app, user_id=USER, session_id="existing_session")


@pytest.mark.parametrize("given", [None, "", "   ", "\t \n"], ids=["none", "empty", "spaces", "whitespace"])
async def test_create_generates_an_id_when_none_or_blank_is_given(
    service: PlatformSessionService, app: str, given: str | None
) -> None:
    session = await service.create_session(app_name=app, user_id=USER, session_id=given)
    assert session.id and session.id.strip() == session.id
    assert await service.get_session(app_name=app, user_id=USER, session_id=session.id) is not None


# --- session ids are trimmed -------------------------------------------------------------------------


async def test_create_trims_whitespace_around_the_session_id(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER, session_id="order-42\n")
    assert session.id == "order-42"


@pytest.mark.parametrize("padded", PADDED)
async def test_get_with_a_padded_session_id_reaches_the_trimmed_session(
    service: PlatformSessionService, app: str, padded: str
) -> None:
    await service.create_session(app_name=app, user_id=USER, session_id="order-42\n", state={"k": 1})
    got = await service.get_session(app_name=app, user_id=USER, session_id=padded)
    assert got is not None and got.id == "order-42" and got.state == {"k": 1}


@pytest.mark.parametrize("padded", PADDED)
async def test_append_with_a_padded_session_id_reaches_the_trimmed_session(
    service: PlatformSessionService, app: str, padded: str
) -> None:
    await service.create_session(app_name=app, user_id=USER, session_id="order-42\n")
    session = await service.get_session(app_name=app, user_id=USER, session_id="order-42")
    assert session is not None
    session.id = padded
    await service.append_event(session, _event(text="hello"))
    assert _invocations(await service.get_session(app_name=app, user_id=USER, session_id="order-42")) == [
        "inv-1"
    ]


@pytest.mark.parametrize("padded", PADDED)
async def test_delete_with_a_padded_session_id_removes_the_trimmed_session(
    service: PlatformSessionService, app: str, padded: str
) -> None:
    await service.create_session(app_name=app, user_id=USER, session_id="order-42\n")
    await service.delete_session(app_name=app, user_id=USER, session_id=padded)
    assert await service.get_session(app_name=app, user_id=USER, session_id="order-42") is None


async def test_creating_the_trimmed_id_after_a_padded_one_is_already_exists_error(
    service: PlatformSessionService, app: str
) -> None:
    await service.create_session(app_name=app, user_id=USER, session_id="order-42\n")
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=app, user_id=USER, session_id="order-42")


# --- any id of 1-256 characters round-trips ------------------------------------------------------------


@pytest.mark.parametrize("field", ["app_name", "user_id", "session_id"])
@pytest.mark.parametrize("odd", ODD_IDS)
async def test_an_unusual_id_round_trips_through_every_call(
    service: PlatformSessionService, app: str, field: str, odd: str
) -> None:
    ids = {"app_name": app, "user_id": USER, "session_id": "plain-session", field: odd}
    app_name, user_id, session_id = ids["app_name"], ids["user_id"], ids["session_id"]
    created = await service.create_session(app_name=app_name, user_id=user_id, session_id=session_id)
    assert (created.app_name, created.user_id, created.id) == (app_name, user_id, session_id)
    await service.append_event(created, _event(text="hi", delta={"user:seen": True}))
    got = await service.get_session(app_name=app_name, user_id=user_id, session_id=session_id)
    assert got is not None
    assert (got.app_name, got.user_id, got.id, len(got.events)) == (app_name, user_id, session_id, 1)
    mine = await service.list_sessions(app_name=app_name, user_id=user_id)
    assert [(s.app_name, s.user_id, s.id) for s in mine.sessions] == [(app_name, user_id, session_id)]
    everyone = await service.list_sessions(app_name=app_name)
    assert [(s.app_name, s.user_id, s.id) for s in everyone.sessions] == [(app_name, user_id, session_id)]
    assert await service.get_user_state(app_name=app_name, user_id=user_id) == {"seen": True}
    await service.delete_session(app_name=app_name, user_id=user_id, session_id=session_id)
    assert await service.get_session(app_name=app_name, user_id=user_id, session_id=session_id) is None


# --- listing -----------------------------------------------------------------------------------------


async def test_list_sessions_of_a_user_returns_each_created_session_with_its_state(
    service: PlatformSessionService, app: str
) -> None:
    ids = [f"session{i}" for i in range(5)]
    for sid in ids:
        await service.create_session(app_name=app, user_id=USER, session_id=sid, state={"key": f"value{sid}"})
    listed = (await service.list_sessions(app_name=app, user_id=USER)).sessions
    assert sorted(s.id for s in listed) == ids
    assert all(s.state == {"key": f"value{s.id}"} for s in listed)


async def test_list_sessions_of_a_user_leaves_out_other_users(
    service: PlatformSessionService, app: str
) -> None:
    await service.create_session(app_name=app, user_id="user1", session_id="session1a", state={"key": "1a"})
    await service.create_session(app_name=app, user_id="user1", session_id="session1b", state={"key": "1b"})
    await service.create_session(app_name=app, user_id="user2", session_id="session2a", state={"key": "2a"})
    first = (await service.list_sessions(app_name=app, user_id="user1")).sessions
    second = (await service.list_sessions(app_name=app, user_id="user2")).sessions
    assert {s.id: s.state for s in first} == {"session1a": {"key": "1a"}, "session1b": {"key": "1b"}}
    assert {s.id: s.state for s in second} == {"session2a": {"key": "2a"}}


async def test_list_sessions_without_a_user_spans_every_user_of_the_app(
    service: PlatformSessionService, app: str
) -> None:
    await service.create_session(app_name=app, user_id="user1", session_id="session1a", state={"key": "1a"})
    await service.create_session(app_name=app, user_id="user1", session_id="session1b", state={"key": "1b"})
    await service.create_session(app_name=app, user_id="user2", session_id="session2a", state={"key": "2a"})
    everyone = (await service.list_sessions(app_name=app, user_id=None)).sessions
    assert {(s.user_id, s.id): s.state for s in everyone} == {
        ("user1", "session1a"): {"key": "1a"},
        ("user1", "session1b"): {"key": "1b"},
        ("user2", "session2a"): {"key": "2a"},
    }


# --- state scopes --------------------------------------------------------------------------------------


async def test_app_state_is_shared_by_all_users_of_the_app(service: PlatformSessionService, app: str) -> None:
    first = await service.create_session(app_name=app, user_id="u1", session_id="s1", state={"app:k1": "v1"})
    await service.append_event(first, _event(delta={"app:k2": "v2"}))
    other_user = await service.create_session(app_name=app, user_id="u2", session_id="s2")
    assert other_user.state == {"app:k1": "v1", "app:k2": "v2"}
    again = await service.get_session(app_name=app, user_id="u1", session_id="s1")
    assert again is not None and again.state == {"app:k1": "v1", "app:k2": "v2"}


async def test_user_state_is_shared_only_by_that_users_sessions(
    service: PlatformSessionService, app: str
) -> None:
    first = await service.create_session(app_name=app, user_id="u1", session_id="s1", state={"user:k1": "v1"})
    await service.append_event(first, _event(delta={"user:k2": "v2"}))
    same_user = await service.create_session(app_name=app, user_id="u1", session_id="s1b")
    other_user = await service.create_session(app_name=app, user_id="u2", session_id="s2")
    assert same_user.state == {"user:k1": "v1", "user:k2": "v2"}
    assert other_user.state == {}


async def test_get_user_state_reads_the_users_state_without_prefix(
    service: PlatformSessionService, app: str
) -> None:
    first = await service.create_session(app_name=app, user_id="u1", state={"user:k1": "v1"})
    await service.append_event(first, _event(delta={"user:k2": "v2", "sk": "session only"}))
    assert await service.get_user_state(app_name=app, user_id="u1") == {"k1": "v1", "k2": "v2"}
    assert await service.get_user_state(app_name=app, user_id="u2") == {}


async def test_session_state_is_not_shared_between_sessions(
    service: PlatformSessionService, app: str
) -> None:
    first = await service.create_session(app_name=app, user_id="u1", session_id="s1", state={"sk1": "v1"})
    await service.append_event(first, _event(delta={"sk2": "v2"}))
    again = await service.get_session(app_name=app, user_id="u1", session_id="s1")
    sibling = await service.create_session(app_name=app, user_id="u1", session_id="s1b")
    assert again is not None and again.state == {"sk1": "v1", "sk2": "v2"}
    assert sibling.state == {}


async def test_temp_state_is_not_stored_in_session_state(service: PlatformSessionService, app: str) -> None:
    session = await service.create_session(app_name=app, user_id=USER, session_id="s1")
    await service.append_event(session, _event(delta={"temp:k1": "v1", "sk": "v2"}))
    stored = await service.get_session(app_name=app, user_id=USER, session_id="s1")
    assert stored is not None and stored.state == {"sk": "v2"}


async def test_temp_state_is_not_stored_in_the_event_state_delta(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER, session_id="s1")
    await service.append_event(session, _event(delta={"temp:k1": "v1", "sk": "v2"}))
    stored = await service.get_session(app_name=app, user_id=USER, session_id="s1")
    assert stored is not None and stored.events[0].actions.state_delta == {"sk": "v2"}


async def test_get_session_respects_user_id(service: PlatformSessionService, app: str) -> None:
    first = await service.create_session(app_name=app, user_id="u1", session_id="s1")
    await service.append_event(first, _event())
    await service.create_session(app_name=app, user_id="u2", session_id="s1")
    theirs = await service.get_session(app_name=app, user_id="u2", session_id="s1")
    assert theirs is not None and theirs.user_id == "u2" and theirs.events == []


# --- events round-trip ---------------------------------------------------------------------------------


async def test_bytes_parts_round_trip(service: PlatformSessionService, app: str) -> None:
    content = types.Content(
        role="user", parts=[types.Part.from_bytes(data=b"\x89PNG\x00\xffpixels", mime_type="image/png")]
    )
    session = await service.create_session(app_name=app, user_id=USER)
    await service.append_event(session, _event(content=content))
    assert session.events[0].content == content
    stored = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert stored is not None and [e.content for e in stored.events] == [content]


async def test_grounding_metadata_with_bytes_round_trips(service: PlatformSessionService, app: str) -> None:
    grounding = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"\x00sdk-blob\xfe")
    )
    session = await service.create_session(app_name=app, user_id=USER)
    await service.append_event(session, _event(text="look it up", grounding_metadata=grounding))
    stored = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert stored is not None and stored.events[0].grounding_metadata == grounding


async def test_get_equals_the_in_memory_session_after_a_complete_event(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER)
    everything = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="every field set")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        input_transcription=types.Transcription(text="heard", finished=True),
        output_transcription=types.Transcription(text="said", finished=True),
    )
    await service.append_event(session, everything)
    assert await service.get_session(app_name=app, user_id=USER, session_id=session.id) == session


async def test_get_equals_the_in_memory_session_after_several_appends(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER, state={"step": 0})
    for step in range(1, 4):
        delta = {"step": step, "user:steps": step, "app:runs": step}
        await service.append_event(
            session, _event(text=f"step {step}", delta=delta, invocation=f"inv-{step}")
        )
    assert await service.get_session(app_name=app, user_id=USER, session_id=session.id) == session


async def test_partial_event_is_not_stored(service: PlatformSessionService, app: str) -> None:
    session = await service.create_session(app_name=app, user_id=USER)
    await service.append_event(session, _event(text="stream chu", partial=True))
    stored = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert stored is not None and stored.events == []


async def test_partial_event_is_not_added_to_the_in_memory_session(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER)
    await service.append_event(session, _event(text="stream chu", partial=True))
    assert session.events == []


# --- last_update_time ------------------------------------------------------------------------------------


async def test_append_sets_last_update_time_to_the_event_timestamp(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER)
    stamp = session.last_update_time + 10.123456
    await service.append_event(session, _event(ts=stamp))
    assert session.last_update_time == pytest.approx(stamp, abs=1e-6)


async def test_get_after_append_has_the_event_timestamp_as_last_update_time(
    service: PlatformSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id=USER)
    created_at = session.last_update_time
    stamp = created_at + 10.123456
    await service.append_event(session, _event(ts=stamp))
    stored = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert stored is not None
    assert stored.last_update_time == pytest.approx(stamp, abs=1e-6)
    assert stored.last_update_time > created_at


# --- event order and GetSessionConfig ----------------------------------------------------------------


async def test_events_come_back_in_timestamp_order_when_appended_out_of_order(
    service: PlatformSessionService, app: str
) -> None:
    session = await _with_stamped_events(service, app, [3.0, 1.0, 5.0, 2.0, 4.0])
    stored = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert _stamps(stored) == [1.0, 2.0, 3.0, 4.0, 5.0]


async def test_events_with_equal_timestamps_keep_their_append_order(
    service: PlatformSessionService, app: str
) -> None:
    session = await _with_stamped_events(service, app, [2.0, 1.0, 2.0, 1.0, 2.0])
    stored = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert _invocations(stored) == ["inv-1", "inv-3", "inv-0", "inv-2", "inv-4"]


async def test_get_without_config_returns_every_event(service: PlatformSessionService, app: str) -> None:
    session = await _with_stamped_events(service, app, [1.0, 2.0, 3.0, 4.0, 5.0])
    stored = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert _stamps(stored) == [1.0, 2.0, 3.0, 4.0, 5.0]


async def test_num_recent_events_gives_the_last_n_by_timestamp(
    service: PlatformSessionService, app: str
) -> None:
    session = await _with_stamped_events(service, app, [5.0, 1.0, 4.0, 2.0, 3.0])
    recent = await service.get_session(
        app_name=app, user_id=USER, session_id=session.id, config=GetSessionConfig(num_recent_events=3)
    )
    assert _stamps(recent) == [3.0, 4.0, 5.0]


async def test_num_recent_events_zero_gives_no_events(service: PlatformSessionService, app: str) -> None:
    session = await _with_stamped_events(service, app, [1.0, 2.0, 3.0])
    none = await service.get_session(
        app_name=app, user_id=USER, session_id=session.id, config=GetSessionConfig(num_recent_events=0)
    )
    assert _stamps(none) == []


async def test_after_timestamp_includes_events_at_that_timestamp(
    service: PlatformSessionService, app: str
) -> None:
    session = await _with_stamped_events(service, app, [1.0, 2.0, 3.0, 4.0, 5.0])
    later = await service.get_session(
        app_name=app, user_id=USER, session_id=session.id, config=GetSessionConfig(after_timestamp=4.0)
    )
    assert _stamps(later) == [4.0, 5.0]


async def test_after_timestamp_past_every_event_gives_no_events(
    service: PlatformSessionService, app: str
) -> None:
    session = await _with_stamped_events(service, app, [1.0, 2.0, 3.0, 4.0, 5.0])
    later = await service.get_session(
        app_name=app, user_id=USER, session_id=session.id, config=GetSessionConfig(after_timestamp=50.0)
    )
    assert _stamps(later) == []


async def test_num_recent_events_and_after_timestamp_combine(
    service: PlatformSessionService, app: str
) -> None:
    session = await _with_stamped_events(service, app, [1.0, 2.0, 3.0, 4.0, 5.0])
    both = GetSessionConfig(num_recent_events=3, after_timestamp=4.0)
    got = await service.get_session(app_name=app, user_id=USER, session_id=session.id, config=both)
    assert _stamps(got) == [4.0, 5.0]


# --- stale writers -----------------------------------------------------------------------------------


async def _outdated(service: PlatformSessionService, app: str) -> Session:
    """A session object that appended once, then fell behind a second reader's append."""
    now = time.time()
    original = await service.create_session(app_name=app, user_id=USER)
    await service.append_event(original, _event(ts=now + 1, delta={"sk1": "v1"}, invocation="inv1"))
    fresher = await service.get_session(app_name=app, user_id=USER, session_id=original.id)
    assert fresher is not None
    await service.append_event(fresher, _event(ts=now + 2, delta={"sk2": "v2"}, invocation="inv2"))
    return original


async def test_append_to_a_stale_session_is_stale_session_error(
    service: PlatformSessionService, app: str
) -> None:
    stale = await _outdated(service, app)
    with pytest.raises(StaleSessionError):
        await service.append_event(stale, _event(ts=time.time() + 3, delta={"sk3": "v3"}, invocation="inv3"))


async def test_append_to_a_stale_session_writes_nothing(service: PlatformSessionService, app: str) -> None:
    stale = await _outdated(service, app)
    with pytest.raises(StaleSessionError):
        await service.append_event(stale, _event(ts=time.time() + 3, delta={"sk3": "v3"}, invocation="inv3"))
    stored = await service.get_session(app_name=app, user_id=USER, session_id=stale.id)
    assert _invocations(stored) == ["inv1", "inv2"]
    assert stored is not None and stored.state == {"sk1": "v1", "sk2": "v2"}


async def test_a_failed_stale_append_leaves_the_session_object_as_it_was(
    service: PlatformSessionService, app: str
) -> None:
    stale = await _outdated(service, app)
    with pytest.raises(StaleSessionError):
        await service.append_event(stale, _event(ts=time.time() + 3, delta={"sk3": "v3"}, invocation="inv3"))
    assert _invocations(stale) == ["inv1"]
    assert stale.state == {"sk1": "v1"}


async def _stored_with_one_event(service: PlatformSessionService, app: str) -> Session:
    created = await service.create_session(app_name=app, user_id=USER)
    await service.append_event(created, _event(ts=time.time() + 5, text="first"))
    stored = await service.get_session(app_name=app, user_id=USER, session_id=created.id)
    assert stored is not None
    return stored


async def test_a_hand_built_session_older_than_storage_is_stale(
    service: PlatformSessionService, app: str
) -> None:
    stored = await _stored_with_one_event(service, app)
    by_hand = Session(id=stored.id, app_name=app, user_id=USER, last_update_time=stored.last_update_time - 1)
    with pytest.raises(StaleSessionError):
        await service.append_event(by_hand, _event(text="late"))


@pytest.mark.parametrize("ahead", [0.0, 1.0], ids=["equal", "newer"])
async def test_a_hand_built_session_not_older_than_storage_appends(
    service: PlatformSessionService, app: str, ahead: float
) -> None:
    stored = await _stored_with_one_event(service, app)
    by_hand = Session(
        id=stored.id, app_name=app, user_id=USER, last_update_time=stored.last_update_time + ahead
    )
    await service.append_event(by_hand, _event(ts=stored.last_update_time + 2, invocation="inv-2"))
    after = await service.get_session(app_name=app, user_id=USER, session_id=stored.id)
    assert _invocations(after) == ["inv-1", "inv-2"]
