"""Routes of curation (mounted under /api/v1/)."""

from django.urls import path

from curation.apis import (
    ConversationPrivacyApi,
    ErasureRequestApi,
    ErasureRequestDetailApi,
    ProjectPrivacyApi,
)

urlpatterns = [
    path("projects/<str:project_id>/privacy", ProjectPrivacyApi.as_view(), name="project-privacy"),
    path(
        "projects/<str:project_id>/conversations/<str:conversation_id>/privacy",
        ConversationPrivacyApi.as_view(),
        name="conversation-privacy",
    ),
    path("projects/<str:project_id>/erasure-requests", ErasureRequestApi.as_view(), name="erasure-requests"),
    path(
        "projects/<str:project_id>/erasure-requests/<str:request_id>",
        ErasureRequestDetailApi.as_view(),
        name="erasure-request-detail",
    ),
]
