"""Writes of the core app: projects and API keys."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core import graph
from core.auth.keys import keys_changed
from core.auth.signals import key_sockets_close
from core.dto import IssuedApiKey, ProjectData
from core.errors import Conflict, InvalidInput, NotFound, QuotaExceeded
from core.models import SCOPES, ApiKey, Project
from core.nodes import ProjectNode
from core.selectors import project_data

RATE_RE = re.compile(r"^[1-9][0-9]{0,6}/(s|sec|second|m|min|minute|h|hour|d|day)$")


def project_create(*, name: str, created_by_key: ApiKey | None = None) -> ProjectData:
    """Create the SQL row and the graph mirror together: if Neo4j fails, the row is rolled back.

    A project created through an API key counts against that key's API_KEY_PROJECT_QUOTA."""
    name = name.strip()
    if not name or len(name) > 200:
        raise InvalidInput("project name must be 1 to 200 characters", details={"field": "name"})
    embedder = f"{settings.EMBEDDINGS_PROVIDER}:{settings.EMBEDDINGS_MODEL}"
    with transaction.atomic():
        if created_by_key is not None:
            # the key's row is locked (PostgreSQL) so concurrent requests cannot both pass the check;
            # SQLite serialises writers anyway
            ApiKey.objects.select_for_update().filter(pk=created_by_key.pk).first()
            quota = settings.API_KEY_PROJECT_QUOTA
            used = Project.objects.filter(created_by_key=created_by_key).count()
            if used >= quota:
                raise QuotaExceeded(
                    f"this API key has created {used} projects, its quota is {quota}; "
                    "ask a staff user to create more",
                    details={"quota": quota, "used": used},
                )
        row = Project.objects.create(
            created_by_key=created_by_key,
            name=name,
            embedder=embedder,
            embedding_dimensions=settings.EMBEDDINGS_DIMENSIONS,
            chunk_size_tokens=settings.CHUNK_SIZE_TOKENS,
            chunk_overlap_tokens=settings.CHUNK_OVERLAP_TOKENS,
        )
        with graph.translate_errors():
            ProjectNode(
                uid=row.id,
                project_id=row.id,
                name=row.name,
                embedder=row.embedder,
                embedding_dimensions=row.embedding_dimensions,
            ).save()
    return project_data(row)


def api_key_create(*, project_id: str, name: str, scopes: list[str], rate_limit: str = "") -> IssuedApiKey:
    scopes = sorted({s.strip() for s in scopes if s.strip()})
    unknown = [s for s in scopes if s not in SCOPES]
    if not scopes or unknown:
        raise InvalidInput(
            f"scopes must be a non-empty subset of {', '.join(SCOPES)}", details={"unknown": unknown}
        )
    if not name.strip():
        raise InvalidInput("API key name must not be empty", details={"field": "name"})
    if rate_limit and not RATE_RE.match(rate_limit):
        raise InvalidInput(
            "rate limit must look like 100/min (periods: s, min, hour, day)", details={"field": "rate_limit"}
        )
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound(f"project {project_id} does not exist")
    full_key, prefix, secret = ApiKey.generate()
    row = ApiKey.objects.create(
        project=project,
        name=name.strip(),
        prefix=prefix,
        secret_hash=ApiKey.hash_secret(secret),
        scopes=scopes,
        rate_limit=rate_limit,
    )
    return IssuedApiKey(
        id=row.pk, project_id=project.id, name=row.name, prefix=prefix, scopes=scopes, key=full_key
    )


def api_key_revoke(*, key_id: int) -> None:
    """Revoke a key; its open websockets are closed once this commits."""
    prefix = ApiKey.objects.filter(pk=key_id).values_list("prefix", flat=True).first()
    keys_changed()
    if ApiKey.objects.filter(pk=key_id, revoked_at__isnull=True).update(revoked_at=timezone.now()):
        key_sockets_close(prefix=str(prefix))


def project_graph_changed(*, project_id: str) -> None:
    """The project's documents, chunks or the links between them changed (committed in Neo4j):
    caches of its graph are stale from now on."""
    Project.objects.filter(pk=project_id).update(graph_version=F("graph_version") + 1)


def project_embedder_check(*, project: Project) -> None:
    """409 when the project's vectors come from another embedder than the one configured now."""
    configured = f"{settings.EMBEDDINGS_PROVIDER}:{settings.EMBEDDINGS_MODEL}"
    if project.embedder != configured or project.embedding_dimensions != settings.EMBEDDINGS_DIMENSIONS:
        raise Conflict(
            f"project uses {project.embedder} ({project.embedding_dimensions} dims) but the platform is "
            f"configured for {configured} ({settings.EMBEDDINGS_DIMENSIONS} dims)",
            details={"project_embedder": project.embedder, "configured": configured},
        )
