"""Base classes for the platform's DRF views."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from core.auth.keys import HasScope, ProjectAccess
from core.llm.usage import project_tokens_add, usage_meter

# The largest `offset` of a paginated list: Neo4j's SKIP and SQLite's OFFSET take 64-bit integers
# (a larger one is an error of the driver, not an empty page), and nobody pages a billion rows.
MAX_OFFSET = 1_000_000_000


class PlatformApi(APIView):
    """Authenticated (API key or staff session) and scope-checked."""

    permission_classes = [IsAuthenticated, HasScope]


class ProjectApi(APIView):
    """A view under /projects/{project_id}/: another project's id answers 404 before scopes are checked.
    The LLM tokens its request spends (a chat turn, a summary) count for the project's day."""

    permission_classes = [IsAuthenticated, ProjectAccess, HasScope]

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        with usage_meter() as used:
            response = super().dispatch(request, *args, **kwargs)
        if used.total_tokens and kwargs.get("project_id"):
            project_tokens_add(str(kwargs["project_id"]), used.total_tokens)
        return response


class StrictSerializer(serializers.Serializer):
    """An input serializer whose unknown fields are an error (400 naming them), not silently ignored:
    a misspelt optional field would otherwise fall back to its default without a word."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({k: ["unknown field"] for k in unknown[:20]})
        return super().to_internal_value(data)


class QueryTextField(serializers.CharField):
    """A search query: at most `getattr(settings, max_setting)` characters as sent (read when the
    request is validated, so the setting can change without a restart), then trimmed; blank only when
    `allow_blank`. NUL characters are refused by DRF's CharField itself."""

    def __init__(self, *, max_setting: str, **kwargs: Any) -> None:
        self.max_setting = max_setting
        super().__init__(trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        limit = int(getattr(settings, self.max_setting))
        if len(value) > limit:
            raise serializers.ValidationError(f"at most {limit} characters")
        value = value.strip()
        if not value and not self.allow_blank:
            raise serializers.ValidationError(self.error_messages["blank"])
        return value
