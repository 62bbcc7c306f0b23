"""Export and import endpoints (docs/api.md, "Export and import")."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import PlatformApi, ProjectApi, StrictSerializer
from core.auth.keys import request_api_key, request_project_id
from core.errors import InvalidInput
from portability import services

_JOB = inline_serializer("PortabilityJob", fields={"job_id": serializers.CharField()})


class ProjectExportApi(ProjectApi):
    """202 {job_id}: the project's export archive is written by a job; fetch it from
    /projects/{pid}/exports/{job_id} once the job succeeded. Admin scope: it holds everything."""

    required_scope = "admin"

    class ExportInputSerializer(StrictSerializer):
        format = serializers.ChoiceField(choices=sorted(services.FORMATS), default="ndjson")

    @extend_schema(request=ExportInputSerializer, responses={202: _JOB})
    def post(self, request: Request, project_id: str) -> Response:
        data = self.ExportInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = services.export_submit(project_id=project_id, fmt=data.validated_data["format"])
        return Response({"job_id": job.id}, status=status.HTTP_202_ACCEPTED)


class ProjectExportDownloadApi(ProjectApi):
    """The archive of a succeeded export job, streamed."""

    required_scope = "admin"

    @extend_schema(responses={(200, "application/octet-stream"): bytes})
    def get(self, request: Request, project_id: str, job_id: str) -> FileResponse:
        handle, filename, size = services.export_open(project_id=project_id, job_id=job_id)
        response = FileResponse(handle, as_attachment=True, filename=filename)
        response["Content-Length"] = str(size)
        return response


class ProjectImportApi(PlatformApi):
    """202 {project_id, job_id}: multipart `archive` (an export's .tar.gz), optional `project_id` (an
    empty project of the caller's; a new project otherwise) and `name` (of the new project). The
    archive is checked whole before anything is written: 400 when it is damaged or of a newer
    schema, 409 when its ids exist already or its embedder is not the project's."""

    parser_classes = [MultiPartParser]
    required_scope = "admin"
    staff_permission = "core.add_project"

    class ImportInputSerializer(StrictSerializer):
        archive = serializers.FileField(allow_empty_file=False)
        project_id = serializers.CharField(max_length=36, required=False)
        name = serializers.CharField(max_length=200, required=False, trim_whitespace=True)

    @extend_schema(
        request={"multipart/form-data": ImportInputSerializer},
        responses={
            202: inline_serializer(
                "ImportAccepted",
                fields={"project_id": serializers.CharField(), "job_id": serializers.CharField()},
            )
        },
    )
    def post(self, request: Request) -> Response:
        if len(request.FILES.getlist("archive")) > 1:
            raise InvalidInput("send one archive", details={"field": "archive"})
        data = self.ImportInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project, job = services.import_submit(
            upload=data.validated_data["archive"],
            project_id=data.validated_data.get("project_id"),
            name=data.validated_data.get("name"),
            created_by_key=request_api_key(request),
            caller_project_id=request_project_id(request),
        )
        return Response({"project_id": project.id, "job_id": job.id}, status=status.HTTP_202_ACCEPTED)
