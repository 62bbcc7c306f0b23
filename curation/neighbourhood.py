"""Reads of the admin's graph view: a node and its neighbours in groups, one page of one group at a time
(keyset on the neighbour's id), so a hub with 10,000 neighbours costs one page, never the hub.

A group is a relationship type, a direction and a neighbour label (`HAS_CHUNK>Chunk`,
`IN_COMMUNITY<Community`), or a named walk of two hops that a curator asks for by name (a document's
entities through its chunks, the conversations whose messages referenced it). A project is an entry of
its own: its top communities (the community hierarchy's roots) and its documents."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core import graph
from core.errors import InvalidInput, NotFound
from core.models import Project
from curation import cypher

# labels shown, in the order that picks a node's label when it has several; each with its admin list
# (for the detail page link) when it has one
LABELS: dict[str, str | None] = {
    "Document": "documents",
    "Chunk": None,
    "Entity": "entities",
    "Community": "communities",
    "Conversation": "conversations",
    "Memory": "memories",
    "ConversationSummary": None,
    "Fact": None,
    "Preference": None,
    "UserProfile": None,
    "Session": "sessions",
    "Event": None,
}
PROJECT = "Project"
KIND_LABELS = {kind: label for label, kind in LABELS.items() if kind}
_TYPE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
_MAX_ID = 200
_MAX_TEXT = 400
_HIDDEN = {"embedding", "sentence_embeddings", "scope_tokens", "_lock", "mention_keys"}


@dataclass(frozen=True)
class Walk:
    """A named group of two hops: `pattern` binds the node `n` and the neighbour `m`."""

    key: str
    title: str
    label: str
    pattern: str


WALKS: dict[str, tuple[Walk, ...]] = {
    "Document": (
        Walk(
            "via:entities",
            "entities (through its chunks)",
            "Entity",
            "(n)-[:HAS_CHUNK]->(:Chunk)-[:HAS_ENTITY]->(m:Entity)",
        ),
        Walk(
            "via:conversations",
            "conversations that referenced it",
            "Conversation",
            "(n)<-[:REFERENCES]-(:Memory)-[:PART_OF]->(m:Conversation)",
        ),
    ),
    "Entity": (
        Walk(
            "via:documents",
            "documents (through their chunks)",
            "Document",
            "(n)<-[:HAS_ENTITY]-(:Chunk)<-[:HAS_CHUNK]-(m:Document)",
        ),
        Walk(
            "via:conversations",
            "conversations that mentioned it",
            "Conversation",
            "(n)<-[:MENTIONS]-(:Memory)-[:PART_OF]->(m:Conversation)",
        ),
    ),
}


def page_size() -> int:
    return max(1, min(int(settings.GRAPH_VIEW_PAGE_SIZE), 500))


def check_node(label: str, node_id: str) -> None:
    if label not in LABELS and label != PROJECT:
        raise InvalidInput(f"no graph view for label {label!r}", details={"field": "label"})
    if not node_id or len(node_id) > _MAX_ID:
        raise InvalidInput(f"id must be 1 to {_MAX_ID} characters", details={"field": "id"})


def _plain(value: Any) -> Any:
    """A property as JSON: text cut to a readable length, times as ISO text, lists shortened."""
    if isinstance(value, str):
        return value if len(value) <= _MAX_TEXT else value[: _MAX_TEXT - 1] + "…"
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value[:20]]
    iso = getattr(value, "iso_format", None)
    return iso() if callable(iso) else str(value)


def _caption(label: str, props: dict[str, Any]) -> str:
    """The short name a node is drawn with."""
    if label == "Chunk":
        return f"chunk {props.get('index', '?')}"
    if label == "Memory":
        text = f"{props.get('role') or ''}: {props.get('text') or ''}"
    else:
        text = str(
            props.get("title")
            or props.get("name")
            or props.get("text")
            or props.get("session_id")
            or props.get("source_path")
            or props.get("thread_id")
            or props.get("id")
        )
    return text if len(text) <= 48 else text[:47] + "…"


def _node(label: str, raw: dict[str, Any]) -> dict[str, Any]:
    props = {k: _plain(v) for k, v in sorted(raw.items()) if k not in _HIDDEN and v is not None}
    kind = LABELS.get(label)
    return {
        "id": str(raw["id"]),
        "label": label,
        "caption": _caption(label, props),
        "kind": kind,
        "properties": props,
    }


def _direct_pattern(key: str) -> tuple[str, str, str]:
    """`TYPE>Label` or `TYPE<Label` as a checked (type, arrow pattern, label)."""
    match = re.fullmatch(r"([A-Z][A-Z0-9_]*)([<>])([A-Za-z]+)", key)
    if match is None or not _TYPE.match(match[1]) or match[3] not in LABELS:
        raise InvalidInput(f"no such group {key!r}", details={"field": "group"})
    rel, arrow, label = match[1], match[2], match[3]
    if arrow == ">":
        return rel, f"(n)-[:{rel}]->(m:{label})", label
    return rel, f"(n)<-[:{rel}]-(m:{label})", label


def _group_page(label: str, node_id: str, pattern: str, m_label: str, after: str) -> list[dict[str, Any]]:
    query = cypher.GRAPH_GROUP_PAGE.format(label=label, pattern=pattern)
    rows = graph.read(query, id=node_id, after=after, limit=page_size())
    return [_node(m_label, r["node"]) for r in rows]


def _group(
    *, key: str, title: str, type_: str, outgoing: bool | None, label: str, total: int, nodes: list[Any]
) -> dict[str, Any]:
    return {
        "key": key,
        "title": title,
        "type": type_,
        "outgoing": outgoing,
        "label": label,
        "total": total,
        "nodes": nodes,
        "after": nodes[-1]["id"] if len(nodes) == page_size() else None,
    }


def _project(project_id: str, group: str | None, after: str) -> dict[str, Any]:
    project = Project.objects.filter(id=project_id).first()
    if project is None:
        raise NotFound("no such project")
    totals = graph.read(cypher.GRAPH_PROJECT_TOTALS, id=project_id)[0]
    titles = {"top_communities": "top communities", "documents": "documents"}
    if group is not None and group not in titles:
        raise InvalidInput(f"no such group {group!r}", details={"field": "group"})
    groups = []
    for key, title in titles.items():
        if group is not None and key != group:
            continue
        rows = graph.read(cypher.GRAPH_PROJECT_PAGE[key], id=project_id, after=after, limit=page_size())
        label = "Community" if key == "top_communities" else "Document"
        nodes = [_node(label, r["node"]) for r in rows]
        groups.append(
            _group(key=key, title=title, type_="", outgoing=None, label=label, total=totals[key], nodes=nodes)
        )
    node = {
        "id": project_id,
        "label": PROJECT,
        "caption": project.name,
        "kind": None,
        "properties": {"id": project_id, "name": project.name},
    }
    return {"node": node, "groups": groups}


def _walk_groups(label: str, node_id: str, group: str | None, after: str) -> list[dict[str, Any]]:
    """The named walks of the node's label (all, empty ones left out; or the one `group` names)."""
    walks = {w.key: w for w in WALKS.get(label, ())}
    if group is not None:
        if group not in walks:
            raise InvalidInput(f"no such group {group!r}", details={"field": "group"})
        walks = {group: walks[group]}
    groups = []
    for walk in walks.values():
        total = graph.read(cypher.GRAPH_GROUP_TOTAL.format(label=label, pattern=walk.pattern), id=node_id)
        if not total[0]["total"] and group is None:
            continue  # an empty walk is no group
        nodes = _group_page(label, node_id, walk.pattern, walk.label, after)
        groups.append(
            _group(
                key=walk.key,
                title=walk.title,
                type_=walk.key[4:].upper(),
                outgoing=None,
                label=walk.label,
                total=total[0]["total"],
                nodes=nodes,
            )
        )
    return groups


