"""Base classes for the platform's DRF views."""

from __future__ import annotations

from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from core.auth import HasScope, ProjectAccess

# The largest `offset` of a paginated list: Neo4j's SKIP and SQLite's OFFSET take 64-bit integers
# (a larger one is an error of the driver, not an empty page), and nobody pages a billion rows.
MAX_OFFSET = 1_000_000_000


class PlatformApi(APIView):
    """Authenticated (API key or staff session) and scope-checked."""

    permission_classes = [IsAuthenticated, HasScope]


class ProjectApi(APIView):
    """A view under /projects/{project_id}/: another project's id answers 404 before scopes are checked."""

    permission_classes = [IsAuthenticated, ProjectAccess, HasScope]
