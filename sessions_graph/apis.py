"""HTTP API of the sessions graph (seed 004) under /api/v1/projects/{pid}/apps/{app}/users/{user}/sessions."""

from __future__ import annotations

import base64
import json
import math
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import ProjectApi, StrictSerializer
from core.errors import InvalidInput, NotFound
from memory.apis import MessageFilterFields, MinScoreField
from memory.services import normalise_timestamp
from sessions_graph import ids, memory, selectors, services

MAX_NAME_CHARS = ids.MAX_ID_CHARS
PATH_IDS = frozenset({"app_name", "user_id", "session_id", "memory_id"})
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# event times are ADK's float seconds; they must be a time (memory turns them into ISO-8601 dates)
MIN_EVENT_SECONDS = datetime(1, 1, 2, tzinfo=UTC).timestamp()
MAX_EVENT_SECONDS = datetime(9999, 12, 30, tzinfo=UTC).timestamp()


class SessionsApi(ProjectApi):
    """A view whose path carries app, user, session or memory ids: each is decoded and checked by the
    id rule (sessions_graph.ids) before the handler sees it. A bad id is a 400, raised after
    authentication so an anonymous caller still gets 401."""

    _bad_id: InvalidInput | None = None

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._bad_id = None
        try:
            kwargs = {k: ids.from_path(v, k) if k in PATH_IDS else v for k, v in kwargs.items()}
        except InvalidInput as exc:
            self._bad_id = exc
        return super().dispatch(request, *args, **kwargs)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if self._bad_id is not None:
            raise self._bad_id


def _int_param(request: Request, name: str, *, low: int, high: int, default: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be an integer", details={"field": name}) from exc
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low} and {high}", details={"field": name})
    return value


def _float_param(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be a number of seconds", details={"field": name}) from exc
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidInput(f"{name} must be a finite number", details={"field": name})
    return value


def _cursor_out(cursor: tuple[Any, ...] | None) -> str | None:
    if cursor is None:
        return None
    return base64.urlsafe_b64encode(json.dumps(list(cursor)).encode()).decode()


def _time(value: Any) -> bool:
    """A time this API issued: a finite number of seconds (not a bool; an integer within 64 bits, as a
    larger one cannot be a Neo4j parameter)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return INT64_MIN <= value <= INT64_MAX if isinstance(value, int) else math.isfinite(value)


def _cursor_parts(raw: str, names: int, *, field: str = "cursor", rest: type = str) -> list[Any]:
    """A cursor's (last_update_time, then `names` values of type `rest`), or 400."""
    try:
        parts = json.loads(base64.urlsafe_b64decode(raw.encode()))
        if (
            not isinstance(parts, list)
            or len(parts) != names + 1
            or not _time(parts[0])
            or not all(isinstance(p, rest) and not isinstance(p, bool) for p in parts[1:])
            # an integer this API issued fits Neo4j's 64 bits (a larger one cannot be a parameter)
            or not all(INT64_MIN <= p <= INT64_MAX for p in parts[1:] if isinstance(p, int))
        ):
            raise ValueError
        return parts
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"{field} is not one this API issued", details={"field": field}) from exc


def _events_cursor_in(raw: str | None) -> tuple[float, int] | None:
    if not raw:
        return None
    timestamp, seq = _cursor_parts(raw, 1, field="events_cursor", rest=int)
    return float(timestamp), seq


def _cursor_in(raw: str | None) -> tuple[float, str] | None:
    if not raw:
        return None
    ltu, sid = _cursor_parts(raw, 1)
    return ltu, sid


def _app_cursor_in(raw: str | None) -> tuple[float, str, str] | None:
    if not raw:
        return None
    ltu, user, sid = _cursor_parts(raw, 2)
    return ltu, user, sid


class SessionIdField(serializers.CharField):
    """A session id in a body: trimmed, checked by the id rule; blank is None ("generate one")."""

    def __init__(self) -> None:
        super().__init__(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)

    def to_internal_value(self, data: Any) -> str | None:
        try:
            return ids.session_id_given(super().to_internal_value(data))
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message) from exc


