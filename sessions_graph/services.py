"""Sessions (seed 004): create, append events under optimistic locking, delete.

State scopes follow ADK: `app:` keys live on the app's `AppState`, `user:` keys on the user's
`UserState` (both merged into a session's state when it is read), `temp:` keys are never stored,
every other key is session state whose every change is a `WROTE_STATE` edge from the event.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from neo4j import ManagedTransaction
from neo4j.exceptions import ConstraintError

from core import graph
from core.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge
from core.graph.schema import ensure_schema
from core.graph.transfer import GraphOwner, module_labels
from sessions_graph import cypher
from sessions_graph import nodes as sessions_nodes
from sessions_graph.selectors import session_record

APP_PREFIX, USER_PREFIX, TEMP_PREFIX = "app:", "user:", "temp:"
MAX_EVENT_BYTES = 1024 * 1024
MAX_STATE_BYTES = 1024 * 1024


def now_ms() -> int:
    return int(time.time() * 1000)


def _json(value: Any, *, what: str) -> str:
    """Strict JSON (no NaN or Infinity): anything else is not a state value."""
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not JSON-serialisable: {exc}", details={"field": what}) from exc


def _split_state(delta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(session, app, user) parts of a state delta; `temp:` keys are dropped."""
    session: dict[str, Any] = {}
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    for key, value in delta.items():
        if key.startswith(TEMP_PREFIX):
            continue
        if key.startswith(APP_PREFIX):
            app[key[len(APP_PREFIX) :]] = value
        elif key.startswith(USER_PREFIX):
            user[key[len(USER_PREFIX) :]] = value
        else:
            session[key] = value
    return session, app, user


