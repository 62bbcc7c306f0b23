"""HTTP API of the memory app (DESIGN.md section 5)."""

from __future__ import annotations

import base64
import binascii
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict
from typing import Any

import numpy as np
import numpy.typing as npt
from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import MAX_OFFSET, ProjectApi, QueryTextField, StrictSerializer
from core.embeddings.base import embed_soon
from core.errors import InvalidInput
from memory import chat, context, conversations, selectors, services
from memory import metadata as message_metadata
from memory.chat import ANSWER_MODES
from memory.chat import SEARCH_MODES as CHAT_SEARCH_MODES
from memory.dto import DEPTHS, SEARCH_MODES, MessageFilters, MessageInput
from memory.scope import MAX_SCOPE_VALUE_CHARS, SCOPE_KEYS, Scope, validate_value
from retrieval.apis import SearchInputSerializer, search_body, search_validated


def _requested_by(request: Request) -> str:
    key = getattr(request, "auth", None)
    prefix = getattr(key, "prefix", None)
    if prefix:
        return f"api_key:kp_{prefix}"
    user = getattr(request, "user", None)
    return f"user:{getattr(user, 'username', '')}" if user is not None else ""


class ScopeSerializer(StrictSerializer):
    application_id = serializers.CharField(
        max_length=MAX_SCOPE_VALUE_CHARS, required=False, allow_null=True, trim_whitespace=False
    )
    agent_id = serializers.CharField(
        max_length=MAX_SCOPE_VALUE_CHARS, required=False, allow_null=True, trim_whitespace=False
    )
    user_id = serializers.CharField(
        max_length=MAX_SCOPE_VALUE_CHARS, required=False, allow_null=True, trim_whitespace=False
    )
    thread_id = serializers.CharField(
        max_length=MAX_SCOPE_VALUE_CHARS, required=False, allow_null=True, trim_whitespace=False
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):  # ids are strings: 5 is not silently "5"
            wrong = {
                k: ["must be a string"]
                for k, v in data.items()
                if k in SCOPE_KEYS and v is not None and not isinstance(v, str)
            }
            if wrong:
                raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for key, value in attrs.items():
            try:
                validate_value(key, value)
            except InvalidInput as exc:
                raise serializers.ValidationError({key: [exc.message]}) from exc
        return attrs


def _scope(data: dict[str, Any] | None) -> Scope:
    data = data or {}
    return Scope(**{k: data.get(k) for k in SCOPE_KEYS}).require()


def _scoped(serializer_class: type[serializers.Serializer], data: Any) -> tuple[dict[str, Any], Scope]:
    """A body validated by `serializer_class` and its validated, non-empty `scope`."""
    body = _valid(serializer_class, data)
    return body, _scope(_valid(ScopeSerializer, body["scope"]))


_NUMBER_TYPES = {float, int}  # exactly: bool and str are not numbers here
MAX_EMBEDDING_VALUES = 8192


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "array",
                "items": {"type": "number"},
                "minItems": settings.EMBEDDINGS_DIMENSIONS,
                "maxItems": settings.EMBEDDINGS_DIMENSIONS,
            },
            {"type": "string", "format": "byte", "description": "base64 of little-endian float32 values"},
        ]
    }
)
class EmbeddingField(serializers.Field):
    """A client's embedding: a list of numbers, or a base64 string of little-endian float32 values
    (what OpenAI's embeddings API returns with `encoding_format: "base64"`), a quarter of the bytes
    for the server to receive and nothing to parse number by number. Checked in one pass (a
    per-element FloatField costs seconds for 1,000 384-dimension vectors); dimensions and
    finiteness are checked by the service."""

    default_error_messages = {
        "invalid": (
            f"must be a list of at most {MAX_EMBEDDING_VALUES} numbers or a base64 string of float32 values"
        ),
        "base64": "is not valid base64 of little-endian float32 values (4 bytes each)",
    }

    def to_internal_value(self, data: Any) -> list[float] | npt.NDArray[np.float32]:
        if isinstance(data, str):
            return self._from_base64(data)
        # the types collected in C: a generator over 384,000 values took ~20 ms per 1,000 messages
        if (
            not isinstance(data, list)
            or len(data) > MAX_EMBEDDING_VALUES
            or not set(map(type, data)) <= _NUMBER_TYPES
        ):
            self.fail("invalid")
        return data

    def _from_base64(self, data: str) -> npt.NDArray[np.float32]:
        if len(data) > (MAX_EMBEDDING_VALUES * 4 + 2) // 3 * 4:
            self.fail("invalid")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            self.fail("base64")
        if not raw or len(raw) % 4:
            self.fail("base64")
        # an array over the decoded bytes: the service checks the batch as one matrix and converts it
        return np.frombuffer(raw, dtype="<f4")

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field({"type": "string", "format": "date-time", "maxLength": 64})
class TimestampField(serializers.CharField):
    """An ISO-8601 time (checked and converted to UTC by the service)."""


