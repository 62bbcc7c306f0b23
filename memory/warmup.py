"""Memory's step of the start-up warm-up (core.runtime.warmup): a memory search through its API view
with the API's defaults, in the scope of a user who has memories in the project (a made-up one when
nobody has)."""

from __future__ import annotations

from django.urls import reverse

from core import graph
from core.runtime.warmup import api_post, warmup_register

ANY_USER = (
    "MATCH (m:Memory {project_id: $project_id}) WHERE m.user_id IS NOT NULL RETURN m.user_id AS u LIMIT 1"
)


def _memory_search(project_id: str, query: str) -> None:
    rows = graph.read(ANY_USER, project_id=project_id)
    user_id = rows[0]["u"] if rows else "warm-up"
    path = reverse("memory-search", kwargs={"project_id": project_id})
    api_post(path, {"query": query, "scope": {"user_id": user_id}}, project_id=project_id)


def register() -> None:
    warmup_register("memory search", _memory_search)
