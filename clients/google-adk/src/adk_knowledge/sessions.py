"""`PlatformSessionService`: ADK's `BaseSessionService` on the platform's sessions graph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from knowledge_platform_client import (
    AsyncPlatformClient,
    ConflictError,
    NotFoundError,
    PlatformSettings,
    SessionRecord,
)
from typing_extensions import override

from adk_knowledge._client import _Connected


def event_json(event: Event) -> dict[str, Any]:
    """An ADK event as the platform stores it (field names, JSON values, no empty fields)."""
    return event.model_dump(mode="json", exclude_none=True)


def _session(record: SessionRecord, *, with_events: bool) -> Session:
    session = Session(
        id=record.id,
        app_name=record.app_name,
        user_id=record.user_id,
        state=record.state,
        events=[Event.model_validate(e) for e in record.events] if with_events else [],
        last_update_time=record.last_update_time,
    )
    # the platform's exact revision: the next append is checked against it (optimistic locking)
    session._storage_update_marker = str(record.revision)
    return session


class PlatformSessionService(_Connected, BaseSessionService):
    """Sessions, events and state kept in the platform's Neo4j sessions graph (seed 004).

    Give it an `AsyncPlatformClient`, or `PlatformSettings`, or nothing to read
    `KNOWLEDGE_PLATFORM_URL`, `KNOWLEDGE_PLATFORM_API_KEY` and `KNOWLEDGE_PLATFORM_PROJECT_ID`.
    State prefixes behave as in ADK: `app:` and `user:` keys are shared, `temp:` keys never stored.
    An append to a session that changed since it was read raises `StaleSessionError` and writes nothing.
    """

    def __init__(
        self,
        client: AsyncPlatformClient | None = None,
        *,
        settings: PlatformSettings | None = None,
        **overrides: Any,
    ) -> None:
        _Connected.__init__(self, client, settings, **overrides)

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        try:
            record = await self.sessions.create(app_name, user_id, session_id=session_id, state=state)
        except ConflictError as exc:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from exc
        return _session(record, with_events=True)

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        try:
            record = await self.sessions.get(
                app_name,
                user_id,
                session_id,
                num_recent_events=config.num_recent_events if config else None,
                after_timestamp=config.after_timestamp if config else None,
            )
        except NotFoundError:
            return None
        return _session(record, with_events=True)

    @override
    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """Every session of the user (or of the app), oldest update first as ADK orders them; state is
        merged, events are not loaded."""
        records = await self.sessions.list_all(app_name, user_id)
        records.reverse()  # the platform pages newest first
        return ListSessionsResponse(sessions=[_session(r, with_events=False) for r in records])

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        try:
            await self.sessions.delete(app_name, user_id, session_id)
        except NotFoundError:
            return  # deleting what is not there is done already, as in ADK's own services

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self.sessions.user_state(app_name, user_id)

    async def append_events(self, session: Session, events: Sequence[Event]) -> list[Event]:
        """Append a burst of events (an import, a replay, a turn's events held back) in one request and
        one transaction, as `append_event` would one by one: partial events are left out, `temp:` state
        reaches the session object but not storage, and a stale session raises `StaleSessionError`
        with nothing written. Returns the events stored (at most 1,000 per call)."""
        kept = []
        for event in events:
            if event.partial:
                continue
            self._apply_temp_state(session, event)
            kept.append(self._trim_temp_delta_state(event))
        if not kept:
            return []
        marker = session._storage_update_marker
        try:
            # a session read here carries its revision; one built by hand only its time (then an
            # append is stale when the stored session was updated later, as ADK's marker-less check)
            written = await self.sessions.append_many(
                session.app_name,
                session.user_id,
                session.id,
                [event_json(e) for e in kept],
                expected_revision=int(marker) if marker is not None else None,
                expected_last_update_time=session.last_update_time if marker is None else None,
            )
        except ConflictError as exc:
            raise StaleSessionError(
                "The session was modified in storage since it was loaded; reload it and retry."
            ) from exc
        except NotFoundError as exc:
            raise SessionNotFoundError(f"Session {session.id} not found.") from exc
        for event in kept:
            self._commit_event_to_session(session, event)
        session.last_update_time = written.last_update_time
        session._storage_update_marker = str(written.revision)
        return kept

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        return (await self.append_events(session, [event]))[0]