_METADATA_VALUE = {
    "oneOf": [
        {"type": "string", "maxLength": message_metadata.MAX_STRING_CHARS},
        {"type": "number"},
        {"type": "boolean"},
    ]
}


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": message_metadata.MAX_KEYS,
        "additionalProperties": {
            "oneOf": [
                *_METADATA_VALUE["oneOf"],
                {
                    "type": "array",
                    "maxItems": message_metadata.MAX_LIST_ITEMS,
                    "items": {"type": "string", "maxLength": message_metadata.MAX_STRING_CHARS},
                },
            ]
        },
        "description": f"free metadata: a flat object, keys ^{message_metadata.KEY_PATTERN.pattern}$ "
        '(docs/api.md, "Message metadata")',
    }
)
class MetadataField(serializers.Field):
    """A message's free metadata, checked by memory.metadata.metadata_check."""

    def to_internal_value(self, data: Any) -> dict[str, message_metadata.Value]:
        try:
            return message_metadata.metadata_check(data, field=self.field_name)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message) from exc

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": message_metadata.MAX_KEYS,
        "additionalProperties": _METADATA_VALUE,
        "description": "messages whose metadata has each key with this value (or, a list, holding it); "
        f"keys ^{message_metadata.KEY_PATTERN.pattern}$",
    }
)
class MetadataFilterField(serializers.Field):
    """A search's metadata filter, checked by memory.metadata.filter_check."""

    def to_internal_value(self, data: Any) -> dict[str, message_metadata.Scalar]:
        try:
            return dict(message_metadata.filter_check(data, field=self.field_name))
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message) from exc

    def to_representation(self, value: Any) -> Any:
        return value


class MessageSerializer(StrictSerializer):
    role = serializers.CharField(max_length=32)
    # length is checked by the service, which answers 413 rather than 400 for an oversized text
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)
    message_id = serializers.CharField(max_length=256, required=False, allow_null=True)
    author_name = serializers.CharField(max_length=256, required=False, allow_null=True)
    timestamp = TimestampField(max_length=64, required=False, allow_null=True)
    embedding = EmbeddingField(required=False, allow_null=True)
    # document ids, chunk ids or source paths; checked against the project by the service (400)
    references = serializers.ListField(
        child=serializers.CharField(max_length=2000), required=False, default=list
    )
    metadata = MetadataField(required=False, allow_null=True)


@extend_schema_field(MessageSerializer)
class MessageField(serializers.DictField):
    """A message, kept a dict here: the batch is checked by `MessageSerializer(many=True)` in one pass."""


@extend_schema_field(ScopeSerializer)
class ScopeField(serializers.DictField):
    """A scope, kept a dict here: checked by `ScopeSerializer` (`_scoped`)."""


