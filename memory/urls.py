"""Routes of the memory app (mounted under /api/v1/)."""

from django.urls import path

from memory.apis import (
    ChatApi,
    ConversationDetailApi,
    ConversationListApi,
    ConversationReferencesApi,
    DocumentConversationsApi,
    MemoryConsolidateApi,
    MemoryContextApi,
    MemoryDetailApi,
    MemoryForgetApi,
    MemorySearchApi,
    MemoryStoreApi,
    MemorySummarizeApi,
    SearchWithMemoryApi,
)

urlpatterns = [
    path("projects/<str:project_id>/conversations:chat", ChatApi.as_view(), name="conversation-chat"),
    path("projects/<str:project_id>/conversations", ConversationListApi.as_view(), name="conversations"),
    path(
        "projects/<str:project_id>/conversations/<str:conversation_id>",
        ConversationDetailApi.as_view(),
        name="conversation",
    ),
    path(
        "projects/<str:project_id>/conversations/<str:conversation_id>/references",
        ConversationReferencesApi.as_view(),
        name="conversation-references",
    ),
    path(
        "projects/<str:project_id>/documents/<str:document_id>/conversations",
        DocumentConversationsApi.as_view(),
        name="document-conversations",
    ),
    path("projects/<str:project_id>/memories", MemoryStoreApi.as_view(), name="memory-store"),
    path("projects/<str:project_id>/memories/search", MemorySearchApi.as_view(), name="memory-search"),
    path(
        "projects/<str:project_id>/search:with-memory",
        SearchWithMemoryApi.as_view(),
        name="search-with-memory",
    ),
    path("projects/<str:project_id>/memories/context", MemoryContextApi.as_view(), name="memory-context"),
    path("projects/<str:project_id>/memories:forget", MemoryForgetApi.as_view(), name="memory-forget"),
    path(
        "projects/<str:project_id>/memories:summarize", MemorySummarizeApi.as_view(), name="memory-summarize"
    ),
    path(
        "projects/<str:project_id>/memories:consolidate",
        MemoryConsolidateApi.as_view(),
        name="memory-consolidate",
    ),
    path(
        "projects/<str:project_id>/memories/<str:memory_id>", MemoryDetailApi.as_view(), name="memory-detail"
    ),
]
