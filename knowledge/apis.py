"""HTTP API of the knowledge app: documents, chunks and community rebuilds."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import MAX_OFFSET, ProjectApi, StrictSerializer
from core.api.parsers import FastJSONParser
from core.errors import InvalidInput, PlatformError
from core.text.metadata import metadata_errors
from knowledge import selectors, services
from knowledge.dto import DocumentInput, EntityInput, RelationInput
from knowledge.pipeline.parsing import (
    TEXT_TYPES,
    clean_text,
    guess_mime_type,
    parse_bytes,
    standardise_source_path,
)
from knowledge.references import document_reference_add


class EntitySerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    type = serializers.CharField(max_length=50)
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class RelationSerializer(StrictSerializer):
    source = serializers.CharField(max_length=200)
    target = serializers.CharField(max_length=200)
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    weight = serializers.FloatField(required=False, default=1.0, min_value=0.0, max_value=100.0)


class DocumentInputSerializer(StrictSerializer):
    title = serializers.CharField()
    text = serializers.CharField(trim_whitespace=False)
    source_path = serializers.CharField(max_length=2000, required=False, allow_null=True, allow_blank=True)
    mime_type = serializers.ChoiceField(choices=sorted(TEXT_TYPES), required=False, default="text/plain")
    author = serializers.CharField(max_length=500, required=False, allow_null=True, allow_blank=True)
    metadata = serializers.DictField(required=False, default=dict)
    entities = EntitySerializer(many=True, required=False, allow_null=True, default=None, max_length=2000)
    relations = RelationSerializer(many=True, required=False, allow_null=True, default=None, max_length=5000)
    references = serializers.ListField(
        child=serializers.CharField(max_length=2000), required=False, default=list, max_length=200
    )

    def validate_title(self, value: str) -> str:
        value = value.strip()
        if len(value) > settings.INGEST_MAX_TITLE_CHARS:
            raise serializers.ValidationError(f"at most {settings.INGEST_MAX_TITLE_CHARS} characters")
        return value

    def validate_text(self, value: str) -> str:
        if len(value) > settings.INGEST_MAX_TEXT_CHARS:
            raise serializers.ValidationError(f"at most {settings.INGEST_MAX_TEXT_CHARS} characters")
        value = clean_text(value)
        if not value:
            raise serializers.ValidationError("text is empty")
        return value

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        errors = metadata_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        entities, relations = attrs.get("entities"), attrs.get("relations")
        if relations and entities is None:
            raise serializers.ValidationError({"relations": "relations need the entities they connect"})
        names = {e["name"] for e in entities or []}
        unknown = sorted({n for r in relations or [] for n in (r["source"], r["target"]) if n not in names})
        if unknown:
            raise serializers.ValidationError({"relations": f"unknown entities: {', '.join(unknown[:20])}"})
        if any(r["source"] == r["target"] for r in relations or []):
            raise serializers.ValidationError({"relations": "a relation must connect two different entities"})
        try:
            attrs["source_path"] = standardise_source_path(attrs.get("source_path"))
        except InvalidInput as exc:
            raise serializers.ValidationError({"source_path": exc.message}) from exc
        return attrs


def _to_input(data: dict[str, Any]) -> DocumentInput:
    return DocumentInput(
        title=data["title"],
        text=data["text"],
        source_path=data.get("source_path"),
        mime_type=data.get("mime_type") or "text/plain",
        author=data.get("author") or None,
        metadata=data.get("metadata") or {},
        entities=None if data.get("entities") is None else [EntityInput(**e) for e in data["entities"]],
        relations=None if data.get("relations") is None else [RelationInput(**r) for r in data["relations"]],
        references=data.get("references") or [],
    )


class DocumentOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    source_path = serializers.CharField(allow_null=True)
    mime_type = serializers.CharField(allow_null=True)
    author = serializers.CharField(allow_null=True)
    content_hash = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    error = serializers.CharField(allow_null=True)
    metadata = serializers.DictField()
    counts = serializers.DictField()
    created_at = serializers.CharField(allow_null=True)
    updated_at = serializers.CharField(allow_null=True)


class DocumentListOutputSerializer(serializers.Serializer):
    items = DocumentOutputSerializer(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()


class DocumentListCreateApi(ProjectApi):
    parser_classes = [FastJSONParser, MultiPartParser]

    class BulkSerializer(StrictSerializer):
        documents = DocumentInputSerializer(many=True, allow_empty=False)

    class ListSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=["pending", "processing", "ready", "failed"], required=False)
        source_path = serializers.CharField(
            required=False, max_length=500, trim_whitespace=False, help_text="a glob: *, ** and ? (no regex)"
        )
        limit = serializers.IntegerField(min_value=1, max_value=500, default=50)
        offset = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET, default=0)

    @extend_schema(
        operation_id="documents_list",
        parameters=[ListSerializer],
        responses={200: DocumentListOutputSerializer},
    )
    def get(self, request: Request, project_id: str) -> Response:
        params = self.ListSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        query = {
            "project_id": project_id,
            "status": params.validated_data.get("status"),
            "limit": params.validated_data["limit"],
            "offset": params.validated_data["offset"],
        }
        glob = params.validated_data.get("source_path")
        if glob is not None:
            items, total = selectors.documents_by_source(glob=glob, **query)
        else:
            items, total = selectors.document_list(**query)
        return Response(
            {
                "items": DocumentOutputSerializer(items, many=True).data,
                "total": total,
                "limit": params.validated_data["limit"],
                "offset": params.validated_data["offset"],
            }
        )

    @extend_schema(request=DocumentInputSerializer, responses={202: None})
    def post(self, request: Request, project_id: str) -> Response:
        if request.content_type.startswith("multipart/"):
            documents = self._from_files(request)
            single = len(documents) == 1
        elif isinstance(request.data, dict) and "documents" in request.data:
            raw = request.data["documents"]
            if isinstance(raw, list) and len(raw) > settings.INGEST_MAX_DOCUMENTS:
                raise InvalidInput(
                    f"at most {settings.INGEST_MAX_DOCUMENTS} documents per request",
                    details={"documents": len(raw)},
                )
            bulk = self.BulkSerializer(data=request.data)
            bulk.is_valid(raise_exception=True)
            documents, single = [_to_input(d) for d in bulk.validated_data["documents"]], False
        else:
            one = DocumentInputSerializer(data=request.data)
            one.is_valid(raise_exception=True)
            documents, single = [_to_input(one.validated_data)], True
        result = services.documents_submit(project_id=project_id, documents=documents)
        if single:
            body: dict[str, Any] = {
                "document_id": result.documents[0].document_id,
                "job_id": result.job_id,
                "status": result.documents[0].status,
            }
        else:
            body = {
                "job_id": result.job_id,
                "documents": [{"document_id": d.document_id, "status": d.status} for d in result.documents],
            }
        return Response(body, status=status.HTTP_202_ACCEPTED)

    def _from_files(self, request: Request) -> list[DocumentInput]:
        files = request.FILES.getlist("file")
        if not files:
            raise InvalidInput("multipart upload needs one or more 'file' parts", details={"field": "file"})
        if len(files) > settings.INGEST_MAX_DOCUMENTS:
            raise InvalidInput(f"at most {settings.INGEST_MAX_DOCUMENTS} documents per request")
        documents = []
        for upload in files:
            try:  # PDF and HTML are parsed in a child process under limits (knowledge/pipeline/parsing.py)
                mime = guess_mime_type(upload.name or "", upload.content_type)
                text = parse_bytes(upload.read(), mime_type=mime)
            except PlatformError as exc:  # the error names the file (one upload may carry several)
                exc.details.setdefault("file", upload.name)
                raise
            if not text:
                raise InvalidInput(
                    f"{upload.name}: no text could be extracted", details={"file": upload.name}
                )
            fields = {
                "title": request.data.get("title")
                if len(files) == 1 and request.data.get("title")
                else upload.name,
                "text": text,
                "mime_type": "text/plain",
                "source_path": request.data.get("source_path") if len(files) == 1 else upload.name,
                "author": request.data.get("author"),
            }
            one = DocumentInputSerializer(data=fields)
            one.is_valid(raise_exception=True)
            data = dict(one.validated_data)
            data["mime_type"] = mime
            documents.append(_to_input(data))
        return documents


class DocumentDetailApi(ProjectApi):
    @extend_schema(responses={200: DocumentOutputSerializer})
    def get(self, request: Request, project_id: str, document_id: str) -> Response:
        return Response(
            DocumentOutputSerializer(
                selectors.document_get(project_id=project_id, document_id=document_id)
            ).data
        )

    @extend_schema(responses={204: None})
    def delete(self, request: Request, project_id: str, document_id: str) -> Response:
        services.document_delete(project_id=project_id, document_id=document_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChunkOutputSerializer(serializers.Serializer):
    chunk_id = serializers.CharField()
    document_id = serializers.CharField(allow_null=True)
    document_name = serializers.CharField()
    index = serializers.IntegerField(allow_null=True)
    text = serializers.CharField(allow_blank=True)


class ChunkDetailApi(ProjectApi):
    """One chunk's text, e.g. the evidence behind a DRIFT citation."""

    @extend_schema(responses={200: ChunkOutputSerializer})
    def get(self, request: Request, project_id: str, chunk_id: str) -> Response:
        return Response(
            ChunkOutputSerializer(selectors.chunk_get(project_id=project_id, chunk_id=chunk_id)).data
        )


