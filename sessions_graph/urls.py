"""Routes of the sessions_graph app (mounted under /api/v1/)."""

from django.urls import path

from sessions_graph.apis import (
    EventAppendApi,
    SessionDetailApi,
    SessionListCreateApi,
    SessionMemoryApi,
    SessionMemorySearchApi,
    SessionStateHistoryApi,
    SessionTimelineApi,
    SessionToolStatsApi,
)

USER = "projects/<str:project_id>/apps/<str:app_name>/users/<str:user_id>"
BASE = f"{USER}/sessions"

urlpatterns = [
    path(f"{USER}/memory", SessionMemoryApi.as_view(), name="session-memory"),
    path(f"{USER}/memory/search", SessionMemorySearchApi.as_view(), name="session-memory-search"),
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
