"""adk_knowledge.PlatformMemoryService on the real platform, and both services under ADK's Runner."""

from __future__ import annotations

import pytest
from adk_knowledge import PlatformMemoryService, PlatformSessionService
from google.adk.agents.llm_agent import LlmAgent
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.runners import Runner
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from knowledge_platform_client import AsyncPlatformClient, BadRequestError, NotFoundError, PlatformSettings

from tests.clients.conftest import Platform
from tests.clients.openai_model import OpenAIChatModel
from tests.conftest import Tenant
from tests.support.openai_server import FakeOpenAI

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _said(author: str, text: str) -> Event:
    return Event(
        author=author,
        content=types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
    )


def _texts(response) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.content.parts[0].text for m in response.memories]


async def test_session_memory_add_search_and_readd(platform_web: Platform, client_tenant: Tenant) -> None:
    settings = platform_web.settings(client_tenant)
    async with AsyncPlatformClient(settings) as client:
        sessions = PlatformSessionService(client)
        memory = PlatformMemoryService(client, mode="fulltext")
        session = await sessions.create_session(app_name="travel", user_id="ana")
        await sessions.append_event(session, _said("user", "I always book aisle seats on night trains."))
        await sessions.append_event(session, _said("planner", "Noted: aisle seats on night trains."))
        await memory.add_session_to_memory(session)
        found = await memory.search_memory(app_name="travel", user_id="ana", query="aisle seats night trains")
        assert sorted(_texts(found)) == sorted(
            ["I always book aisle seats on night trains.", "Noted: aisle seats on night trains."]
        )
        entry = next(m for m in found.memories if m.author == "user")
        assert entry.content.role == "user" and entry.id and entry.timestamp
        assert entry.custom_metadata["session_id"] == session.id
        # the session grows; adding it again adds only the new event
        await sessions.append_event(session, _said("user", "And a vegetarian meal on night trains."))
        await memory.add_session_to_memory(session)
        again = await memory.search_memory(app_name="travel", user_id="ana", query="night trains")
        assert len(again.memories) == 3
        # nothing for another user or another app
        assert (
            await memory.search_memory(app_name="travel", user_id="bob", query="night trains")
        ).memories == []
        assert (
            await memory.search_memory(app_name="bank", user_id="ana", query="night trains")
        ).memories == []


async def test_events_and_explicit_memories_then_delete(
    platform_web: Platform, client_tenant: Tenant
) -> None:
    async with PlatformMemoryService(
        settings=platform_web.settings(client_tenant), mode="fulltext"
    ) as memory:
        # a session the platform does not store: its events are sent, scoped to its id
        await memory.add_events_to_memory(
            app_name="travel",
            user_id="ana",
            session_id="elsewhere-1",
            events=[_said("user", "My passport expires in March."), _said("user", "")],
        )
        await memory.add_memory(
            app_name="travel",
            user_id="ana",
            memories=[
                MemoryEntry(
                    content=types.Content(parts=[types.Part(text="Ana's frequent flyer number is 77.")]),
                    author="user",
                )
            ],
        )
        found = await memory.search_memory(app_name="travel", user_id="ana", query="passport flyer number")
        assert sorted(_texts(found)) == [
            "Ana's frequent flyer number is 77.",
            "My passport expires in March.",
        ]
        passport = next(m for m in found.memories if "passport" in m.content.parts[0].text)
        # bob cannot delete ana's memory by its id; ana can
        with pytest.raises(NotFoundError):
            await memory.delete_memory(app_name="travel", user_id="bob", memory_id=passport.id)
        await memory.delete_memory(app_name="travel", user_id="ana", memory_id=passport.id)
        left = await memory.search_memory(app_name="travel", user_id="ana", query="passport flyer number")
        assert _texts(left) == ["Ana's frequent flyer number is 77."]
        with pytest.raises(ValueError, match="memory_id"):
            await memory.delete_memory(app_name="travel", user_id="ana")
        with pytest.raises(ValueError, match="no text"):
            await memory.add_memory(
                app_name="travel", user_id="ana", memories=[MemoryEntry(content=types.Content(parts=[]))]
            )
        erased = await memory.forget(app_name="travel", user_id="ana")
        assert erased["memories"] == 1
        assert (await memory.search_memory(app_name="travel", user_id="ana", query="flyer")).memories == []