class CommunitiesRebuildApi(ProjectApi):
    """202 {job_id, coalesced}: a rebuild already queued or running is returned instead of a new one."""

    @extend_schema(request=None, responses={202: None})
    def post(self, request: Request, project_id: str) -> Response:
        job, created = services.communities_rebuild_submit(project_id=project_id)
        return Response({"job_id": job.id, "coalesced": not created}, status=status.HTTP_202_ACCEPTED)


class ReferenceSerializer(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField(allow_null=True)
    author = serializers.CharField(allow_null=True)
    source_path = serializers.CharField(allow_null=True)
    updated_at = serializers.CharField(allow_null=True)
    direction = serializers.CharField()
    type = serializers.CharField()
    context = serializers.CharField(allow_null=True)
    created_at = serializers.CharField(allow_null=True)


class ReferenceListSerializer(serializers.Serializer):
    document_id = serializers.CharField()
    items = ReferenceSerializer(many=True)


class ReferenceAddSerializer(StrictSerializer):
    to_document_id = serializers.CharField(max_length=200)
    type = serializers.CharField(max_length=40, required=False, allow_null=True)
    context = serializers.CharField(max_length=2000, required=False, allow_null=True, allow_blank=True)


class DocumentReferencesApi(ProjectApi):
    """GET: the documents a document references (`out`), those referencing it (`in`), or both.
    POST: add a typed reference to another document of the project."""

    class QuerySerializer(StrictSerializer):
        direction = serializers.ChoiceField(choices=["out", "in", "both"], default="both")
        limit = serializers.IntegerField(min_value=1, max_value=500, default=100)
        offset = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET, default=0)

    @extend_schema(parameters=[QuerySerializer], responses={200: ReferenceListSerializer})
    def get(self, request: Request, project_id: str, document_id: str) -> Response:
        params = self.QuerySerializer(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        items = selectors.document_references(
            project_id=project_id, document_id=document_id, **params.validated_data
        )
        return Response({"document_id": document_id, "items": ReferenceSerializer(items, many=True).data})

    @extend_schema(request=ReferenceAddSerializer, responses={201: dict, 200: dict})
    def post(self, request: Request, project_id: str, document_id: str) -> Response:
        body = ReferenceAddSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        added = document_reference_add(
            project_id=project_id,
            from_document_id=document_id,
            to_document_id=body.validated_data["to_document_id"],
            type=body.validated_data.get("type"),
            context=body.validated_data.get("context"),
        )
        return Response(
            asdict(added), status=status.HTTP_201_CREATED if added.created else status.HTTP_200_OK
        )


class CitationGraphApi(ProjectApi):
    """The documents within `depth` (1..3) references of this one, citing and cited-by, with edges."""

    class QuerySerializer(StrictSerializer):
        depth = serializers.IntegerField(min_value=1, max_value=3, default=2)

    @extend_schema(parameters=[QuerySerializer], responses={200: dict})
    def get(self, request: Request, project_id: str, document_id: str) -> Response:
        params = self.QuerySerializer(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        return Response(
            selectors.citation_graph(
                project_id=project_id, document_id=document_id, depth=params.validated_data["depth"]
            )
        )