class StoreInputSerializer(StrictSerializer):
    messages = serializers.ListField(child=MessageField(), allow_empty=False)
    scope = ScopeField()
    embed_in_worker = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="leave embedding to the processing job and answer 202 at once (default: "
        "MEMORY_EMBED_IN_WORKER); the messages are found by vector search once it has run",
    )


class StoreOutputSerializer(serializers.Serializer):
    conversation_id = serializers.CharField(allow_null=True)
    stored = serializers.ListField(child=serializers.DictField())
    skipped = serializers.ListField(child=serializers.DictField())
    job_id = serializers.CharField(allow_null=True)
    embedding_pending = serializers.BooleanField()


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class MemoryStoreApi(ProjectApi):
    """POST /projects/{pid}/memories — store a batch; GET — list a scope's memories, newest first."""

    required_scope = None

    @extend_schema(
        request=StoreInputSerializer, responses={201: StoreOutputSerializer, 202: StoreOutputSerializer}
    )
    def post(self, request: Request, project_id: str) -> Response:
        data, scope = _scoped(StoreInputSerializer, request.data)
        raw = data["messages"]
        services.memories_batch_check(count=len(raw))  # 413 before validating each message
        batch = MessageSerializer(data=raw, many=True)  # one field set for the whole batch
        if not batch.is_valid():
            # DRF gives a list with an entry per message, or (LIST_SERIALIZER_ERRORS_AS_DICT, DRF 3.18's
            # default) a dict of the failing messages' positions: the first failing message is named
            errors = batch.errors
            by_position = {
                str(i): e for i, e in (enumerate(errors) if isinstance(errors, list) else errors.items())
            }
            failing = sorted(int(i) for i, e in by_position.items() if e and i.isdigit())
            if not failing:
                raise serializers.ValidationError({"messages": errors})
            raise serializers.ValidationError({f"messages[{failing[0]}]": by_position[str(failing[0])]})
        messages = [
            MessageInput(**{**item, "references": tuple(item.get("references") or ())})
            for item in batch.validated_data
        ]
        result = services.memories_store(
            project_id=project_id, scope=scope, messages=messages, embed_in_worker=data["embed_in_worker"]
        )
        # 202: stored, but their embeddings are the processing job's to write
        code = status.HTTP_202_ACCEPTED if result.embedding_pending else status.HTTP_201_CREATED
        # the dataclass itself: `asdict` deep-copies every stored entry (~9 ms for 1,000)
        return Response(StoreOutputSerializer(result).data, status=code)

    @extend_schema(
        operation_id="memories_list",
        parameters=[OpenApiParameter(k, str, required=False) for k in (*SCOPE_KEYS, "cursor")]
        + [OpenApiParameter("limit", int, required=False)],
        responses={200: dict},
    )
    def get(self, request: Request, project_id: str) -> Response:
        params = request.query_params
        unknown = sorted(set(params) - {*SCOPE_KEYS, "cursor", "limit"})
        if unknown:
            raise InvalidInput(f"unknown query parameter(s): {', '.join(unknown[:10])}")
        scope = _scope(_valid(ScopeSerializer, {k: params[k] for k in SCOPE_KEYS if k in params}))
        try:
            limit = int(params.get("limit", 50))
        except ValueError as exc:
            raise InvalidInput("limit must be an integer", details={"field": "limit"}) from exc
        if not 1 <= limit <= 200:
            raise InvalidInput("limit must be between 1 and 200", details={"field": "limit"})
        items, next_cursor = selectors.memories_list(
            project_id=project_id, scope=scope, limit=limit, cursor=params.get("cursor") or None
        )
        return Response({"items": items, "next_cursor": next_cursor})


class MinScoreField(serializers.FloatField):
    """A relevance floor replacing the mode's default (docs/memory.md, "Relevance floor")."""

    def __init__(self) -> None:
        super().__init__(
            required=False,
            allow_null=True,
            min_value=0.0,
            max_value=1e6,
            help_text="hits scoring below are not returned; default: MEMORY_MIN_SCORE_VECTOR (vector, and "
            "hybrid's vector side) or MEMORY_MIN_SCORE_FULLTEXT (fulltext)",
        )


