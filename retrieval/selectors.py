"""Read side of the retrieval app."""

from __future__ import annotations

from django.db.models import Q

from core.errors import InvalidInput
from retrieval.models import RetrievalProfile


def profile_get(*, name: str, project_id: str) -> RetrievalProfile:
    """An enabled profile visible to the project (global or the project's own); 400 otherwise."""
    profile = (
        RetrievalProfile.objects.filter(name=name, enabled=True)
        .filter(Q(project__isnull=True) | Q(project_id=project_id))
        .first()
    )
    if profile is None:
        raise InvalidInput(
            f"unknown profile {name!r}",
            details={"field": "profile", "profiles": profile_names(project_id=project_id)},
        )
    return profile


def profile_names(*, project_id: str) -> list[str]:
    return list(
        RetrievalProfile.objects.filter(enabled=True)
        .filter(Q(project__isnull=True) | Q(project_id=project_id))
        .values_list("name", flat=True)
    )
