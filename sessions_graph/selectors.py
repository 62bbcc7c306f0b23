"""Reads of the sessions graph: sessions with their recent events, listings, timelines, tool usage
and state lineage. Event reads go through the (session_uid, seq) and (session_uid, timestamp)
indexes: no read scans a whole session."""

from __future__ import annotations

import json
from typing import Any

from core import graph
from core.errors import NotFound
from sessions_graph import cypher

APP_PREFIX, USER_PREFIX = "app:", "user:"


def session_record(row: dict[str, Any], app_state: str | None, user_state: str | None) -> dict[str, Any]:
    """A session as the API answers it: its own state with the app and user state merged in."""
    state = json.loads(row["state_json"] or "{}")
    state.update({f"{APP_PREFIX}{k}": v for k, v in json.loads(app_state or "{}").items()})
    state.update({f"{USER_PREFIX}{k}": v for k, v in json.loads(user_state or "{}").items()})
    return {
        "id": row["session_id"],
        "app_name": row["app_name"],
        "user_id": row["user_id"],
        "state": state,
        "created_at": row["created_at"],
        "last_update_time": row["last_update_time"],
        "revision": row["revision"] or 0,
        "event_count": row["event_count"] or 0,
    }


def _uid(*, project_id: str, app_name: str, user_id: str, session_id: str) -> tuple[str, dict[str, Any]]:
    rows = graph.read(
        cypher.SESSION_GET, project_id=project_id, app_name=app_name, user_id=user_id, session_id=session_id
    )
    if not rows:
        raise NotFound("session not found")
    return rows[0]["session"]["id"], rows[0]["session"]


def session_get(
    *,
    project_id: str,
    app_name: str,
    user_id: str,
    session_id: str,
    num_recent_events: int | None = None,
    after_timestamp: float | None = None,
    with_events: bool = True,
    events_limit: int | None = None,
    events_after: tuple[float, int] | None = None,
) -> dict[str, Any] | None:
    """The session with its state (app and user state merged in) and the asked-for events in ADK's
    order (timestamp, ties in append order): the last `num_recent_events` (0: none), those at or after
    `after_timestamp`, or all; at most `events_limit` of them after the `events_after` cursor
    (timestamp, seq), with `next_events_cursor` (the last one's) when more follow. One read."""
    key = {"project_id": project_id, "app_name": app_name, "user_id": user_id, "session_id": session_id}
    page = {
        "floor": after_timestamp if after_timestamp is not None else float("-inf"),
        "c_ts": events_after[0] if events_after else None,
        "c_seq": events_after[1] if events_after else None,
        # one more than the page, to know whether more follow; every event when no limit is given
        "limit": (events_limit if events_limit is not None else 2**62) + 1,
    }
    if not with_events or num_recent_events == 0:
        rows = graph.read(cypher.SESSION_READ, **key)
    elif num_recent_events is not None:
        rows = graph.read(cypher.SESSION_READ_RECENT, recent=num_recent_events, **key, **page)
    else:
        rows = graph.read(cypher.SESSION_READ_EVENTS, **key, **page)
    if not rows:
        return None
    session = session_record(rows[0]["session"], rows[0]["app_state"], rows[0]["user_state"])
    if not with_events:
        return session
    events = rows[0]["events"]
    more = events_limit is not None and len(events) > events_limit
    events = events[:events_limit] if more else events
    session["events"] = [json.loads(event_json) for event_json, _ts, _seq in events]
    session["next_events_cursor"] = (events[-1][1], events[-1][2]) if more else None
    return session


def session_list(
    *, project_id: str, app_name: str, user_id: str, limit: int, before: tuple[float, str] | None = None
) -> tuple[list[dict[str, Any]], tuple[float, str] | None]:
    """A page of the user's sessions, most recently updated first, without events; and the cursor of
    the next page."""
    rows = graph.read_column(
        cypher.SESSIONS_LIST,
        "rows",
        project_id=project_id,
        app_name=app_name,
        user_id=user_id,
        before=before[0] if before else None,
        before_id=before[1] if before else None,
        limit=limit + 1,
    )[0]
    shadow = graph.read(cypher.SHADOW_STATE, project_id=project_id, app_name=app_name, user_id=user_id)[0]
    shared = {f"{APP_PREFIX}{k}": v for k, v in json.loads(shadow["app_state"] or "{}").items()}
    shared.update({f"{USER_PREFIX}{k}": v for k, v in json.loads(shadow["user_state"] or "{}").items()})
    sessions = []
    for session_id, state_json, created_at, last_update_time, revision, event_count in rows[:limit]:
        state = json.loads(state_json or "{}")
        if shared:
            state.update(shared)
        sessions.append(
            {
                "id": session_id,
                "app_name": app_name,
                "user_id": user_id,
                "state": state,
                "created_at": created_at,
                "last_update_time": last_update_time,
                "revision": revision or 0,
                "event_count": event_count or 0,
            }
        )
    cursor = None
    if len(rows) > limit:
        last = sessions[-1]
        cursor = (last["last_update_time"], last["id"])
    return sessions, cursor