class MessageFilterFields(StrictSerializer):
    """The message filters of a memory search (docs/api.md, "Time, role and author filters"), shared
    by every endpoint that searches memory."""

    since = serializers.CharField(
        required=False, max_length=100, help_text="messages from this time on: ISO-8601 or an expression"
    )
    until = serializers.CharField(
        required=False, max_length=100, help_text="messages before this time: ISO-8601 or an expression"
    )
    when = serializers.CharField(
        required=False, max_length=100, help_text='messages within this span, e.g. "May 2023", "last year"'
    )
    reference_time = serializers.CharField(
        required=False,
        max_length=64,
        help_text="ISO-8601 time relative expressions count from (default: now)",
    )
    roles = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=20, allow_empty=False
    )
    author = serializers.CharField(required=False, max_length=256, help_text="the author's name, exact")
    metadata = MetadataFilterField(required=False)
    as_of = serializers.CharField(
        required=False,
        max_length=100,
        help_text="memory as it stood then: messages said by then, facts and preferences valid then "
        "(ISO-8601 or an expression; an expression's span ends it)",
    )

    def filters(self) -> MessageFilters:
        """The validated fields as a search's filters (400 for a time or role it cannot use)."""
        return filters_of(self.validated_data)


def filters_of(data: dict[str, Any]) -> MessageFilters:
    """A search's filters from the validated fields of MessageFilterFields."""
    return selectors.message_filters(
        since=data.get("since"),
        until=data.get("until"),
        when=data.get("when"),
        reference_time=data.get("reference_time"),
        roles=data.get("roles"),
        author=data.get("author"),
        as_of=data.get("as_of"),
        metadata=data.get("metadata"),
    )


class MemorySearchInputSerializer(MessageFilterFields):
    query = QueryTextField(max_setting="MEMORY_MAX_QUERY_CHARS", allow_blank=True, default="")
    scope = ScopeField()
    top_k = serializers.IntegerField(min_value=1, max_value=100, default=10)
    mode = serializers.ChoiceField(choices=SEARCH_MODES, required=False, allow_null=True)
    depth = serializers.ChoiceField(choices=DEPTHS, default="messages")
    min_score = MinScoreField()


def _searched(
    serializer_class: type[MessageFilterFields], data: Any
) -> tuple[dict[str, Any], Scope, MessageFilters]:
    """A memory search's body validated by `serializer_class`, its scope and its message filters."""
    params = serializer_class(data=data)
    params.is_valid(raise_exception=True)
    body = dict(params.validated_data)
    return body, _scope(_valid(ScopeSerializer, body["scope"])), params.filters()


class MemorySearchApi(ProjectApi):
    required_scope = "read"

    @extend_schema(request=MemorySearchInputSerializer, responses={200: dict})
    def post(self, request: Request, project_id: str) -> Response:
        data, scope, filters = _searched(MemorySearchInputSerializer, request.data)
        result = selectors.memories_search(
            project_id=project_id,
            scope=scope,
            query=data["query"],
            top_k=data["top_k"],
            mode=data.get("mode"),
            depth=data["depth"],
            min_score=data.get("min_score"),
            filters=filters,
        )
        return Response(asdict(result))


class MemoryPartSerializer(MemorySearchInputSerializer):
    """The memory half of `search:with-memory`: a memory search's body, whose query is the search's."""

    query = None  # type: ignore[assignment]  # DRF: None removes an inherited field


class SearchWithMemoryInputSerializer(SearchInputSerializer):
    memory = MemoryPartSerializer(help_text="the memory search: scope, top_k, mode, depth, filters")


# The memory halves of `search:with-memory`; a pool of their own, since a memory search hands work to
# memory.selectors' pool and must not wait on a pool it occupies.
_memory_halves = ThreadPoolExecutor(max_workers=settings.WEB_THREADS, thread_name_prefix="with-memory")