class SessionCreateSerializer(StrictSerializer):
    session_id = SessionIdField()
    state = serializers.DictField(required=False)


def _optional_id(value: Any) -> bool:
    """None or a string of at most MAX_NAME_CHARS; ADK leaves ids it has none for as ""."""
    return value is None or (isinstance(value, str) and len(value) <= MAX_NAME_CHARS)


def event_errors(event: dict[str, Any], *, for_memory: bool = False) -> list[str]:
    """What in an ADK event (as JSON) the graph cannot hold: the values that become node
    properties (ids, author, invocation id, tool call ids) must be strings, the timestamp a time,
    `content.parts` a list of objects. With `for_memory`, text parts must not hold NUL (memory text
    is refused with NUL everywhere). Empty when the event is acceptable."""
    errors = []
    author = event.get("author")
    if not for_memory and (not isinstance(author, str) or not author or len(author) > MAX_NAME_CHARS):
        errors.append(f"author must be a string of 1-{MAX_NAME_CHARS} characters")
    elif for_memory and author is not None and not isinstance(author, str):
        errors.append("author must be a string")
    if "id" in event and not (
        (event["id"] is not None or for_memory) and _optional_id(event["id"])
    ):  # an appended event's id may be left out, not null
        errors.append(f"id must be a string of at most {MAX_NAME_CHARS} characters")
    if not _optional_id(event.get("invocation_id")):
        errors.append(f"invocation_id must be a string of at most {MAX_NAME_CHARS} characters or null")
    timestamp = event.get("timestamp")
    if timestamp is not None and (
        not isinstance(timestamp, int | float)
        or isinstance(timestamp, bool)
        or not math.isfinite(timestamp)
        or not MIN_EVENT_SECONDS <= timestamp <= MAX_EVENT_SECONDS
    ):
        errors.append("timestamp must be a number of seconds since 1970 (years 1 to 9999)")
    content = event.get("content")
    if content is None:
        return errors
    if not isinstance(content, dict):
        return [*errors, "content must be an object"]
    parts = content.get("parts")
    if parts is None:
        return errors
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        return [*errors, "content.parts must be a list of objects"]
    for position, part in enumerate(parts):
        for kind in ("function_call", "functionCall", "function_response", "functionResponse"):
            call = part.get(kind)
            if call is not None and not isinstance(call, dict):
                errors.append(f"content.parts[{position}].{kind} must be an object")
            elif call is not None and not _optional_id(call.get("id")):
                errors.append(
                    f"content.parts[{position}].{kind}.id must be a string of at most {MAX_NAME_CHARS} "
                    "characters or null"
                )
        if for_memory and isinstance(part.get("text"), str) and "\x00" in part["text"]:
            errors.append(f"content.parts[{position}].text contains NUL characters")
    return errors


def _call_schema(*extra: str) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "id": {"type": "string", "nullable": True, "maxLength": MAX_NAME_CHARS},
        "name": {"type": "string"},
    }
    properties.update({name: {"type": "object", "additionalProperties": True} for name in extra})
    return {"type": "object", "properties": properties, "additionalProperties": True}


# ADK's Event as JSON, as far as the platform reads it (other fields are stored as given)
ADK_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": True,
    "properties": {
        "id": {"type": "string", "maxLength": MAX_NAME_CHARS},
        "author": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS},
        "invocation_id": {"type": "string", "nullable": True, "maxLength": MAX_NAME_CHARS},
        "timestamp": {
            "type": "number",
            "description": "seconds since 1970 (ADK's float time); the server's time when absent",
            "minimum": MIN_EVENT_SECONDS,
            "maximum": MAX_EVENT_SECONDS,
        },
        "content": {
            "type": "object",
            "nullable": True,
            "additionalProperties": True,
            "properties": {
                "role": {"type": "string"},
                "parts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": True,
                        "properties": {
                            "text": {"type": "string"},
                            "function_call": _call_schema("args"),
                            "function_response": _call_schema("response"),
                        },
                    },
                },
            },
        },
        "actions": {
            "type": "object",
            "nullable": True,
            "additionalProperties": True,
            "properties": {"state_delta": {"type": "object", "additionalProperties": True}},
        },
    },
}


