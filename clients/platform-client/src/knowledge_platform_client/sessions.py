"""The sessions graph API (ADK-style sessions, events, state and session memory) for one app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic import Field

from knowledge_platform_client._models import ApiModel
from knowledge_platform_client.http import AsyncPlatformClient, path_id

PAGE = 10_000  # the platform's largest page: a user's 10,000 sessions in one request
MEMORY_BATCH = 1_000  # the platform's largest memory batch


class SessionRecord(ApiModel):
    """A stored session. Times are ADK's float seconds: `last_update_time` is the latest event's
    timestamp (the creation time before any); `revision` grows by one with every append (the
    optimistic lock's value); `events` is empty in listings and holds only the asked-for events
    otherwise."""

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any] = Field(default_factory=dict)
    created_at: float
    last_update_time: float
    revision: int = 0
    event_count: int = 0
    events: list[dict[str, Any]] = Field(default_factory=list)


class AppendResult(ApiModel):
    event: dict[str, Any]
    last_update_time: float
    revision: int
    seq: int


class AppendManyResult(ApiModel):
    events: list[dict[str, Any]]
    last_update_time: float
    revision: int
    seq: int


class SessionMemory(ApiModel):
    id: str
    text: str
    author: str | None = None
    timestamp: str | None = None
    session_id: str | None = None
    event_id: str | None = None
    score: float


class SessionsClient:
    """Calls under `/projects/{project}/apps/{app}/`: one instance serves every app and user."""

    def __init__(self, client: AsyncPlatformClient) -> None:
        self.client = client

    def _user(self, app_name: str, user_id: str, *tail: str) -> str:
        return self.client.project_path("apps", path_id(app_name), "users", path_id(user_id), *tail)

    def _session(self, app_name: str, user_id: str, session_id: str, *tail: str) -> str:
        return self._user(app_name, user_id, "sessions", path_id(session_id), *tail)

    async def create(
        self,
        app_name: str,
        user_id: str,
        *,
        session_id: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> SessionRecord:
        body: dict[str, Any] = {}
        if session_id is not None:
            body["session_id"] = session_id
        if state:
            body["state"] = state
        data = await self.client.request("POST", self._user(app_name, user_id, "sessions"), json=body)
        return SessionRecord.model_validate(data)

    async def get(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        num_recent_events: int | None = None,
        after_timestamp: float | None = None,
    ) -> SessionRecord:
        """The session with every asked-for event: the platform sends events in pages, followed here."""
        path = self._session(app_name, user_id, session_id)
        params: dict[str, Any] = {"num_recent_events": num_recent_events, "after_timestamp": after_timestamp}
        data = await self.client.request("GET", path, params=params)
        events = list(data.get("events") or [])
        cursor = data.get("next_events_cursor")
        while cursor is not None:
            page = await self.client.request("GET", path, params={**params, "events_cursor": cursor})
            events.extend(page.get("events") or [])
            cursor = page.get("next_events_cursor")
        return SessionRecord.model_validate({**data, "events": events})

    async def _pages(self, path: str, page_size: int) -> AsyncIterator[list[SessionRecord]]:
        cursor: str | None = None
        while True:
            data = await self.client.request("GET", path, params={"limit": page_size, "cursor": cursor})
            yield [SessionRecord.model_validate(s) for s in data["sessions"]]
            cursor = data.get("next_cursor")
            if not cursor:
                return

    async def list_all(
        self, app_name: str, user_id: str | None = None, *, page_size: int = PAGE
    ) -> list[SessionRecord]:
        """Every session of the user (or of every user of the app), most recently updated first."""
        if user_id is None:
            path = self.client.project_path("apps", path_id(app_name), "sessions")
        else:
            path = self._user(app_name, user_id, "sessions")
        found: list[SessionRecord] = []
        async for page in self._pages(path, page_size):
            found.extend(page)
        return found

    async def delete(self, app_name: str, user_id: str, session_id: str) -> None:
        await self.client.request("DELETE", self._session(app_name, user_id, session_id))

    async def append(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event: dict[str, Any],
        *,
        expected_revision: int | None = None,
        expected_last_update_time: float | None = None,
    ) -> AppendResult:
        """Append one event. With `expected_revision` (the revision the session was read at), a session
        changed since raises `ConflictError` and nothing is written; with `expected_last_update_time`,
        a session updated later than that time does."""
        data = await self._post_events(
            app_name, user_id, session_id, {"event": event}, expected_revision, expected_last_update_time
        )
        return AppendResult.model_validate(data)

    async def append_many(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        events: Sequence[dict[str, Any]],
        *,
        expected_revision: int | None = None,
        expected_last_update_time: float | None = None,
    ) -> AppendManyResult:
        """Append a burst of events in order, in one request and one transaction: all of them or none
        (a stale revision raises `ConflictError`). At most 1,000 per call."""
        data = await self._post_events(
            app_name,
            user_id,
            session_id,
            {"events": list(events)},
            expected_revision,
            expected_last_update_time,
        )
        return AppendManyResult.model_validate(data)

    async def _post_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        body: dict[str, Any],
        expected_revision: int | None,
        expected_last_update_time: float | None,
    ) -> Any:
        if expected_revision is not None:
            body["expected_revision"] = expected_revision
        if expected_last_update_time is not None:
            body["expected_last_update_time"] = expected_last_update_time
        return await self.client.request(
            "POST", self._session(app_name, user_id, session_id, "events"), json=body
        )

    async def user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        data = await self.client.request("GET", self._user(app_name, user_id, "state"))
        return dict(data["state"])

    # --- memory -------------------------------------------------------------------------------------

    async def memory_add_session(self, app_name: str, user_id: str, session_id: str) -> dict[str, int]:
        """Add a stored session's events to memory (events added before are skipped)."""
        data = await self.client.request(
            "POST", self._user(app_name, user_id, "memory"), json={"session_id": session_id}
        )
        return dict(data)

    async def memory_add_events(
        self, app_name: str, user_id: str, events: Sequence[dict[str, Any]], *, session_id: str | None = None
    ) -> dict[str, int]:
        totals = {"stored": 0, "skipped": 0}
        for start in range(0, len(events), MEMORY_BATCH):
            body: dict[str, Any] = {"events": list(events[start : start + MEMORY_BATCH])}
            if session_id is not None:
                body["session_id"] = session_id
            data = await self.client.request("POST", self._user(app_name, user_id, "memory"), json=body)
            totals["stored"] += int(data["stored"])
            totals["skipped"] += int(data["skipped"])
        return totals

    async def memory_add_texts(
        self, app_name: str, user_id: str, memories: Sequence[dict[str, Any]]
    ) -> dict[str, int]:
        """Free memories `{text, author?, timestamp?}` of the user, in no session."""
        totals = {"stored": 0, "skipped": 0}
        for start in range(0, len(memories), MEMORY_BATCH):
            body = {"memories": list(memories[start : start + MEMORY_BATCH])}
            data = await self.client.request("POST", self._user(app_name, user_id, "memory"), json=body)
            totals["stored"] += int(data["stored"])
            totals["skipped"] += int(data["skipped"])
        return totals

    async def memory_search(
        self,
        app_name: str,
        user_id: str,
        query: str,
        *,
        top_k: int = 5,
        mode: str | None = None,
        min_score: float | None = None,
        since: str | None = None,
        until: str | None = None,
        when: str | None = None,
        reference_time: str | None = None,
        author: str | None = None,
        as_of: str | None = None,
    ) -> list[SessionMemory]:
        """The user's memories in the app closest to `query`: at most `top_k`, none scoring below
        `min_score` (the platform's floor for the mode when None). `since`, `until`, `when` and
        `as_of` take ISO-8601 or expressions ("May 2023", "last 30 days") counted from
        `reference_time` (default now); `author` keeps one event author's memories."""
        body: dict[str, Any] = {"query": query, "top_k": top_k}
        optional = {
            "mode": mode or None,
            "min_score": min_score,
            "since": since,
            "until": until,
            "when": when,
            "reference_time": reference_time,
            "author": author,
            "as_of": as_of,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        data = await self.client.request("POST", self._user(app_name, user_id, "memory", "search"), json=body)
        return [SessionMemory.model_validate(m) for m in data["memories"]]

    async def memory_delete(self, app_name: str, user_id: str, memory_id: str) -> dict[str, int]:
        data = await self.client.request(
            "DELETE", self._user(app_name, user_id, "memory", path_id(memory_id))
        )
        return dict(data["erased"])

    async def memory_forget(
        self, app_name: str, user_id: str, *, session_id: str | None = None
    ) -> dict[str, int]:
        """Erase the user's memory in the app (or only one session's), with what was derived from it."""
        data = await self.client.request(
            "DELETE", self._user(app_name, user_id, "memory"), params={"session_id": session_id}
        )
        return dict(data["erased"])
