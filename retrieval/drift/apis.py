"""POST /retrieve: DRIFT search with seed 002's request and response contract."""

from __future__ import annotations

import logging
import re
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import PlatformApi, QueryTextField, StrictSerializer
from core.auth.keys import is_staff, mark_probe, request_project_id
from core.errors import NotFound, PlatformError, unavailable_dependency
from core.llm.usage import project_tokens_add
from core.models import Project
from retrieval.drift.services import drift_search

logger = logging.getLogger("retrieval.drift")

RETRIEVAL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class RetrievalFailed(PlatformError):
    """An infrastructure failure during DRIFT (the LLM or Neo4j down): seed 002's 500."""

    status_code = 500
    code = "retrieval_failed"


class RetrieveInputSerializer(StrictSerializer):
    query = QueryTextField(max_setting="RETRIEVAL_MAX_QUERY_CHARS")
    project_id = serializers.CharField(max_length=64)
    top_k = serializers.IntegerField(min_value=1, max_value=50, required=False)
    retrieval_id = serializers.CharField(max_length=64, required=False)
    max_depth = serializers.IntegerField(min_value=1, max_value=4, required=False)
    max_followups = serializers.IntegerField(min_value=1, max_value=10, required=False)
    community_level = serializers.IntegerField(min_value=0, max_value=20, required=False, allow_null=True)

    def validate_retrieval_id(self, value: str) -> str:
        if not RETRIEVAL_ID.match(value):
            raise serializers.ValidationError("1-64 characters of A-Z, a-z, 0-9, _ and -")
        return value


class CitationField(serializers.JSONField):
    """A citation object {chunk_id, span, document_name}, or a chunk id string (fallback)."""


class KeyFactSerializer(serializers.Serializer):
    fact = serializers.CharField()
    citations = serializers.ListField(child=CitationField())


class RetrieveOutputSerializer(serializers.Serializer):
    final_answer = serializers.CharField(allow_blank=True)
    key_facts = KeyFactSerializer(many=True)
    residual_uncertainty = serializers.CharField(allow_blank=True)
    no_data_found = serializers.BooleanField(required=False)
    mode = serializers.ChoiceField(choices=["llm", "extractive"])
    retrieval_id = serializers.CharField()
    usage = serializers.DictField(child=serializers.IntegerField())
    stats = serializers.DictField()
    took_ms = serializers.FloatField()
    timings_ms = serializers.DictField(child=serializers.FloatField())


class RetrieveApi(PlatformApi):
    """DRIFT search over a project's communities and chunks; progress goes to the project's websocket."""

    required_scope = "read"

    @extend_schema(request=RetrieveInputSerializer, responses={200: RetrieveOutputSerializer})
    def post(self, request: Request) -> Response:
        params = RetrieveInputSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        project_id = data["project_id"]
        # a key sees only its own project; another project's id is answered as if it did not exist
        if not is_staff(request) and request_project_id(request) != project_id:
            mark_probe(request, "foreign_project")
            raise NotFound("project not found")
        if not Project.objects.filter(pk=project_id).exists():
            raise NotFound("project not found")
        try:
            outcome, figures = drift_search(
                project_id=project_id,
                query=data["query"],
                top_k=data.get("top_k"),
                max_depth=data.get("max_depth"),
                max_followups=data.get("max_followups"),
                community_level=data.get("community_level"),
                retrieval_id=data.get("retrieval_id"),
            )
        except PlatformError as exc:
            if exc.status_code < 500:
                raise
            raise RetrievalFailed(
                "DRIFT search failed: a service it depends on is unavailable",
                details={"cause": exc.code, **exc.details},
            ) from exc
        except Exception as exc:
            unavailable = unavailable_dependency(exc)
            if unavailable is None:
                raise
            raise RetrievalFailed(
                "DRIFT search failed: a service it depends on is unavailable", details=unavailable.details
            ) from exc
        # the strategy meters its calls across its threads; the project's day counts them
        spent = figures.get("usage") or {}
        project_tokens_add(
            project_id, int(spent.get("prompt_tokens", 0)) + int(spent.get("completion_tokens", 0))
        )
        body: dict[str, Any] = {
            "final_answer": outcome.final_answer,
            "key_facts": outcome.key_facts,
            "residual_uncertainty": outcome.residual_uncertainty,
        }
        if outcome.no_data_found:
            body["no_data_found"] = True
        body.update(mode=outcome.mode, stats=outcome.stats, **figures)
        return Response(body)
