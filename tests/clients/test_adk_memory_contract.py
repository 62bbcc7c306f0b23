# Skipped from ADK's module: none; its reads of the private _session_events dict are checked via search.
"""ADK's memory-service contract, behaviour by behaviour, on adk_knowledge.PlatformMemoryService and the
real platform (Neo4j with the local embedder), plus what a remote memory must add: a relevance floor,
Unicode-normalised and case-folded matching, any ids, the default top_k of 5, every author kept."""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator
from datetime import datetime
from uuid import uuid4

import pytest
from adk_knowledge import PlatformMemoryService, PlatformSessionService
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from tests.clients.conftest import Platform
from tests.conftest import Tenant

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

USER = "test-user"
OTHER_USER = "another-user"
MODES = [
    pytest.param(None, id="default"),
    pytest.param("fulltext", id="fulltext"),
    pytest.param("hybrid", id="hybrid"),
    pytest.param("vector", id="vector"),
]
COOKING = [
    "Simmer the tomato sauce with garlic and basil for twenty minutes.",
    "Knead the bread dough until it is smooth, then let it rise overnight.",
    "Roast the carrots with honey and thyme at two hundred degrees.",
]


def _said(text: str | None, *, author: str = "user", role: str | None = "user", ts: float = 12345.0) -> Event:
    content = None if text is None else types.Content(role=role, parts=[types.Part(text=text)])
    return Event(invocation_id=f"inv-{uuid4().hex[:6]}", author=author, timestamp=ts, content=content)


def _session(app: str, user: str, session_id: str, *events: Event) -> Session:
    """A session built by hand, as ADK's tests build theirs (the platform does not store it)."""
    return Session(app_name=app, user_id=user, id=session_id, last_update_time=1000.0, events=list(events))


def _texts(found: SearchMemoryResponse) -> list[str]:
    return sorted(m.content.parts[0].text for m in found.memories if m.content.parts)  # type: ignore[misc]


def _adk_session(app: str) -> Session:
    return _session(
        app,
        USER,
        "session-1",
        _said("The ADK is a great toolkit.", ts=12345.0),
        _said(None, ts=12346.0),  # no content: nothing to remember
        _said("I agree. The Agent Development Kit (ADK) rocks!", author="model", role="model", ts=12347.0),
    )


def _python_session(app: str) -> Session:
    return _session(app, USER, "session-2", _said("I like to code in Python.", ts=54321.0))


@pytest.fixture
def app() -> str:
    return f"app-{uuid4().hex[:8]}"


@pytest.fixture
async def memory(platform_web: Platform, client_tenant: Tenant) -> AsyncIterator[PlatformMemoryService]:
    """Keyword search, as ADK's InMemoryMemoryService does it."""
    async with PlatformMemoryService(
        settings=platform_web.settings(client_tenant), mode="fulltext"
    ) as opened:
        yield opened


@pytest.fixture
async def default_memory(
    platform_web: Platform, client_tenant: Tenant
) -> AsyncIterator[PlatformMemoryService]:
    async with PlatformMemoryService(settings=platform_web.settings(client_tenant)) as opened:
        yield opened


@pytest.fixture
async def memory_in_mode(
    request: pytest.FixtureRequest, platform_web: Platform, client_tenant: Tenant
) -> AsyncIterator[PlatformMemoryService]:
    settings = platform_web.settings(client_tenant)
    async with PlatformMemoryService(settings=settings, mode=request.param) as opened:
        yield opened


@pytest.fixture
async def sessions(platform_web: Platform, client_tenant: Tenant) -> AsyncIterator[PlatformSessionService]:
    async with PlatformSessionService(settings=platform_web.settings(client_tenant)) as opened:
        yield opened


# --- adding sessions -------------------------------------------------------------------------------


async def test_adding_a_session_keeps_only_events_with_content(
    memory: PlatformMemoryService, app: str
) -> None:
    await memory.add_session_to_memory(_adk_session(app))
    found = await memory.search_memory(app_name=app, user_id=USER, query="ADK")
    assert _texts(found) == ["I agree. The Agent Development Kit (ADK) rocks!", "The ADK is a great toolkit."]


async def test_adding_a_session_without_events_is_not_an_error(
    memory: PlatformMemoryService, app: str
) -> None:
    await memory.add_session_to_memory(_session(app, USER, "session-4"))
    assert (await memory.search_memory(app_name=app, user_id=USER, query="session")).memories == []


async def test_a_stored_session_added_to_memory_is_searchable(
    memory: PlatformMemoryService, sessions: PlatformSessionService, app: str
) -> None:
    session = await sessions.create_session(app_name=app, user_id=USER)
    await sessions.append_event(session, _said("I always book aisle seats on night trains."))
    await memory.add_session_to_memory(session)
    found = await memory.search_memory(app_name=app, user_id=USER, query="aisle seats")
    assert _texts(found) == ["I always book aisle seats on night trains."]


# --- keyword search ----------------------------------------------------------------------------------