@extend_schema_field({**ADK_EVENT_SCHEMA, "required": ["author"]})
class EventField(serializers.DictField):
    """An appended event: checked by `event_errors`."""


@extend_schema_field(ADK_EVENT_SCHEMA)
class MemoryEventField(serializers.DictField):
    """An event given to memory: checked by `event_errors(for_memory=True)`."""


class EventAppendSerializer(StrictSerializer):
    """One `event`, or a burst of `events` appended in order in one transaction (all or none)."""

    event = EventField(required=False)
    events = serializers.ListField(child=EventField(), required=False, min_length=1, max_length=1000)
    expected_revision = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=INT64_MAX
    )
    expected_last_update_time = serializers.FloatField(
        required=False, allow_null=True, min_value=MIN_EVENT_SECONDS, max_value=MAX_EVENT_SECONDS
    )

    def validate_event(self, value: dict[str, Any]) -> dict[str, Any]:
        errors = event_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def validate_events(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for position, event in enumerate(value):
            errors = event_errors(event)
            if errors:
                raise serializers.ValidationError({str(position): errors})
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("event" in attrs) == ("events" in attrs):
            raise serializers.ValidationError("give one event, or a list of events")
        return attrs


class SessionListCreateApi(SessionsApi):
    @extend_schema(
        operation_id="sessions_list",
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("cursor", str)],
        responses={200: dict},
    )
    def get(self, request: Request, project_id: str, app_name: str, user_id: str) -> Response:
        limit = _int_param(request, "limit", low=1, high=10_000, default=100)
        assert limit is not None
        sessions, cursor = selectors.session_list(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            limit=limit,
            before=_cursor_in(request.query_params.get("cursor")),
        )
        return Response({"sessions": sessions, "next_cursor": _cursor_out(cursor)})

    @extend_schema(request=SessionCreateSerializer, responses={201: dict})
    def post(self, request: Request, project_id: str, app_name: str, user_id: str) -> Response:
        params = SessionCreateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        session = services.session_create(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            session_id=data.get("session_id"),
            state=data.get("state") or {},
        )
        return Response(session, status=status.HTTP_201_CREATED)


class AppSessionListApi(SessionsApi):
    """Every user's sessions of an app (ADK's `list_sessions` without a user)."""

    @extend_schema(
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("cursor", str)],
        responses={200: dict},
    )
    def get(self, request: Request, project_id: str, app_name: str) -> Response:
        limit = _int_param(request, "limit", low=1, high=10_000, default=100)
        assert limit is not None
        sessions, cursor = selectors.app_session_list(
            project_id=project_id,
            app_name=app_name,
            limit=limit,
            before=_app_cursor_in(request.query_params.get("cursor")),
        )
        return Response({"sessions": sessions, "next_cursor": _cursor_out(cursor)})