def app_session_list(
    *, project_id: str, app_name: str, limit: int, before: tuple[float, str, str] | None = None
) -> tuple[list[dict[str, Any]], tuple[float, str, str] | None]:
    """A page of every user's sessions of the app, most recently updated first, without events (state
    merged with the app's and each user's shadow state); and the cursor of the next page."""
    rows = graph.read_column(
        cypher.SESSIONS_LIST_APP,
        "rows",
        project_id=project_id,
        app_name=app_name,
        before=before[0] if before else None,
        before_user=before[1] if before else None,
        before_id=before[2] if before else None,
        limit=limit + 1,
    )[0]
    app_state = graph.read(cypher.APP_STATE, project_id=project_id, app_name=app_name)[0]["app_state"]
    shared = {f"{APP_PREFIX}{k}": v for k, v in json.loads(app_state or "{}").items()}
    sessions = []
    for (
        user_id,
        session_id,
        state_json,
        created_at,
        last_update_time,
        revision,
        event_count,
        user_state,
    ) in rows[:limit]:
        state = json.loads(state_json or "{}")
        state.update(shared)
        state.update({f"{USER_PREFIX}{k}": v for k, v in json.loads(user_state or "{}").items()})
        sessions.append(
            {
                "id": session_id,
                "app_name": app_name,
                "user_id": user_id,
                "state": state,
                "created_at": created_at,
                "last_update_time": last_update_time,
                "revision": revision or 0,
                "event_count": event_count or 0,
            }
        )
    cursor = None
    if len(rows) > limit:
        last = sessions[-1]
        cursor = (last["last_update_time"], last["user_id"], last["id"])
    return sessions, cursor


def user_state(*, project_id: str, app_name: str, user_id: str) -> dict[str, Any]:
    """The user's shadow state in the app, keys without the `user:` prefix ({} when none)."""
    shadow = graph.read(cypher.SHADOW_STATE, project_id=project_id, app_name=app_name, user_id=user_id)[0]
    return dict(json.loads(shadow["user_state"] or "{}"))


def session_timeline(
    *, project_id: str, app_name: str, user_id: str, session_id: str, after_seq: int, limit: int
) -> list[dict[str, Any]]:
    uid, _row = _uid(project_id=project_id, app_name=app_name, user_id=user_id, session_id=session_id)
    rows = graph.read(cypher.TIMELINE, uid=uid, after_seq=after_seq, limit=limit)
    return [
        {
            "seq": r["seq"],
            "event_id": r["event_id"],
            "author": r["author"],
            "timestamp": r["timestamp"],
            "text": r["text"],
            "state_writes": [
                {
                    "key": w["key"],
                    "from": json.loads(w["from_value_json"]) if w["from_value_json"] is not None else None,
                    "to": json.loads(w["to_value_json"]),
                }
                for w in r["writes"]
            ],
            "tool_calls": [
                {
                    "call_id": c["call_id"],
                    "name": c["name"],
                    "args": json.loads(c["parameters_json"] or "{}"),
                    "status": c["status"],
                    "latency_ms": c["latency_ms"],
                    "error_msg": c["error_msg"],
                }
                for c in r["calls"]
            ],
            "responded_to": [c for c in r["responded"] if c],
        }
        for r in rows
    ]


def session_tool_stats(
    *, project_id: str, app_name: str, user_id: str, session_id: str
) -> list[dict[str, Any]]:
    uid, _row = _uid(project_id=project_id, app_name=app_name, user_id=user_id, session_id=session_id)
    return [
        {
            "name": r["name"],
            "calls": r["calls"],
            "responded": r["responded"],
            "errors": r["errors"],
            "avg_latency_ms": round(r["avg_latency_ms"], 1) if r["avg_latency_ms"] is not None else None,
            "max_latency_ms": r["max_latency_ms"],
        }
        for r in graph.read(cypher.TOOL_STATS, uid=uid)
    ]


def session_state_history(
    *, project_id: str, app_name: str, user_id: str, session_id: str, key: str | None, limit: int
) -> list[dict[str, Any]]:
    uid, _row = _uid(project_id=project_id, app_name=app_name, user_id=user_id, session_id=session_id)
    return [
        {
            "key": r["key"],
            "from": json.loads(r["from_json"]) if r["from_json"] is not None else None,
            "to": json.loads(r["to_json"]),
            "timestamp": r["timestamp"],
            "event_id": r["event_id"],
            "author": r["author"],
            "seq": r["seq"],
        }
        for r in graph.read(cypher.STATE_HISTORY, uid=uid, key=key, limit=limit)
    ]
