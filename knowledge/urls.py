"""Routes of the knowledge app (mounted under /api/v1/)."""

urlpatterns: list = []