async def test_memory_search_narrows_by_time(platform_web: Platform, client_tenant: Tenant) -> None:
    """Beyond ADK's arguments, `search_memory` takes the platform's time filters: `when`, `since`,
    `until` and `as_of`, expressions counted from `reference_time`; a time it cannot read is a 400."""
    async with PlatformMemoryService(
        settings=platform_web.settings(client_tenant), mode="fulltext"
    ) as memory:
        await memory.add_memory(
            app_name="travel",
            user_id="tomas",
            memories=[
                MemoryEntry(
                    content=types.Content(parts=[types.Part(text="Tomas booked the Lisbon ferry.")]),
                    author="user",
                    timestamp="2023-05-08T10:00:00Z",
                ),
                MemoryEntry(
                    content=types.Content(parts=[types.Part(text="Tomas cancelled the Lisbon ferry.")]),
                    author="user",
                    timestamp="2024-02-01T10:00:00Z",
                ),
            ],
        )

        async def texts(**filters: str) -> list[str]:
            found = await memory.search_memory(
                app_name="travel", user_id="tomas", query="Lisbon ferry", **filters
            )
            return sorted(_texts(found))

        assert await texts() == ["Tomas booked the Lisbon ferry.", "Tomas cancelled the Lisbon ferry."]
        assert await texts(when="May 2023") == ["Tomas booked the Lisbon ferry."]
        assert await texts(since="2024-01-01") == ["Tomas cancelled the Lisbon ferry."]
        assert await texts(until="2024-01-01") == ["Tomas booked the Lisbon ferry."]
        assert await texts(as_of="last year", reference_time="2024-06-01T00:00:00Z") == [
            "Tomas booked the Lisbon ferry."
        ]
        with pytest.raises(BadRequestError):
            await texts(when="whenever")


async def test_another_project_cannot_reach_memory(
    platform_web: Platform, client_tenant: Tenant, other_tenant: Tenant
) -> None:
    async with PlatformMemoryService(
        settings=platform_web.settings(client_tenant), mode="fulltext"
    ) as memory:
        await memory.add_events_to_memory(
            app_name="a", user_id="u", events=[_said("user", "The vault code is 1234.")]
        )
    trespass = PlatformSettings(
        url=platform_web.base, api_key=other_tenant.write_key.key, project_id=client_tenant.project.id
    )
    async with PlatformMemoryService(settings=trespass, mode="fulltext") as intruder:
        with pytest.raises(NotFoundError):
            await intruder.search_memory(app_name="a", user_id="u", query="vault code")
    async with PlatformMemoryService(settings=platform_web.settings(other_tenant), mode="fulltext") as theirs:
        assert (await theirs.search_memory(app_name="a", user_id="u", query="vault code")).memories == []


async def test_an_adk_agent_runs_on_platform_sessions_and_memory(
    platform_web: Platform, client_tenant: Tenant, fake_openai_server: FakeOpenAI
) -> None:
    """ADK's Runner drives an agent whose sessions and memory are the platform's: a later session
    recalls what an earlier one said, through ADK's own PreloadMemoryTool."""
    fake_openai_server.reset()
    settings = platform_web.settings(client_tenant)
    agent = LlmAgent(
        name="concierge",
        model=OpenAIChatModel(model="fake-chat", base_url=fake_openai_server.base_url),
        instruction="You are a hotel concierge.",
        tools=[PreloadMemoryTool()],
        output_key="last_reply",
    )
    async with AsyncPlatformClient(settings) as client:
        sessions, memory = PlatformSessionService(client), PlatformMemoryService(client)
        runner = Runner(app_name="hotel", agent=agent, session_service=sessions, memory_service=memory)

        async def say(session_id: str, text: str) -> list[Event]:
            message = types.Content(role="user", parts=[types.Part(text=text)])
            return [
                e async for e in runner.run_async(user_id="ana", session_id=session_id, new_message=message)
            ]

        first = await sessions.create_session(app_name="hotel", user_id="ana")
        replies = await say(first.id, "I am allergic to feather pillows.")
        assert any(e.author == "concierge" for e in replies)
        stored = await sessions.get_session(app_name="hotel", user_id="ana", session_id=first.id)
        assert stored is not None
        assert [e.author for e in stored.events] == ["user", "concierge"]
        assert stored.state["last_reply"].startswith("echo:")
        await memory.add_session_to_memory(stored)

        second = await sessions.create_session(app_name="hotel", user_id="ana")
        fake_openai_server.reset()
        await say(second.id, "Which pillows should housekeeping bring?")
        [request] = fake_openai_server.requests_to("/chat/completions")
        prompt = "\n".join(str(m.get("content")) for m in request.body["messages"])
        assert "allergic to feather pillows" in prompt  # recalled from the first session's memory
        listed = await sessions.list_sessions(app_name="hotel", user_id="ana")
        assert [s.id for s in listed.sessions] == [first.id, second.id]
