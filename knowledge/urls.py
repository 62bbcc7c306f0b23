"""Routes of the knowledge app (mounted under /api/v1/)."""

from django.urls import path

from knowledge.apis import (
    ChunkDetailApi,
    CitationGraphApi,
    CommunitiesRebuildApi,
    DocumentDetailApi,
    DocumentListCreateApi,
    DocumentReferencesApi,
)

urlpatterns = [
    path("projects/<str:project_id>/documents", DocumentListCreateApi.as_view(), name="documents"),
    path(
        "projects/<str:project_id>/documents/<str:document_id>", DocumentDetailApi.as_view(), name="document"
    ),
    path(
        "projects/<str:project_id>/documents/<str:document_id>/references",
        DocumentReferencesApi.as_view(),
        name="document-references",
    ),
    path(
        "projects/<str:project_id>/documents/<str:document_id>/citation-graph",
        CitationGraphApi.as_view(),
        name="document-citation-graph",
    ),
    path("projects/<str:project_id>/chunks/<str:chunk_id>", ChunkDetailApi.as_view(), name="chunk"),
    path(
        "projects/<str:project_id>/communities:rebuild",
        CommunitiesRebuildApi.as_view(),
        name="communities-rebuild",
    ),
]