async def test_search_finds_the_event_sharing_a_word_with_the_query(
    memory: PlatformMemoryService, app: str
) -> None:
    await memory.add_session_to_memory(_adk_session(app))
    await memory.add_session_to_memory(_python_session(app))
    found = await memory.search_memory(app_name=app, user_id=USER, query="Python")
    assert _texts(found) == ["I like to code in Python."]


async def test_search_result_carries_the_event_author(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_session_to_memory(_adk_session(app))
    found = await memory.search_memory(app_name=app, user_id=USER, query="toolkit")
    assert [m.author for m in found.memories] == ["user"]
    found = await memory.search_memory(app_name=app, user_id=USER, query="rocks")
    assert [m.author for m in found.memories] == ["model"]


async def test_search_result_carries_the_event_timestamp(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_session_to_memory(_python_session(app))
    [entry] = (await memory.search_memory(app_name=app, user_id=USER, query="Python")).memories
    assert entry.timestamp
    # an ISO time; a naive one is local time, as ADK's own services format it
    assert datetime.fromisoformat(entry.timestamp).timestamp() == pytest.approx(54321.0, abs=1e-3)


async def test_search_is_case_insensitive(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_session_to_memory(_adk_session(app))
    found = await memory.search_memory(app_name=app, user_id=USER, query="development")
    assert _texts(found) == ["I agree. The Agent Development Kit (ADK) rocks!"]


async def test_search_returns_every_event_matching_the_query(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_session_to_memory(_adk_session(app))
    found = await memory.search_memory(app_name=app, user_id=USER, query="How about ADK?")
    assert _texts(found) == ["I agree. The Agent Development Kit (ADK) rocks!", "The ADK is a great toolkit."]


async def test_search_without_a_shared_word_returns_nothing(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_session_to_memory(_adk_session(app))
    assert (await memory.search_memory(app_name=app, user_id=USER, query="nonexistent")).memories == []


async def test_search_does_not_return_another_users_memories(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_session_to_memory(_adk_session(app))
    await memory.add_session_to_memory(_session(app, OTHER_USER, "session-3", _said("This is a secret.")))
    assert (await memory.search_memory(app_name=app, user_id=USER, query="secret")).memories == []
    theirs = await memory.search_memory(app_name=app, user_id=OTHER_USER, query="secret")
    assert _texts(theirs) == ["This is a secret."]


async def test_search_does_not_return_another_apps_memories(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_session_to_memory(
        _session(f"{app}-other", USER, "session-3", _said("This is a secret."))
    )
    assert (await memory.search_memory(app_name=app, user_id=USER, query="secret")).memories == []
    there = await memory.search_memory(app_name=f"{app}-other", user_id=USER, query="secret")
    assert _texts(there) == ["This is a secret."]


@pytest.mark.parametrize("query", ["", "   \n"], ids=["empty", "blank"])
async def test_a_blank_query_returns_nothing(memory: PlatformMemoryService, app: str, query: str) -> None:
    await memory.add_session_to_memory(_adk_session(app))
    assert (await memory.search_memory(app_name=app, user_id=USER, query=query)).memories == []


# --- relevance floor -------------------------------------------------------------------------------------


@pytest.mark.parametrize("memory_in_mode", MODES, indirect=True)
async def test_a_query_about_nothing_stored_returns_nothing(
    memory_in_mode: PlatformMemoryService, app: str
) -> None:
    await memory_in_mode.add_events_to_memory(
        app_name=app, user_id=USER, session_id="kitchen", events=[_said(text) for text in COOKING]
    )
    found = await memory_in_mode.search_memory(
        app_name=app, user_id=USER, query="quantum chromodynamics lattice"
    )
    assert found.memories == []


@pytest.mark.parametrize("memory_in_mode", MODES, indirect=True)
async def test_a_query_about_something_stored_finds_it_in_every_mode(
    memory_in_mode: PlatformMemoryService, app: str
) -> None:
    await memory_in_mode.add_events_to_memory(
        app_name=app, user_id=USER, session_id="kitchen", events=[_said(text) for text in COOKING]
    )
    found = await memory_in_mode.search_memory(
        app_name=app, user_id=USER, query="how long to simmer tomato sauce"
    )
    assert COOKING[0] in _texts(found)


# --- Unicode ---------------------------------------------------------------------------------------------


async def test_text_stored_decomposed_is_found_by_a_composed_query(
    memory: PlatformMemoryService, app: str
) -> None:
    stored = "Meet me at the cafe\u0301 near the station."
    assert unicodedata.is_normalized("NFD", "cafe\u0301")
    await memory.add_events_to_memory(app_name=app, user_id=USER, events=[_said(stored)])
    found = await memory.search_memory(app_name=app, user_id=USER, query="caf\u00e9")
    assert len(found.memories) == 1


async def test_text_stored_composed_is_found_by_a_decomposed_query(
    memory: PlatformMemoryService, app: str
) -> None:
    await memory.add_events_to_memory(
        app_name=app, user_id=USER, events=[_said("Meet me at the caf\u00e9 near the station.")]
    )
    found = await memory.search_memory(app_name=app, user_id=USER, query="cafe\u0301")
    assert len(found.memories) == 1


async def test_fulltext_search_folds_case_beyond_lower_case(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_events_to_memory(
        app_name=app, user_id=USER, events=[_said("The hotel is on the Hauptstraße in Berlin.")]
    )
    found = await memory.search_memory(app_name=app, user_id=USER, query="HAUPTSTRASSE")
    assert _texts(found) == ["The hotel is on the Hauptstraße in Berlin."]


# --- ids -------------------------------------------------------------------------------------------------


async def test_app_and_user_ids_with_a_slash_work_for_add_and_search(
    memory: PlatformMemoryService, app: str
) -> None:
    app_name, user_id = f"team/{app}", "org/ana"
    await memory.add_session_to_memory(_session(app_name, user_id, "s1", _said("Ana prefers window seats.")))
    found = await memory.search_memory(app_name=app_name, user_id=user_id, query="window seats")
    assert _texts(found) == ["Ana prefers window seats."]


@pytest.mark.parametrize("session_id", ["s/C", ".."], ids=["slash", "dotdot"])
async def test_a_hand_built_session_with_an_unusual_id_is_added(
    memory: PlatformMemoryService, app: str, session_id: str
) -> None:
    await memory.add_session_to_memory(_session(app, USER, session_id, _said("Ana prefers window seats.")))
    [entry] = (await memory.search_memory(app_name=app, user_id=USER, query="window seats")).memories
    assert entry.custom_metadata["session_id"] == session_id


@pytest.mark.parametrize("session_id", ["s/C", ".."], ids=["slash", "dotdot"])
async def test_a_stored_session_with_an_unusual_id_is_added(
    memory: PlatformMemoryService, sessions: PlatformSessionService, app: str, session_id: str
) -> None:
    session = await sessions.create_session(app_name=app, user_id=USER, session_id=session_id)
    await sessions.append_event(session, _said("Ana prefers window seats."))
    await memory.add_session_to_memory(session)
    [entry] = (await memory.search_memory(app_name=app, user_id=USER, query="window seats")).memories
    assert entry.custom_metadata["session_id"] == session_id


# --- events, entries, deletes ----------------------------------------------------------------------------


async def test_added_events_are_searchable(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_events_to_memory(
        app_name=app, user_id=USER, session_id="elsewhere", events=[_said("My passport expires in March.")]
    )
    found = await memory.search_memory(app_name=app, user_id=USER, query="passport")
    assert _texts(found) == ["My passport expires in March."]


async def test_added_memory_entries_are_searchable(memory: PlatformMemoryService, app: str) -> None:
    entry = MemoryEntry(
        content=types.Content(parts=[types.Part(text="Ana's frequent flyer number is 77.")]), author="user"
    )
    await memory.add_memory(app_name=app, user_id=USER, memories=[entry])
    found = await memory.search_memory(app_name=app, user_id=USER, query="frequent flyer")
    assert _texts(found) == ["Ana's frequent flyer number is 77."]


async def test_delete_memory_removes_only_that_memory(memory: PlatformMemoryService, app: str) -> None:
    await memory.add_events_to_memory(
        app_name=app,
        user_id=USER,
        events=[_said("The red suitcase is in the attic."), _said("The blue suitcase is in the garage.")],
    )
    found = await memory.search_memory(app_name=app, user_id=USER, query="suitcase")
    red = next(m for m in found.memories if "red" in m.content.parts[0].text)  # type: ignore[index, operator]
    assert red.id
    await memory.delete_memory(app_name=app, user_id=USER, memory_id=red.id)
    left = await memory.search_memory(app_name=app, user_id=USER, query="suitcase")
    assert _texts(left) == ["The blue suitcase is in the garage."]


# --- top_k and authors -----------------------------------------------------------------------------------


async def test_default_top_k_is_five(default_memory: PlatformMemoryService, app: str) -> None:
    assert default_memory.top_k == 5
    texts = [f"Reminder {n}: water the basil plants on the balcony." for n in range(8)]
    await default_memory.add_events_to_memory(app_name=app, user_id=USER, events=[_said(t) for t in texts])
    found = await default_memory.search_memory(app_name=app, user_id=USER, query="water the basil plants")
    assert len(found.memories) == 5


@pytest.mark.parametrize(
    ("author", "role"),
    [("user", "user"), ("planner", "model"), ("planner", "user"), ("planner", None)],
    ids=["user-as-user", "agent-as-model", "agent-as-user", "agent-without-role"],
)
async def test_events_of_every_author_are_stored(
    memory: PlatformMemoryService, app: str, author: str, role: str | None
) -> None:
    await memory.add_session_to_memory(
        _session(app, USER, "s1", _said("The gate code is zebra-four.", author=author, role=role))
    )
    found = await memory.search_memory(app_name=app, user_id=USER, query="gate code")
    assert [(m.author, m.content.parts[0].text) for m in found.memories] == [  # type: ignore[index]
        (author, "The gate code is zebra-four.")
    ]