class UserStateApi(SessionsApi):
    """The user's state shared by all their sessions of the app (`user:` keys, without the prefix)."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, project_id: str, app_name: str, user_id: str) -> Response:
        return Response(
            {"state": selectors.user_state(project_id=project_id, app_name=app_name, user_id=user_id)}
        )


class SessionDetailApi(SessionsApi):
    @extend_schema(
        operation_id="session_get",
        parameters=[
            OpenApiParameter("num_recent_events", int),
            OpenApiParameter("after_timestamp", float),
            OpenApiParameter("events_limit", int),
            OpenApiParameter("events_cursor", str),
        ],
        responses={200: dict},
    )
    def get(
        self, request: Request, project_id: str, app_name: str, user_id: str, session_id: str
    ) -> Response:
        """The session and one page of its events, oldest first: at most `events_limit` (default and
        maximum SESSION_EVENTS_PAGE_MAX); `next_events_cursor` is set when more follow."""
        page_max = settings.SESSION_EVENTS_PAGE_MAX
        session = selectors.session_get(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            num_recent_events=_int_param(request, "num_recent_events", low=0, high=100_000, default=None),
            after_timestamp=_float_param(request, "after_timestamp"),
            events_limit=_int_param(request, "events_limit", low=1, high=page_max, default=page_max),
            events_after=_events_cursor_in(request.query_params.get("events_cursor")),
        )
        if session is None:
            raise NotFound("session not found")
        session["next_events_cursor"] = _cursor_out(session["next_events_cursor"])
        return Response(session)

    @extend_schema(responses={204: None})
    def delete(
        self, request: Request, project_id: str, app_name: str, user_id: str, session_id: str
    ) -> Response:
        services.session_delete(
            project_id=project_id, app_name=app_name, user_id=user_id, session_id=session_id
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


def _if_match(request: Request) -> int | None:
    raw = request.headers.get("If-Match")
    if raw is None:
        return None
    try:
        return int(raw.strip().strip('"'))
    except ValueError as exc:
        raise InvalidInput("If-Match must be the session's revision", details={"field": "If-Match"}) from exc


class EventAppendApi(SessionsApi):
    @extend_schema(request=EventAppendSerializer, responses={201: dict})
    def post(
        self, request: Request, project_id: str, app_name: str, user_id: str, session_id: str
    ) -> Response:
        params = EventAppendSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        expected = _if_match(request)
        if expected is None:
            expected = data.get("expected_revision")
        written = services.events_append(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            events=data["events"] if "events" in data else [data["event"]],
            expected_revision=expected,
            expected_last_update_time=data.get("expected_last_update_time"),
        )
        if "event" in data:
            written["event"] = written.pop("events")[0]
        return Response(written, status=status.HTTP_201_CREATED, headers={"ETag": f'"{written["revision"]}"'})


class SessionTimelineApi(SessionsApi):
    @extend_schema(
        parameters=[OpenApiParameter("after_seq", int), OpenApiParameter("limit", int)],
        responses={200: dict},
    )
    def get(
        self, request: Request, project_id: str, app_name: str, user_id: str, session_id: str
    ) -> Response:
        items = selectors.session_timeline(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            after_seq=_int_param(request, "after_seq", low=0, high=10**9, default=0) or 0,
            limit=_int_param(request, "limit", low=1, high=1000, default=100) or 100,
        )
        return Response({"events": items})


class SessionToolStatsApi(SessionsApi):
    @extend_schema(responses={200: dict})
    def get(
        self, request: Request, project_id: str, app_name: str, user_id: str, session_id: str
    ) -> Response:
        tools = selectors.session_tool_stats(
            project_id=project_id, app_name=app_name, user_id=user_id, session_id=session_id
        )
        return Response({"tools": tools})


class SessionStateHistoryApi(SessionsApi):
    @extend_schema(
        parameters=[OpenApiParameter("key", str), OpenApiParameter("limit", int)],
        responses={200: dict},
    )
    def get(
        self, request: Request, project_id: str, app_name: str, user_id: str, session_id: str
    ) -> Response:
        key = request.query_params.get("key") or None
        history = selectors.session_state_history(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            key=key,
            limit=_int_param(request, "limit", low=1, high=10_000, default=1000) or 1000,
        )
        return Response({"changes": history})


class StringField(serializers.CharField):
    """A CharField that takes only a JSON string: 5 is not "5", an object is not text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field({"type": "string", "format": "date-time", "maxLength": 64})
class TimestampStringField(StringField):
    """An ISO-8601 time as a JSON string."""


class MemoryItemSerializer(StrictSerializer):
    """ADK's `MemoryEntry` as the client sends it: text (no NUL; a CharField refuses it), author and
    an ISO-8601 `timestamp` string."""

    text = StringField(trim_whitespace=False)
    author = StringField(max_length=MAX_NAME_CHARS, required=False, allow_null=True)
    timestamp = TimestampStringField(max_length=64, required=False, allow_null=True)

    def validate_timestamp(self, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            normalise_timestamp(value)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message) from exc
        return value


