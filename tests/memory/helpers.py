from __future__ import annotations

from typing import Any

from core import graph


def store(client: Any, project_id: str, messages: list[dict[str, Any]], **scope: Any) -> Any:
    return client.post(
        f"/api/v1/projects/{project_id}/memories", {"messages": messages, "scope": scope}, format="json"
    )


def msearch(client: Any, project_id: str, query: str, scope: dict[str, Any], **body: Any) -> Any:
    return client.post(
        f"/api/v1/projects/{project_id}/memories/search",
        {"query": query, "scope": scope, **body},
        format="json",
    )


def forget(client: Any, project_id: str, **scope: Any) -> Any:
    return client.post(f"/api/v1/projects/{project_id}/memories:forget", {"scope": scope}, format="json")


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "text": text, **extra}


def assistant(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "text": text, **extra}


def count(label: str, project_id: str) -> int:
    return graph.read(f"MATCH (n:{label} {{project_id: $p}}) RETURN count(n) AS n", p=project_id)[0]["n"]


def memory_nodes(project_id: str) -> int:
    return sum(
        count(label, project_id)
        for label in ("Memory", "Conversation", "ConversationSummary", "Fact", "Preference", "UserProfile")
    )