class SearchWithMemoryApi(ProjectApi):
    """POST /projects/{pid}/search:with-memory — the knowledge search of `POST …/search` and the memory
    search of `POST …/memories/search` for one query, in one request (an agent's turn): one
    authentication and one embedding of the query for both, the two searches side by side.
    Everything is validated before either search runs."""

    required_scope = "read"

    @extend_schema(request=SearchWithMemoryInputSerializer, responses={200: dict})
    def post(self, request: Request, project_id: str) -> Response:
        started = time.perf_counter()
        params = SearchWithMemoryInputSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = dict(params.validated_data)
        part = data.pop("memory")
        scope = _scope(_valid(ScopeSerializer, part["scope"]))
        filters = filters_of(part)
        memory_mode = part.get("mode")
        needs_vector = data["mode"] != "fulltext" or memory_mode not in ("fulltext", "recency")
        # as memory search normalises its query (stored text is NFC)
        vector = embed_soon(unicodedata.normalize("NFC", data["query"])) if needs_vector else None
        # side by side: the memory half (graph reads only) on a thread of its own, the knowledge half here
        memory_half = _memory_halves.submit(
            selectors.memories_search,
            project_id=project_id,
            scope=scope,
            query=data["query"],
            top_k=part["top_k"],
            mode=memory_mode,
            depth=part["depth"],
            min_score=part.get("min_score"),
            filters=filters,
            vector=vector,
        )
        try:
            knowledge = search_validated(project_id, data, vector=vector)
        except BaseException:
            wait([memory_half])  # nothing of this request goes on after its answer
            raise
        memory = memory_half.result()
        took_ms = round((time.perf_counter() - started) * 1000, 2)
        return Response({"knowledge": search_body(knowledge), "memory": asdict(memory), "took_ms": took_ms})


class MemoryContextInputSerializer(MemorySearchInputSerializer):
    """The memory search's body without `depth` (a context holds every level), and the budget."""

    depth = None
    max_tokens = serializers.IntegerField(
        min_value=context.MIN_MAX_TOKENS,
        max_value=context.MAX_MAX_TOKENS,
        default=context.DEFAULT_MAX_TOKENS,
        help_text="the block's budget in tokens (tiktoken cl100k_base); never exceeded",
    )
    neighbours = serializers.IntegerField(
        min_value=0,
        max_value=context.MAX_NEIGHBOURS,
        default=context.DEFAULT_NEIGHBOURS,
        help_text="turns before and after each hit, of its conversation, to include",
    )


class ContextItemSerializer(serializers.Serializer):
    id = serializers.CharField()
    level = serializers.ChoiceField(choices=("message", "summary", "fact", "preference"))
    timestamp = serializers.CharField(allow_null=True)
    conversation_id = serializers.CharField(allow_null=True)
    role = serializers.CharField(allow_null=True)
    text = serializers.CharField()
    reason = serializers.ChoiceField(choices=("hit", "neighbour", "summary", "fact", "preference"))
    sources = serializers.ListField(
        child=serializers.CharField(), help_text="a fact's or preference's source turns (message ids)"
    )


class MemoryContextOutputSerializer(serializers.Serializer):
    context = serializers.CharField(allow_blank=True)
    tokens = serializers.IntegerField()
    items = ContextItemSerializer(many=True)
    took_ms = serializers.FloatField()


class MemoryContextApi(ProjectApi):
    """POST /projects/{pid}/memories/context — the memories relevant to a query as one token-budgeted
    block for an agent's prompt (memory.context)."""

    required_scope = "read"

    @extend_schema(request=MemoryContextInputSerializer, responses={200: MemoryContextOutputSerializer})
    def post(self, request: Request, project_id: str) -> Response:
        data, scope, filters = _searched(MemoryContextInputSerializer, request.data)
        result = context.memories_context(
            project_id=project_id,
            scope=scope,
            query=data["query"],
            max_tokens=data["max_tokens"],
            neighbours=data["neighbours"],
            top_k=data["top_k"],
            mode=data.get("mode"),
            min_score=data.get("min_score"),
            filters=filters,
        )
        return Response(MemoryContextOutputSerializer(result).data)


