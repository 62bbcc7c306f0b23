"""Routes of the retrieval app (mounted under /api/v1/)."""

urlpatterns: list = []
