"""`PlatformMemoryService`: ADK's `BaseMemoryService` on the platform's memory (seed 004)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types
from knowledge_platform_client import AsyncPlatformClient, NotFoundError, PlatformSettings
from typing_extensions import override

from adk_knowledge._client import _Connected
from adk_knowledge.sessions import event_json

SearchMode = Literal["vector", "fulltext", "hybrid", "graph"]


def _text(content: types.Content | None) -> str:
    if content is None or not content.parts:
        return ""
    return "\n".join(part.text for part in content.parts if part.text)


class PlatformMemoryService(_Connected, BaseMemoryService):
    """Memory of an app's users on the platform: session events become memories scoped to app, user
    and session; a search sees only that user's memories in that app; deletes erase what was derived
    from them too.

    Settings as seed 004 names them: `similarity_top_k` (default 5) results at most, by `mode` (or the
    platform's default: hybrid with an embedder); `vector_distance_threshold` is the least vector score
    a result needs (the platform's score, (1 + cosine) / 2; in hybrid mode it floors the vector side;
    None: the platform's MEMORY_MIN_SCORE_VECTOR). A query about nothing stored returns nothing.
    `top_k` is accepted for `similarity_top_k`.
    """

    def __init__(
        self,
        client: AsyncPlatformClient | None = None,
        *,
        settings: PlatformSettings | None = None,
        similarity_top_k: int = 5,
        vector_distance_threshold: float | None = None,
        mode: SearchMode | None = None,
        top_k: int | None = None,
        **overrides: Any,
    ) -> None:
        similarity_top_k = top_k if top_k is not None else similarity_top_k
        if not 1 <= similarity_top_k <= 100:
            raise ValueError("similarity_top_k must be between 1 and 100")
        if vector_distance_threshold is not None and not 0 <= vector_distance_threshold <= 1:
            raise ValueError("vector_distance_threshold is a vector score between 0 and 1")
        _Connected.__init__(self, client, settings, **overrides)
        self.similarity_top_k = similarity_top_k
        self.vector_distance_threshold = vector_distance_threshold
        self.mode = mode

    @property
    def top_k(self) -> int:
        return self.similarity_top_k

    @override
    async def add_session_to_memory(self, session: Session) -> None:
        """Add the session's events; events added before are skipped, so adding a session again as
        it grows adds only its new events. A session the platform does not store is sent whole."""
        try:
            await self.sessions.memory_add_session(session.app_name, session.user_id, session.id)
        except NotFoundError:
            await self.add_events_to_memory(
                app_name=session.app_name,
                user_id=session.user_id,
                events=session.events,
                session_id=session.id,
            )

    @override
    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        payload = [event_json(e) for e in events if _text(e.content).strip()]
        if payload:
            await self.sessions.memory_add_events(app_name, user_id, payload, session_id=session_id)

    @override
    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        items = []
        for position, entry in enumerate(memories):
            text = _text(entry.content)
            if not text.strip():
                raise ValueError(f"memories[{position}] has no text")
            item: dict[str, Any] = {"text": text}
            if entry.author:
                item["author"] = entry.author
            if entry.timestamp:
                item["timestamp"] = entry.timestamp
            items.append(item)
        if items:
            await self.sessions.memory_add_texts(app_name, user_id, items)

    @override
    async def search_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        since: str | None = None,
        until: str | None = None,
        when: str | None = None,
        reference_time: str | None = None,
        as_of: str | None = None,
    ) -> SearchMemoryResponse:
        """The user's memories in the app for `query`. Beyond ADK's arguments (a tool of the app may
        pass them): `since`, `until`, `when` and `as_of` narrow by time, as ISO-8601 or expressions
        ("May 2023", "last 30 days") counted from `reference_time` (default now); a time the platform
        cannot read is `BadRequestError`."""
        if not query.strip():
            return SearchMemoryResponse()
        found = await self.sessions.memory_search(
            app_name,
            user_id,
            query,
            top_k=self.similarity_top_k,
            mode=self.mode,
            min_score=self.vector_distance_threshold if self.mode != "fulltext" else None,
            since=since,
            until=until,
            when=when,
            reference_time=reference_time,
            as_of=as_of,
        )
        return SearchMemoryResponse(
            memories=[
                MemoryEntry(
                    id=m.id,
                    content=types.Content(
                        role="user" if m.author in (None, "user") else "model",
                        parts=[types.Part(text=m.text)],
                    ),
                    author=m.author,
                    timestamp=m.timestamp,
                    custom_metadata={"session_id": m.session_id, "event_id": m.event_id, "score": m.score},
                )
                for m in found
            ]
        )

    @override
    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        """Delete one memory by the id `search_memory` gave; an id of another user or app is
        `NotFoundError` (nothing is deleted). Use `forget` to erase a whole scope."""
        if not memory_id:
            raise ValueError("memory_id is required; use forget() to erase a user's memory")
        await self.sessions.memory_delete(app_name, user_id, memory_id)

    async def forget(self, *, app_name: str, user_id: str, session_id: str | None = None) -> dict[str, int]:
        """Erase the user's memory in the app (or one session's) and everything derived from it."""
        return await self.sessions.memory_forget(app_name, user_id, session_id=session_id)