class MemoryDetailApi(ProjectApi):
    required_scope = None

    @extend_schema(operation_id="memory_get", responses={200: dict})
    def get(self, request: Request, project_id: str, memory_id: str) -> Response:
        return Response(selectors.memory_get(project_id=project_id, memory_id=memory_id))

    @extend_schema(responses={200: dict})
    def delete(self, request: Request, project_id: str, memory_id: str) -> Response:
        erased = services.memory_delete(
            project_id=project_id, memory_id=memory_id, requested_by=_requested_by(request)
        )
        return Response({"deleted": memory_id, "erased": erased})


class ScopeOnlySerializer(StrictSerializer):
    scope = ScopeField()


class MemoryForgetApi(ProjectApi):
    required_scope = "write"

    @extend_schema(request=ScopeOnlySerializer, responses={200: dict})
    def post(self, request: Request, project_id: str) -> Response:
        data, scope = _scoped(ScopeOnlySerializer, request.data)
        result = services.memories_forget(
            project_id=project_id, scope=scope, requested_by=_requested_by(request)
        )
        return Response(asdict(result))


class MemorySummarizeApi(ProjectApi):
    required_scope = "write"

    @extend_schema(request=ScopeOnlySerializer, responses={202: dict})
    def post(self, request: Request, project_id: str) -> Response:
        data, scope = _scoped(ScopeOnlySerializer, request.data)
        job_id = services.memories_summarize(project_id=project_id, scope=scope)
        return Response({"job_id": job_id}, status=status.HTTP_202_ACCEPTED)


class ConsolidateInputSerializer(StrictSerializer):
    scope = ScopeField()
    older_than_days = serializers.IntegerField(min_value=0, max_value=36_500, required=False)


class MemoryConsolidateApi(ProjectApi):
    required_scope = "write"

    @extend_schema(request=ConsolidateInputSerializer, responses={202: dict})
    def post(self, request: Request, project_id: str) -> Response:
        data, scope = _scoped(ConsolidateInputSerializer, request.data)
        job_id = services.memories_consolidate_queue(
            project_id=project_id,
            scope=scope,
            older_than_days=data.get("older_than_days", settings.MEMORY_CONSOLIDATE_AFTER_DAYS),
        )
        return Response({"job_id": job_id}, status=status.HTTP_202_ACCEPTED)


class ConversationReadSerializer(StrictSerializer):
    user_id = serializers.CharField(max_length=256, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)
    offset = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET, default=0)

    def validate_user_id(self, value: str) -> str | None:
        try:
            return validate_value("user_id", value)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message) from exc


class ConversationReferencesApi(ProjectApi):
    """GET /projects/{pid}/conversations/{cid}/references — the documents its messages referenced."""

    @extend_schema(parameters=[ConversationReadSerializer], responses={200: dict})
    def get(self, request: Request, project_id: str, conversation_id: str) -> Response:
        params = _valid(ConversationReadSerializer, request.query_params.dict())
        return Response(
            conversations.conversation_references(
                project_id=project_id,
                conversation_id=conversation_id,
                user_id=params.get("user_id"),
                **_page(params),
            )
        )


class DocumentConversationsApi(ProjectApi):
    """GET /projects/{pid}/documents/{id}/conversations — the conversations that referenced it."""

    @extend_schema(parameters=[ConversationReadSerializer], responses={200: dict})
    def get(self, request: Request, project_id: str, document_id: str) -> Response:
        params = _valid(ConversationReadSerializer, request.query_params.dict())
        return Response(
            conversations.document_conversations(
                project_id=project_id, document_id=document_id, user_id=params.get("user_id"), **_page(params)
            )
        )


