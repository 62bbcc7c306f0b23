"""Routes of the sessions_graph app (mounted under /api/v1/)."""

from django.urls import path

from sessions_graph.apis import (
    AppSessionListApi,
    EventAppendApi,
    SessionDetailApi,
    SessionListCreateApi,
    SessionMemoryApi,
    SessionMemoryItemApi,
    SessionMemorySearchApi,
    SessionStateHistoryApi,
    SessionTimelineApi,
    SessionToolStatsApi,
    UserStateApi,
)

APP = "projects/<str:project_id>/apps/<str:app_name>"
USER = f"{APP}/users/<str:user_id>"
BASE = f"{USER}/sessions"

urlpatterns = [
    path(f"{APP}/sessions", AppSessionListApi.as_view(), name="app-sessions"),
    path(f"{USER}/state", UserStateApi.as_view(), name="user-state"),
    path(f"{USER}/memory", SessionMemoryApi.as_view(), name="session-memory"),
    path(f"{USER}/memory/search", SessionMemorySearchApi.as_view(), name="session-memory-search"),
    path(f"{USER}/memory/<str:memory_id>", SessionMemoryItemApi.as_view(), name="session-memory-item"),
    path(BASE, SessionListCreateApi.as_view(), name="sessions"),
    path(f"{BASE}/<str:session_id>", SessionDetailApi.as_view(), name="session"),
    path(f"{BASE}/<str:session_id>/events", EventAppendApi.as_view(), name="session-events"),
    path(f"{BASE}/<str:session_id>/timeline", SessionTimelineApi.as_view(), name="session-timeline"),
    path(f"{BASE}/<str:session_id>/tool-calls", SessionToolStatsApi.as_view(), name="session-tool-calls"),
    path(
        f"{BASE}/<str:session_id>/state-history",
        SessionStateHistoryApi.as_view(),
        name="session-state-history",
    ),
]
