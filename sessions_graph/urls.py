"""Routes of the sessions_graph app (mounted under /api/v1/)."""

urlpatterns: list = []
