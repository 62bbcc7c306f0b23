"""HTTP API of the core app: health and projects."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import selectors, services
from core.api.base import MAX_OFFSET, PlatformApi, ProjectApi, StrictSerializer
from core.auth.keys import request_api_key, request_project_id


class HealthzApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    @extend_schema(
        summary="Health of neo4j, redis, celery and llm",
        responses={200: OpenApiResponse(description="all required components up"), 503: None},
    )
    def get(self, request: Request) -> Response:
        report = selectors.health_report()
        code = status.HTTP_200_OK if report.ok else status.HTTP_503_SERVICE_UNAVAILABLE
        return Response(report.as_dict(), status=code)


class ProjectOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    embedder = serializers.CharField()
    embedding_dimensions = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class ProjectListOutputSerializer(serializers.Serializer):
    items = ProjectOutputSerializer(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()


class ProjectListCreateApi(PlatformApi):
    """GET lists the projects the caller may see (a key: its own; staff: all); POST creates one
    (staff users with `core.add_project`, or keys with the `admin` scope up to their
    API_KEY_PROJECT_QUOTA). One view because both live on /projects."""

    class ListSerializer(serializers.Serializer):
        limit = serializers.IntegerField(min_value=1, max_value=100, default=100)
        offset = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET, default=0)

    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=200, allow_blank=False, trim_whitespace=True)

    @property
    def required_scope(self) -> str:
        return "admin" if self.request.method == "POST" else "read"

    @property
    def staff_permission(self) -> str | None:
        return "core.add_project" if self.request.method == "POST" else None

    @extend_schema(
        operation_id="projects_list",
        parameters=[ListSerializer],
        responses={200: ProjectListOutputSerializer},
    )
    def get(self, request: Request) -> Response:
        params = self.ListSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        limit, offset = params.validated_data["limit"], params.validated_data["offset"]
        projects, total = selectors.project_list(
            project_id=request_project_id(request), limit=limit, offset=offset
        )
        return Response(
            {
                "items": ProjectOutputSerializer(projects, many=True).data,
                "total": total,
                "limit": limit,
                "offset": offset,
            }
        )

    @extend_schema(request=InputSerializer, responses={201: ProjectOutputSerializer})
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project = services.project_create(
            name=data.validated_data["name"], created_by_key=request_api_key(request)
        )
        return Response(ProjectOutputSerializer(project).data, status=status.HTTP_201_CREATED)


class ProjectDetailApi(ProjectApi):
    @extend_schema(responses={200: ProjectOutputSerializer})
    def get(self, request: Request, project_id: str) -> Response:
        project = selectors.project_get(project_id=project_id)
        return Response(ProjectOutputSerializer(project).data)


class JobOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    project_id = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    phase = serializers.CharField()
    progress_pct = serializers.IntegerField()
    counts = serializers.DictField()
    errors = serializers.ListField()
    token_usage = serializers.DictField()
    timings = serializers.DictField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class JobDetailApi(PlatformApi):
    @extend_schema(responses={200: JobOutputSerializer})
    def get(self, request: Request, job_id: str) -> Response:
        job = selectors.job_get(job_id=job_id, project_id=request_project_id(request))
        return Response(JobOutputSerializer(job).data)
