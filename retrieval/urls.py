"""Routes of the retrieval app (mounted under /api/v1/)."""

from django.urls import path

from retrieval.apis import SearchApi

urlpatterns = [
    path("projects/<str:project_id>/search", SearchApi.as_view(), name="search"),
]
