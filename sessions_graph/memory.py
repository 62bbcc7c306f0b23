"""Memory from sessions (seed 004's memory service) on the memory app's machinery.

A session's memory chunks are the memory app's `Memory` nodes in the scope application = app,
user = user, thread = session: text, author (`author_name`), timestamp, event id (`message_id`),
session id (`thread_id`), app, user and embedding. So they are searched by the same vector /
fulltext / hybrid search with exact scope filters, derive facts and summaries, and are erased by the
same `:forget`. Adding a session again adds only the events not added before.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from core import graph
from core.errors import InvalidInput, NotFound
from memory import selectors as memory_selectors
from memory import services as memory_services
from memory.dto import MessageFilters, MessageInput
from memory.scope import Scope
from sessions_graph import cypher
from sessions_graph.services import event_text


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _role(event: dict[str, Any]) -> str:
    """ADK's `user` author (or a content role of `user`) is the user; any agent is the assistant."""
    content = event.get("content") or {}
    if event.get("author") == "user" or (isinstance(content, dict) and content.get("role") == "user"):
        return "user"
    return "assistant"


def _scope(app_name: str, user_id: str, session_id: str | None) -> Scope:
    return Scope(application_id=app_name, user_id=user_id, thread_id=session_id)


def memory_add_events(
    *, project_id: str, app_name: str, user_id: str, events: list[dict[str, Any]], session_id: str | None
) -> dict[str, int]:
    """Store the text of `events` as memories of the session (events already stored are skipped)."""
    candidates = []
    for position, event in enumerate(events):
        if not isinstance(event, dict):
            raise InvalidInput(
                f"events[{position}] must be an object", details={"field": f"events[{position}]"}
            )
        text = event_text(event.get("content") if isinstance(event.get("content"), dict) else None)
        timestamp = event.get("timestamp")
        if timestamp is not None and (not isinstance(timestamp, int | float) or isinstance(timestamp, bool)):
            raise InvalidInput(
                f"events[{position}].timestamp must be seconds", details={"field": "timestamp"}
            )
        if text.strip():
            candidates.append((event, text))
    ids = [str(e["id"]) for e, _t in candidates if e.get("id")]
    present: set[str] = set()
    if ids and session_id:
        rows = graph.read(
            cypher.MEMORY_EVENT_IDS,
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            event_ids=ids,
        )
        present = set(rows[0]["present"]) if rows else set()
    fresh = [(e, t) for e, t in candidates if not e.get("id") or str(e["id"]) not in present]
    skipped = len(events) - len(fresh)
    if not fresh:
        return {"stored": 0, "skipped": skipped}
    messages = [
        MessageInput(
            role=_role(event),
            text=text,
            message_id=str(event["id"]) if event.get("id") else None,
            author_name=str(event.get("author") or "") or None,
            timestamp=_iso(event.get("timestamp")),
        )
        for event, text in fresh
    ]
    result = memory_services.memories_store(
        project_id=project_id, scope=_scope(app_name, user_id, session_id), messages=messages
    )
    return {"stored": len(result.stored), "skipped": skipped + len(result.skipped)}


def memory_add_session(*, project_id: str, app_name: str, user_id: str, session_id: str) -> dict[str, int]:
    rows = graph.read(
        cypher.SESSION_EVENTS_ALL,
        project_id=project_id,
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
    )
    exists = graph.read(
        "MATCH (s:Session {project_id: $project_id, app_name: $app_name, user_id: $user_id, "
        "session_id: $session_id}) RETURN s.id AS uid",
        project_id=project_id,
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
    )
    if not exists:
        raise NotFound("session not found")
    events = [json.loads(r["event_json"]) for r in rows]
    return memory_add_events(
        project_id=project_id, app_name=app_name, user_id=user_id, events=events, session_id=session_id
    )


def memory_add_texts(
    *, project_id: str, app_name: str, user_id: str, memories: list[dict[str, Any]]
) -> dict[str, int]:
    messages = []
    for position, item in enumerate(memories):
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput(f"memories[{position}].text must be non-empty text", details={"field": "text"})
        messages.append(
            MessageInput(
                role="user" if item.get("author") in (None, "user") else "assistant",
                text=text,
                author_name=item.get("author"),
                timestamp=item.get("timestamp"),
            )
        )
    result = memory_services.memories_store(
        project_id=project_id, scope=_scope(app_name, user_id, None), messages=messages
    )
    return {"stored": len(result.stored), "skipped": len(result.skipped)}


def memory_search(
    *,
    project_id: str,
    app_name: str,
    user_id: str,
    query: str,
    top_k: int,
    mode: str | None,
    min_score: float | None = None,
    filters: MessageFilters | None = None,
) -> list[dict[str, Any]]:
    """The user's memories in this app (every session) closest to `query`, narrowed by `filters`
    (time, author, as_of: memory.selectors.message_filters)."""
    found = memory_selectors.memories_search(
        project_id=project_id,
        scope=Scope(application_id=app_name, user_id=user_id),
        query=query,
        top_k=top_k,
        mode=mode,
        depth="messages",
        min_score=min_score,
        filters=filters,
    )
    return [
        {
            "id": item.id,
            "text": item.text,
            "author": item.metadata.get("author_name") or item.role,
            "timestamp": item.timestamp,
            "session_id": item.scope.get("thread_id"),
            "event_id": item.metadata.get("message_id"),
            "score": item.score,
        }
        for item in found.items
    ]


def memory_delete(
    *, project_id: str, app_name: str, user_id: str, session_id: str | None, requested_by: str
) -> dict[str, int]:
    scope = Scope(application_id=app_name, user_id=user_id, thread_id=session_id)
    return dict(
        memory_services.memories_forget(project_id=project_id, scope=scope, requested_by=requested_by).erased
    )


def memory_delete_one(
    *, project_id: str, app_name: str, user_id: str, memory_id: str, requested_by: str
) -> dict[str, int]:
    """Delete one memory of this app and user (another scope's id is not found) and what was derived
    only from it."""
    found = graph.read(
        cypher.MEMORY_IN_SCOPE, project_id=project_id, app_name=app_name, user_id=user_id, memory_id=memory_id
    )
    if not found:
        raise NotFound("no such memory for this app and user")
    return memory_services.memory_delete(
        project_id=project_id, memory_id=memory_id, requested_by=requested_by
    )
