"""HTTP API of the retrieval app: POST /api/v1/projects/{pid}/search."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import ProjectApi, QueryTextField, StrictSerializer
from core.errors import InvalidInput
from core.text.metadata import metadata_errors
from retrieval import services
from retrieval.conversation import ConversationQuery, conversation_search
from retrieval.dto import MODES, SOURCES, SearchFilters, SearchResult


class FiltersSerializer(StrictSerializer):
    document_ids = serializers.ListField(
        child=serializers.CharField(max_length=64), max_length=1000, required=False, allow_empty=False
    )
    source_path_prefix = serializers.CharField(max_length=2000, required=False)
    metadata = serializers.DictField(required=False)

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        errors = metadata_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return value


class ConversationSerializer(StrictSerializer):
    """Conversation-aware search: the conversation (of this user) the query is asked in."""

    conversation_id = serializers.CharField(max_length=200)
    user_id = serializers.CharField(max_length=256)
    past = serializers.IntegerField(min_value=0, max_value=50, required=False)
    referenced = serializers.IntegerField(min_value=0, max_value=50, required=False)
    recent = serializers.IntegerField(min_value=0, max_value=50, required=False)
    min_similarity = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)


class SearchInputSerializer(StrictSerializer):
    # trimmed after the length check, so blanks around a short query count toward the limit
    query = QueryTextField(max_setting="RETRIEVAL_MAX_QUERY_CHARS")
    mode = serializers.ChoiceField(choices=MODES, default="hybrid")
    top_k = serializers.IntegerField(min_value=1, max_value=100, default=10)
    profile = serializers.SlugField(max_length=64, required=False, allow_null=True)
    filters = FiltersSerializer(required=False)
    include_context = serializers.BooleanField(default=False)
    feedback = serializers.BooleanField(required=False, allow_null=True, default=None)
    debug = serializers.BooleanField(default=False)
    conversation = ConversationSerializer(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("feedback") is not None and attrs.get("mode", "hybrid") != "hybrid":
            raise serializers.ValidationError({"feedback": "applies to mode hybrid only"})
        if attrs.get("debug") and attrs.get("mode", "hybrid") != "graph":
            raise serializers.ValidationError({"debug": "applies to mode graph only"})
        return attrs


class SearchItemSerializer(serializers.Serializer):
    chunk_id = serializers.CharField(allow_null=True)
    document_id = serializers.CharField(allow_null=True)
    document_name = serializers.CharField()
    text = serializers.CharField()
    score = serializers.FloatField()
    metadata = serializers.DictField()
    source = serializers.ChoiceField(choices=SOURCES)
    sources = serializers.ListField(child=serializers.CharField(), required=False)
    memory_id = serializers.CharField(required=False)
    conversation_id = serializers.CharField(required=False)


class SearchOutputSerializer(serializers.Serializer):
    items = SearchItemSerializer(many=True)
    mode = serializers.CharField()
    profile = serializers.DictField(allow_null=True)
    took_ms = serializers.FloatField()
    timings_ms = serializers.DictField(child=serializers.FloatField())
    context = serializers.CharField(required=False)
    debug = serializers.DictField(required=False)
    fallback = serializers.DictField(child=serializers.CharField(), required=False)
    conversation = serializers.DictField(required=False)


class SearchApi(ProjectApi):
    required_scope = "read"

    @extend_schema(request=SearchInputSerializer, responses={200: SearchOutputSerializer})
    def post(self, request: Request, project_id: str) -> Response:
        params = SearchInputSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        return Response(search_body(search_validated(project_id, params.validated_data)))


def search_validated(
    project_id: str, data: dict[str, Any], vector: list[float] | Future[list[float]] | None = None
) -> SearchResult:
    """The search a body validated by SearchInputSerializer asks for; `vector`: the query's
    embedding (or its Future) when the caller has it already."""
    raw = data.get("filters") or {}
    filters = SearchFilters(
        document_ids=raw.get("document_ids"),
        source_path_prefix=raw.get("source_path_prefix") or None,
        metadata=raw.get("metadata") or {},
    )
    if data.get("conversation"):
        return _in_conversation(project_id, data, filters)
    return services.search_run(
        project_id=project_id,
        query=data["query"],
        mode=data["mode"],
        top_k=data["top_k"],
        filters=filters,
        profile_name=data.get("profile"),
        include_context=data["include_context"],
        feedback=data.get("feedback"),
        debug=data["debug"],
        vector=vector,
    )


def search_body(result: SearchResult) -> dict[str, Any]:
    """A search's response body, without the optional parts it does not have."""
    body: dict[str, Any] = SearchOutputSerializer(result).data
    for optional in ("context", "debug", "fallback", "conversation"):
        if getattr(result, optional) is None:
            body.pop(optional, None)
    for item in body["items"]:
        for key in ("sources", "memory_id", "conversation_id"):
            if item.get(key) is None:
                item.pop(key, None)
    return body


def _in_conversation(project_id: str, data: dict[str, Any], filters: SearchFilters) -> SearchResult:
    for alone in ("profile", "feedback"):
        if data.get(alone) is not None:
            raise InvalidInput(
                f"{alone} does not apply to a conversation-aware search", details={"field": alone}
            )
    return conversation_search()(
        project_id=project_id,
        query=data["query"],
        mode=data["mode"],
        top_k=data["top_k"],
        filters=filters,
        conversation=ConversationQuery(**data["conversation"]),
        include_context=data["include_context"],
    )