def session_create(
    *,
    project_id: str,
    app_name: str,
    user_id: str,
    session_id: str | None = None,
    state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A new session; its initial state is split by scope like an event's delta (409 if the id is taken)."""
    session_state, app_delta, user_delta = _split_state(state or {})
    state_json = _json(session_state, what="state")
    if len(state_json.encode()) > MAX_STATE_BYTES:
        raise PayloadTooLarge(f"state is larger than {MAX_STATE_BYTES} bytes")
    session_id = session_id or str(uuid.uuid4())
    now = time.time()  # ADK's float seconds: a new session's last_update_time
    ensure_schema()

    def work(tx: ManagedTransaction) -> dict[str, Any]:
        # the shared state first, so the new session is read back with it in the create itself
        if app_delta or user_delta:
            _shadow_update(tx, project_id, app_name, user_id, app_delta, user_delta, now_ms())
        row = tx.run(
            cypher.SESSION_CREATE,
            uid=str(uuid.uuid4()),
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            state_json=state_json,
            now=now,
        ).single()
        assert row is not None
        return dict(row)

    try:
        row = graph.write_tx(work)
    except ConstraintError as exc:
        raise Conflict(f"session {session_id!r} already exists", details={"session_id": session_id}) from exc
    # as a read of the new session answers: no events yet
    return {
        **session_record(row["session"], row["app_state"], row["user_state"]),
        "events": [],
        "next_events_cursor": None,
    }


def _shadow_update(
    tx: ManagedTransaction,
    project_id: str,
    app_name: str,
    user_id: str,
    app_delta: dict[str, Any],
    user_delta: dict[str, Any],
    now: int,
) -> None:
    row = tx.run(cypher.SHADOW_LOCK, project_id=project_id, app_name=app_name, user_id=user_id).single()
    assert row is not None
    app_state = {**json.loads(row["app_state"] or "{}"), **app_delta}
    user_state = {**json.loads(row["user_state"] or "{}"), **user_delta}
    tx.run(
        cypher.SHADOW_WRITE,
        project_id=project_id,
        app_name=app_name,
        user_id=user_id,
        app_state=_json(app_state, what="app state"),
        user_state=_json(user_state, what="user state"),
        now=now,
    ).consume()


def event_text(content: dict[str, Any] | None) -> str:
    parts = (content or {}).get("parts") or []
    return "\n".join(str(p["text"]) for p in parts if isinstance(p, dict) and p.get("text"))


def _tool_parts(content: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    for part in (content or {}).get("parts") or []:
        if not isinstance(part, dict):
            continue
        call = part.get("function_call") or part.get("functionCall")
        if isinstance(call, dict) and call.get("name"):
            calls.append(
                {
                    "call_id": call.get("id"),
                    "name": str(call["name"]),
                    "parameters_json": _json(call.get("args") or {}, what="function_call.args"),
                }
            )
        answer = part.get("function_response") or part.get("functionResponse")
        if isinstance(answer, dict) and answer.get("name"):
            response = answer.get("response") or {}
            failed = isinstance(response, dict) and "error" in response
            responses.append(
                {
                    "call_id": answer.get("id"),
                    "name": str(answer["name"]),
                    "response_json": _json(response, what="function_response.response"),
                    "error": failed,
                    # seed 004's ToolCall.error_msg: the response's `error`, as text
                    "error_msg": _error_text(response["error"]) if failed else None,
                }
            )
    return calls, responses


def _error_text(error: Any) -> str:
    text = error if isinstance(error, str) else _json(error, what="function_response.response.error")
    return text[:4000]


@dataclass(frozen=True)
class _Append:
    """An event checked and taken apart for storing: what goes on the Event node, the state delta by
    scope, and its tool calls and responses."""

    event: dict[str, Any]
    stamped: bool  # the event came without a timestamp: it is given one under the session lock
    content: dict[str, Any] | None
    stored_actions: dict[str, Any]
    stored_event: dict[str, Any]
    session_delta: dict[str, Any]
    app_delta: dict[str, Any]
    user_delta: dict[str, Any]
    calls: list[dict[str, Any]]
    responses: list[dict[str, Any]]


def _append_checked(event: dict[str, Any]) -> _Append:
    """Validate an ADK event (id and timestamp defaulted) and split it; a bad one is InvalidInput."""
    event = dict(event)
    event.setdefault("id", str(uuid.uuid4()))
    timestamp = event.get("timestamp")
    if timestamp is None:
        event["timestamp"] = time.time()  # for now: `_stamped` sets it once the session is locked
    elif (
        not isinstance(timestamp, int | float) or isinstance(timestamp, bool) or not math.isfinite(timestamp)
    ):
        raise InvalidInput("event.timestamp must be a number of seconds", details={"field": "timestamp"})
    event_json = _json(event, what="event")
    if len(event_json.encode()) > MAX_EVENT_BYTES:
        raise PayloadTooLarge(f"an event may have at most {MAX_EVENT_BYTES} bytes of JSON")
    content = event.get("content")
    actions = event.get("actions") or {}
    if content is not None and not isinstance(content, dict):
        raise InvalidInput("event.content must be an object", details={"field": "content"})
    if not isinstance(actions, dict):
        raise InvalidInput("event.actions must be an object", details={"field": "actions"})
    delta = actions.get("state_delta") or actions.get("stateDelta") or {}
    if not isinstance(delta, dict):
        raise InvalidInput("event.actions.state_delta must be an object", details={"field": "state_delta"})
    session_delta, app_delta, user_delta = _split_state(delta)
    calls, responses = _tool_parts(content)
    # temp: keys are not stored anywhere, not even inside the stored event
    stored_actions = {
        **actions,
        "state_delta": {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)},
    }
    stored_event = {**event, "actions": stored_actions} if event.get("actions") is not None else event
    return _Append(
        event,
        timestamp is None,
        content,
        stored_actions,
        stored_event,
        session_delta,
        app_delta,
        user_delta,
        calls,
        responses,
    )


def _stamped(plan: _Append, at: float) -> _Append:
    """The plan of an event that came without a timestamp, stamped `at`."""
    if not plan.stamped:
        return plan
    event = {**plan.event, "timestamp": at}
    stored_event = {**plan.stored_event, "timestamp": at}
    return replace(plan, event=event, stored_event=stored_event)


def _state_writes(state: dict[str, Any], delta: dict[str, Any]) -> list[dict[str, Any]]:
    """The WROTE_STATE rows of a session delta (each key's value before and after); `state` is
    updated in place."""
    writes = []
    for key, value in delta.items():
        before = _json(state[key], what=key) if key in state else None
        writes.append({"key": key, "from_json": before, "to_json": _json(value, what=key)})
        state[key] = value
    return writes


def events_append(
    *,
    project_id: str,
    app_name: str,
    user_id: str,
    session_id: str,
    events: list[dict[str, Any]],
    expected_revision: int | None = None,
    expected_last_update_time: float | None = None,
) -> dict[str, Any]:
    """Append `events` in order (ADK's Event as JSON) and apply their state deltas, in one transaction:
    all of them or none. The session's `last_update_time` becomes the last event's timestamp, as in
    ADK. A stale writer is 409 and nothing is written: with `expected_revision`, when the session's
    revision is another; with `expected_last_update_time` (a writer that knows only the time it read,
    as ADK's marker-less sessions), when the session was updated later than that."""
    plans = [_append_checked(event) for event in events]
    app_delta: dict[str, Any] = {}
    user_delta: dict[str, Any] = {}
    for plan in plans:
        app_delta.update(plan.app_delta)
        user_delta.update(plan.user_delta)
    key: dict[str, Any] = {
        "project_id": project_id,
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
    }

    def work(tx: ManagedTransaction) -> dict[str, Any]:
        row = tx.run(cypher.SESSION_LOCK, **key).single()
        if row is None:
            raise NotFound("session not found")
        _check_fresh(row, expected_revision, expected_last_update_time)
        state = json.loads(row["state_json"] or "{}")
        seq = int(row["event_count"] or 0)
        # events sent without a time are stamped now, under the lock, and never before an event the
        # session already holds: they come last, in the order they were appended
        at = max(time.time(), float(row["max_event_time"] or 0.0))
        stamped = []
        for plan in plans:
            stamped.append(_stamped(plan, at))
            at = max(at, float(stamped[-1].event["timestamp"]))
        rows = []
        for plan in stamped:
            seq += 1
            writes = _state_writes(state, plan.session_delta)
            rows.append(
                {
                    "event": _event_row(plan, seq),
                    "writes": writes,
                    "calls": plan.calls,
                    "responses": plan.responses,
                }
            )
        tx.run(
            cypher.EVENTS_APPEND,
            uid=row["uid"],
            project_id=project_id,
            events=rows,
            state_json=_json(state, what="state"),
        ).consume()
        if app_delta or user_delta:
            _shadow_update(tx, project_id, app_name, user_id, app_delta, user_delta, now_ms())
        return {
            "events": [plan.stored_event for plan in stamped],
            "last_update_time": float(stamped[-1].event["timestamp"]),
            "revision": int(row["revision"] or 0) + len(plans),
            "seq": seq,
        }

    return graph.write_tx(work)


def _event_row(plan: _Append, seq: int) -> dict[str, Any]:
    """The Event node's properties of a checked event at position `seq` of its session."""
    return {
        "event_id": str(plan.event["id"]),
        "seq": seq,
        "author": str(plan.event.get("author") or ""),
        "timestamp": float(plan.event["timestamp"]),
        "invocation_id": plan.event.get("invocation_id"),
        "content_json": _json(plan.content, what="content"),
        "actions_json": _json(plan.stored_actions, what="actions"),
        "event_json": _json(plan.stored_event, what="event"),
        "text": event_text(plan.content),
    }


def _check_fresh(row: Any, expected_revision: int | None, expected_last_update_time: float | None) -> None:
    stale = (expected_revision is not None and row["revision"] != expected_revision) or (
        expected_last_update_time is not None and row["last_update_time"] > expected_last_update_time
    )
    if stale:
        raise Conflict(
            "the session changed since it was read (stale revision); read it again and retry",
            details={
                "revision": row["revision"],
                "last_update_time": row["last_update_time"],
                "expected_revision": expected_revision,
                "expected_last_update_time": expected_last_update_time,
            },
        )


def session_delete(*, project_id: str, app_name: str, user_id: str, session_id: str) -> None:
    rows = graph.write(
        cypher.SESSION_DELETE,
        project_id=project_id,
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
    )
    if not rows:
        raise NotFound("session not found")


def user_erase(*, project_id: str, user_id: str, batch: int) -> dict[str, int]:
    """Delete every session of the user in the project (in batches of `batch`, with their events and
    tool calls), then the user's state and user node. Returns what went, by kind."""
    counts = {"sessions": 0, "events": 0, "tool_calls": 0}
    while True:
        row = graph.write(cypher.USER_SESSIONS_DELETE, project_id=project_id, user_id=user_id, batch=batch)[0]
        for key in counts:
            counts[key] += int(row[key] or 0)
        if row["sessions"] < batch:
            break
    row = graph.write(cypher.USER_STATE_DELETE, project_id=project_id, user_id=user_id)[0]
    return {**counts, "user_states": int(row["user_states"]), "users": int(row["users"])}


# --- export and import (portability/) ----------------------------------------------------------------

GRAPH = GraphOwner(app="sessions_graph", labels=module_labels(sessions_nodes))
