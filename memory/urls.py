"""Routes of the memory app (mounted under /api/v1/)."""

urlpatterns: list = []
