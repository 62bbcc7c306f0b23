"""Memory's step of the start-up warm-up (core.runtime.warmup): a hybrid memory search in the scope
of a user who has memories in the project (a made-up one when nobody has)."""

from __future__ import annotations

from core import graph
from core.runtime.warmup import warmup_register
from memory.scope import Scope
from memory.selectors import memories_search

ANY_USER = (
    "MATCH (m:Memory {project_id: $project_id}) WHERE m.user_id IS NOT NULL RETURN m.user_id AS u LIMIT 1"
)


def _memory_search(project_id: str, query: str, vector: list[float]) -> None:
    rows = graph.read(ANY_USER, project_id=project_id)
    user_id = rows[0]["u"] if rows else "warm-up"
    memories_search(
        project_id=project_id,
        scope=Scope(user_id=user_id),
        query=query,
        top_k=10,
        mode="hybrid",
        depth="summaries",
        vector=vector,
    )


def register() -> None:
    warmup_register("memory search", _memory_search)
