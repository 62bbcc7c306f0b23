"""HTTP API of curation: conversation privacy, project privacy defaults, erasure requests."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import ProjectApi, StrictSerializer
from core.models import ACCESSIBILITY
from curation import selectors, services
from curation.models import ErasureRequest


def actor_of(request: Request) -> str:
    key = getattr(request, "auth", None)
    prefix = getattr(key, "prefix", None)
    if prefix:
        return f"api_key:kp_{prefix}"
    return f"user:{request.user.get_username()}"


class SettingsInput(StrictSerializer):
    """A change of settings: only known fields, and at least one of them."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("give at least one setting to change")
        return attrs


class ConversationPrivacyApi(ProjectApi):
    """GET/PATCH /projects/{pid}/conversations/{id}/privacy — seed 003's privacy settings."""

    @property
    def staff_permission(self) -> str | None:
        """A staff session changes privacy with the curator permission (core.auth.keys.HasScope)."""
        return "curation.change_privacy" if self.request.method == "PATCH" else None

    class ConversationPrivacyInputSerializer(SettingsInput):
        accessibility = serializers.ChoiceField(choices=ACCESSIBILITY, required=False)
        retention_days = serializers.IntegerField(
            min_value=1, max_value=36_500, required=False, allow_null=True
        )
        anonymize = serializers.BooleanField(required=False)
        expires_at = serializers.DateTimeField(required=False, allow_null=True)

    @extend_schema(responses={200: dict})
    def get(self, request: Request, project_id: str, conversation_id: str) -> Response:
        return Response(
            selectors.conversation_privacy_get(project_id=project_id, conversation_id=conversation_id)
        )

    @extend_schema(request=ConversationPrivacyInputSerializer, responses={200: dict})
    def patch(self, request: Request, project_id: str, conversation_id: str) -> Response:
        serializer = self.ConversationPrivacyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        changes: dict[str, Any] = {k: data[k] for k in ("retention_days", "expires_at") if k in data}
        conversation = services.conversation_privacy_set(
            project_id=project_id,
            conversation_id=conversation_id,
            actor=actor_of(request),
            accessibility=data.get("accessibility"),
            anonymize=data.get("anonymize"),
            **changes,
        )
        return Response(conversation)


class ProjectPrivacyApi(ProjectApi):
    """GET/PATCH /projects/{pid}/privacy — defaults of new conversations and redaction at ingest."""

    class ProjectPrivacyInputSerializer(SettingsInput):
        default_accessibility = serializers.ChoiceField(choices=ACCESSIBILITY, required=False)
        default_retention_days = serializers.IntegerField(
            min_value=1, max_value=36_500, required=False, allow_null=True
        )
        default_anonymize = serializers.BooleanField(required=False)
        redact_pii_at_ingest = serializers.BooleanField(required=False)

    @property
    def required_scope(self) -> str:
        return "read" if self.request.method == "GET" else "admin"

    @property
    def staff_permission(self) -> str | None:
        return "core.change_project" if self.request.method == "PATCH" else None

    @extend_schema(responses={200: dict})
    def get(self, request: Request, project_id: str) -> Response:
        return Response(services.project_privacy_get(project_id=project_id))

    @extend_schema(request=ProjectPrivacyInputSerializer, responses={200: dict})
    def patch(self, request: Request, project_id: str) -> Response:
        serializer = self.ProjectPrivacyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(
            services.project_privacy_set(
                project_id=project_id, actor=actor_of(request), **serializer.validated_data
            )
        )


class ErasureOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = ErasureRequest
        fields = (
            "id",
            "project",
            "user_id",
            "status",
            "counts",
            "requested_by",
            "took_ms",
            "created_at",
            "finished_at",
        )


class ErasureRequestApi(ProjectApi):
    """POST /projects/{pid}/erasure-requests {user_id} — erase everything of one user (202, then poll)."""

    required_scope = "admin"
    staff_permission = "curation.run_erasurerequest"

    class ErasureInputSerializer(StrictSerializer):
        user_id = serializers.CharField(max_length=256)

        def to_internal_value(self, data: Any) -> Any:
            if isinstance(data, dict) and "user_id" in data and not isinstance(data["user_id"], str):
                raise serializers.ValidationError({"user_id": ["must be a string"]})  # 5 is not "5"
            return super().to_internal_value(data)

    @extend_schema(request=ErasureInputSerializer, responses={202: ErasureOutputSerializer})
    def post(self, request: Request, project_id: str) -> Response:
        serializer = self.ErasureInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        erasure = services.erasure_request_create(
            project_id=project_id, user_id=serializer.validated_data["user_id"], actor=actor_of(request)
        )
        return Response(ErasureOutputSerializer(erasure).data, status=status.HTTP_202_ACCEPTED)


class ErasureRequestDetailApi(ProjectApi):
    required_scope = "admin"
    staff_permission = "curation.view_erasurerequest"

    @extend_schema(responses={200: ErasureOutputSerializer})
    def get(self, request: Request, project_id: str, request_id: str) -> Response:
        erasure = selectors.erasure_request_get(project_id=project_id, request_id=request_id)
        return Response(ErasureOutputSerializer(erasure).data)
