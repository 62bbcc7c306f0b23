"""Routes of the knowledge app (mounted under /api/v1/)."""

from django.urls import path

from knowledge.apis import ChunkDetailApi, CommunitiesRebuildApi, DocumentDetailApi, DocumentListCreateApi

urlpatterns = [
    path("projects/<str:project_id>/documents", DocumentListCreateApi.as_view(), name="documents"),
    path(
        "projects/<str:project_id>/documents/<str:document_id>", DocumentDetailApi.as_view(), name="document"
    ),
    path("projects/<str:project_id>/chunks/<str:chunk_id>", ChunkDetailApi.as_view(), name="chunk"),
    path(
        "projects/<str:project_id>/communities:rebuild",
        CommunitiesRebuildApi.as_view(),
        name="communities-rebuild",
    ),
]