def _direct_groups(label: str, node_id: str, group: str | None, after: str) -> list[dict[str, Any]]:
    """The node's groups by relationship type, direction and label (all, or the one `group` names)."""
    if group is not None:
        _direct_pattern(group)  # a malformed key is a 400 before any read
    groups = []
    summary = graph.read(cypher.GRAPH_GROUPS.format(label=label), id=node_id, labels=list(LABELS))
    for row in summary:
        key = f"{row['type']}{'>' if row['outgoing'] else '<'}{row['label']}"
        if group is not None and key != group:
            continue
        rel, pattern, m_label = _direct_pattern(key)
        groups.append(
            _group(
                key=key,
                title=f"{rel} {'→' if row['outgoing'] else '←'} {m_label}",
                type_=rel,
                outgoing=row["outgoing"],
                label=m_label,
                total=row["total"],
                nodes=_group_page(label, node_id, pattern, m_label, after),
            )
        )
    if group is not None and not groups:
        raise NotFound(f"this {label} has no group {group!r}")
    return groups


def neighbourhood(*, label: str, node_id: str, group: str | None = None, after: str = "") -> dict[str, Any]:
    """The node (its properties for the side panel) and its groups of neighbours, each with its total and
    its first page; with `group`, only that group's page after the neighbour id `after`."""
    check_node(label, node_id)
    if len(after) > _MAX_ID:
        raise InvalidInput(f"after must be at most {_MAX_ID} characters", details={"field": "after"})
    if label == PROJECT:
        return _project(node_id, group, after)
    rows = graph.read(cypher.GRAPH_NODE.format(label=label), id=node_id)
    if not rows:
        raise NotFound(f"no {label} with this id")
    node = _node(label, rows[0]["node"])
    if group is not None and group.startswith("via:"):
        return {"node": node, "groups": _walk_groups(label, node_id, group, after)}
    if group is not None:
        return {"node": node, "groups": _direct_groups(label, node_id, group, after)}
    groups = _walk_groups(label, node_id, None, after) + _direct_groups(label, node_id, None, after)
    return {"node": node, "groups": groups}
