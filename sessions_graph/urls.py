"""Routes of the sessions_graph app (mounted under /api/v1/)."""

from django.urls import path

from sessions_graph.apis import (
    EventAppendApi,
    SessionDetailApi,
    SessionListCreateApi,
    SessionStateHistoryApi,
    SessionTimelineApi,
    SessionToolStatsApi,
)

BASE = "projects/<str:project_id>/apps/<str:app_name>/users/<str:user_id>/sessions"

urlpatterns = [
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
