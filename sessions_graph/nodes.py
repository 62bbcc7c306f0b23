"""Sessions graph nodes (seed 004): ADK-style apps, users, sessions, events, tool calls and shadow
state, all scoped by `project_id`. Writes go through sessions_graph.cypher; these classes define
labels, constraints and indexes and serve the admin.

A session's times (`created_at`, `last_update_time`: the latest event's timestamp) and an event's
`timestamp` are ADK's float seconds; `revision` counts a session's appends (the optimistic lock);
the shadow states' `version` is integer milliseconds.
"""

from __future__ import annotations

from neomodel import BooleanProperty, FloatProperty, IntegerProperty, StringProperty

from core.nodes import TenantNode


class App(TenantNode):
    name = StringProperty(required=True)


class User(TenantNode):
    app_name = StringProperty(required=True)
    user_id = StringProperty(required=True)


class Session(TenantNode):
    """`session_id` is the client's id (unique per project, app and user); `id` is internal."""

    app_name = StringProperty(required=True)
    user_id = StringProperty(required=True)
    session_id = StringProperty(required=True)
    state_json = StringProperty()
    created_at = FloatProperty()
    last_update_time = FloatProperty()
    revision = IntegerProperty()
    event_count = IntegerProperty()
    # every event so far appended in time order (then the latest N are the last N by seq)
    in_time_order = BooleanProperty()
    max_event_time = FloatProperty()


class Event(TenantNode):
    session_uid = StringProperty(required=True)
    event_id = StringProperty()
    seq = IntegerProperty()
    author = StringProperty()
    timestamp = FloatProperty()
    invocation_id = StringProperty()
    content_json = StringProperty()
    actions_json = StringProperty()
    event_json = StringProperty()
    text = StringProperty()


class ToolCall(TenantNode):
    session_uid = StringProperty(required=True, index=True)
    call_id = StringProperty()
    name = StringProperty(index=True)
    parameters_json = StringProperty()
    timestamp = FloatProperty()
    status = StringProperty()
    latency_ms = IntegerProperty()
    response_json = StringProperty()
    error_msg = StringProperty()  # a failed call's error (the response's `error`), as text


class AppState(TenantNode):
    app_name = StringProperty(required=True)
    state_json = StringProperty()
    version = IntegerProperty()


class UserState(TenantNode):
    app_name = StringProperty(required=True)
    user_id = StringProperty(required=True)
    state_json = StringProperty()
    version = IntegerProperty()