class MemoryAddSerializer(StrictSerializer):
    session_id = SessionIdField()
    events = serializers.ListField(child=MemoryEventField(), required=False, max_length=1000)
    memories = MemoryItemSerializer(many=True, required=False, max_length=1000)

    def validate_events(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for position, event in enumerate(value):
            errors = event_errors(event, for_memory=True)
            if errors:
                raise serializers.ValidationError({str(position): errors})
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [k for k in ("events", "memories") if attrs.get(k) is not None]
        if len(given) > 1 or (not given and not attrs.get("session_id")):
            raise serializers.ValidationError(
                "give a session_id, events (optionally with a session_id) or memories"
            )
        if attrs.get("memories") is not None and attrs.get("session_id"):
            raise serializers.ValidationError("memories belong to no session: leave session_id out")
        return attrs


class MemorySearchSerializer(MessageFilterFields):
    # trimmed after the length check, so blanks around a short query count toward the limit
    query = serializers.CharField(max_length=10_000, trim_whitespace=False)
    top_k = serializers.IntegerField(min_value=1, max_value=100, default=5)  # seed 004: similarity_top_k 5
    mode = serializers.ChoiceField(
        choices=["vector", "fulltext", "hybrid", "graph"], required=False, allow_null=True
    )
    min_score = MinScoreField()

    def validate_query(self, value: str) -> str:
        value = value.strip()
        if not value:
            raise serializers.ValidationError("This field may not be blank.")
        return value


def _requested_by(request: Request) -> str:
    prefix = getattr(getattr(request, "auth", None), "prefix", None)
    return f"api_key:kp_{prefix}" if prefix else f"user:{getattr(request.user, 'username', '')}"


class SessionMemoryApi(SessionsApi):
    """Memory from sessions: add a stored session, given events or free texts; erase."""

    @extend_schema(request=MemoryAddSerializer, responses={201: dict})
    def post(self, request: Request, project_id: str, app_name: str, user_id: str) -> Response:
        params = MemoryAddSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        session_id = data.get("session_id")
        if data.get("memories") is not None:
            result = memory.memory_add_texts(
                project_id=project_id, app_name=app_name, user_id=user_id, memories=data["memories"]
            )
        elif data.get("events") is not None:
            result = memory.memory_add_events(
                project_id=project_id,
                app_name=app_name,
                user_id=user_id,
                events=data["events"],
                session_id=session_id,
            )
        else:
            assert session_id is not None
            result = memory.memory_add_session(
                project_id=project_id, app_name=app_name, user_id=user_id, session_id=session_id
            )
        return Response(result, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="user_memory_delete",
        parameters=[OpenApiParameter("session_id", str)],
        responses={200: dict},
    )
    def delete(self, request: Request, project_id: str, app_name: str, user_id: str) -> Response:
        session_id = ids.session_id_given(request.query_params.get("session_id"))
        erased = memory.memory_delete(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            requested_by=_requested_by(request),
        )
        return Response({"erased": erased})


class SessionMemorySearchApi(SessionsApi):
    required_scope = "read"

    @extend_schema(request=MemorySearchSerializer, responses={200: dict})
    def post(self, request: Request, project_id: str, app_name: str, user_id: str) -> Response:
        params = MemorySearchSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        found = memory.memory_search(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            query=data["query"],
            top_k=data["top_k"],
            mode=data.get("mode"),
            min_score=data.get("min_score"),
            filters=params.filters(),
        )
        return Response({"memories": found})


class SessionMemoryItemApi(SessionsApi):
    """One memory of the app's user, by the id a search returned."""

    @extend_schema(operation_id="user_memory_item_delete", responses={200: dict})
    def delete(
        self, request: Request, project_id: str, app_name: str, user_id: str, memory_id: str
    ) -> Response:
        erased = memory.memory_delete_one(
            project_id=project_id,
            app_name=app_name,
            user_id=user_id,
            memory_id=memory_id,
            requested_by=_requested_by(request),
        )
        return Response({"erased": erased})
