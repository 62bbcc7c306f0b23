from __future__ import annotations

from typing import Any

from core import graph

# a node whose text properties (or lists of text) contain $c
CARRIES = (
    "any(k IN keys(n) WHERE (n[k] IS :: STRING AND n[k] CONTAINS $c) "
    "OR (n[k] IS :: LIST<STRING NOT NULL> AND any(x IN n[k] WHERE x CONTAINS $c)))"
)


def carriers(project_id: str, canary: str) -> list[dict[str, Any]]:
    """Every node of the project that still holds `canary` in a text property."""
    return graph.read(
        f"MATCH (n {{project_id: $p}}) WHERE {CARRIES} RETURN labels(n)[0] AS label, n.id AS id",
        p=project_id,
        c=canary,
    )


def privacy(client: Any, project_id: str, conversation_id: str, **body: Any) -> Any:
    return client.patch(
        f"/api/v1/projects/{project_id}/conversations/{conversation_id}/privacy", body, format="json"
    )


def snapshot(project_id: str) -> list[dict[str, Any]]:
    """Every node of the project with its properties but vectors (to prove nothing was written)."""
    return graph.read(
        "MATCH (n {project_id: $p}) RETURN labels(n)[0] AS label, n {.*, embedding: null} AS props "
        "ORDER BY label, n.id",
        p=project_id,
    )
