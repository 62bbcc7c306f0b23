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


def tides_and_ferry(tenant: Any) -> tuple[str, str, dict[str, Any]]:
    """Two ingested documents that both name Porto, and a conversation whose question referenced the
    first: (tides id, ferry id, the store's answer)."""
    from knowledge.dto import DocumentInput
    from tests.memory.helpers import assistant, store, user
    from tests.retrieval.helpers import ingest_now

    pid = tenant.project.id
    tides, ferry = ingest_now(
        pid,
        [
            DocumentInput(title="Tide tables", text="Ada Lovelace measured the tides at Porto in June."),
            DocumentInput(title="Ferry guide", text="The ferry leaves Porto at nine."),
        ],
    )
    stored = store(
        tenant.client(tenant.write_key),
        pid,
        [user("When is high tide at Porto?", references=[tides]), assistant("At noon, by the tide tables.")],
        user_id="ana",
        thread_id="harbour",
    ).json()
    return tides, ferry, stored