def _page(params: dict[str, Any]) -> dict[str, int]:
    return {"limit": params["limit"], "offset": params["offset"]}


class ChatInputSerializer(StrictSerializer):
    message = serializers.CharField(trim_whitespace=False)
    user_id = serializers.CharField(max_length=MAX_SCOPE_VALUE_CHARS)
    conversation_id = serializers.CharField(max_length=200, required=False, allow_null=True)
    rag = serializers.BooleanField(default=True)
    persist = serializers.BooleanField(default=True)
    mode = serializers.ChoiceField(choices=ANSWER_MODES, required=False, allow_null=True)
    top_k = serializers.IntegerField(min_value=1, max_value=20, default=5)
    search_mode = serializers.ChoiceField(choices=CHAT_SEARCH_MODES, default="hybrid")
    turn_id = serializers.UUIDField(required=False, allow_null=True, format="hex_verbose")


class ChatReferenceSerializer(serializers.Serializer):
    n = serializers.IntegerField()
    document_id = serializers.CharField()
    title = serializers.CharField(allow_null=True)
    author = serializers.CharField(allow_null=True)
    updated_at = serializers.CharField(allow_null=True)
    source_path = serializers.CharField(allow_null=True)


class ChatOutputSerializer(serializers.Serializer):
    turn_id = serializers.CharField()
    conversation_id = serializers.CharField(allow_null=True)
    message_id = serializers.CharField(allow_null=True)
    reply_id = serializers.CharField(allow_null=True)
    job_id = serializers.CharField(allow_null=True)
    answer = serializers.CharField()
    references = ChatReferenceSerializer(many=True)
    answer_with_references = serializers.CharField()
    mode = serializers.CharField()
    timings_ms = serializers.DictField(child=serializers.FloatField())


class ChatApi(ProjectApi):
    """POST /projects/{pid}/conversations:chat — one chat turn (seed 003's agent loop). Storing needs
    the `write` scope; `persist: false` turns only read."""

    required_scope = None

    def get_permissions(self) -> list[Any]:
        body = self.request.data
        reads_only = isinstance(body, dict) and body.get("persist", True) is False
        self.required_scope = "read" if reads_only else "write"
        return super().get_permissions()

    @extend_schema(request=ChatInputSerializer, responses={200: ChatOutputSerializer})
    def post(self, request: Request, project_id: str) -> Response:
        data = _valid(ChatInputSerializer, request.data)
        if data.get("turn_id") is not None:
            data["turn_id"] = str(data["turn_id"])
        turn = chat.chat_turn(project_id=project_id, turn=chat.ChatTurnInput(**data))
        return Response(ChatOutputSerializer(turn).data)


class ConversationListApi(ProjectApi):
    """GET /projects/{pid}/conversations?user_id=… — conversations, the most recently active first."""

    @extend_schema(
        operation_id="conversations_list", parameters=[ConversationReadSerializer], responses={200: dict}
    )
    def get(self, request: Request, project_id: str) -> Response:
        params = _valid(ConversationReadSerializer, request.query_params.dict())
        items, total = conversations.conversations_list(
            project_id=project_id, user_id=params.get("user_id"), **_page(params)
        )
        return Response({"items": items, "total": total, **_page(params)})


class ConversationDetailApi(ProjectApi):
    """GET /projects/{pid}/conversations/{cid}?user_id=… — the conversation and a page of its messages."""

    @extend_schema(parameters=[ConversationReadSerializer], responses={200: dict})
    def get(self, request: Request, project_id: str, conversation_id: str) -> Response:
        params = _valid(ConversationReadSerializer, request.query_params.dict())
        return Response(
            conversations.conversation_detail(
                project_id=project_id,
                conversation_id=conversation_id,
                user_id=params.get("user_id"),
                **_page(params),
            )
        )
