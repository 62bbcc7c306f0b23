"""Reads of curation: the admin's graph content pages (keyset-paginated in Cypher, never a whole
label set in memory), detail neighbourhoods, and previews."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from core import graph
from core.errors import InvalidInput, NotFound
from core.models import Project
from curation import cypher
from curation.models import ErasureRequest
from knowledge import tenancy
from memory import text as message_text
from memory.retention import conversation_privacy_get as memory_conversation_privacy
from memory.scope import Scope, lucene_filter
from memory.services import TIMESTAMP_FORMAT
from retrieval import lucene


@dataclass(frozen=True)
class Kind:
    """One kind of graph content in the admin: its label, the property pages are ordered by (newest
    first when it is a time), the columns shown and how it is filtered and searched."""

    name: str
    label: str
    order: str
    columns: tuple[str, ...]
    time_order: bool = True
    time_type: str = "iso"  # iso text, Neo4j datetime or epoch seconds (ADK's float time)
    user_property: str | None = "user_id"
    fulltext: str | None = None  # index searched by `q`
    search_via: str | None = None  # a property of the hit that names the listed node
    search_property: str | None = None  # or a STARTS WITH match on this property


# Documents are searched through their chunks, in each project's own chunk fulltext index
CHUNK_INDEXES = "project chunk indexes"

KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "conversations",
            "Conversation",
            "ended_at",
            (
                "user_id",
                "thread_id",
                "application_id",
                "message_count",
                "ended_at",
                "accessibility",
                "retention_days",
                "expires_at",
                "anonymize",
            ),
            fulltext="memory_fulltext",
            search_via="conversation_id",
        ),
        Kind(
            "memories",
            "Memory",
            "timestamp",
            ("timestamp", "role", "user_id", "thread_id", "text", "conversation_id", "accessibility"),
            fulltext="memory_fulltext",
        ),
        Kind(
            "documents",
            "Document",
            "created_at",
            ("title", "source_path", "status", "author", "chunk_count", "entity_count", "created_at"),
            time_type="datetime",
            user_property="author",
            fulltext=CHUNK_INDEXES,
            search_via="document_id",
        ),
        Kind(
            "entities",
            "Entity",
            "name",
            ("name", "type", "description", "orphaned_at"),
            time_order=False,
            user_property=None,
            fulltext="entity_text",
        ),
        Kind(
            "communities",
            "Community",
            "title",
            ("title", "level", "rank", "size", "stale"),
            time_order=False,
            user_property=None,
            search_property="title",
        ),
        Kind(
            "sessions",
            "Session",
            "last_update_time",
            ("app_name", "user_id", "session_id", "event_count", "last_update_time"),
            time_type="epoch_s",
            search_property="session_id",
        ),
    )
}


@dataclass
class Page:
    kind: Kind
    rows: list[dict[str, Any]]
    next_cursor: str | None
    filters: dict[str, Any] = field(default_factory=dict)


def _cursor_encode(value: Any, node_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([value, node_id]).encode()).decode()


def _cursor_decode(cursor: str) -> tuple[Any, str]:
    try:
        value, node_id = json.loads(base64.urlsafe_b64decode(cursor.encode()).decode())
        if not isinstance(node_id, str):
            raise ValueError
        return value, node_id
    except (ValueError, TypeError) as exc:
        raise InvalidInput("cursor is not one this page made", details={"field": "cursor"}) from exc


def _time_bound(kind: Kind, day: date, *, end: bool) -> tuple[str, Any]:
    """A day boundary as the kind's property compares: (Cypher expression of $param, value)."""
    moment = datetime.combine(day + timedelta(days=1) if end else day, time.min, tzinfo=UTC)
    if kind.time_type == "datetime":
        return "datetime(${})", moment.isoformat()
    if kind.time_type == "epoch_s":
        return "${}", moment.timestamp()
    return "${}", moment.strftime(TIMESTAMP_FORMAT)


def _search_ids(kind: Kind, project_id: str | None, q: str, limit: int) -> list[str] | None:
    """Node ids matching `q` through the kind's fulltext index (None: the kind searches by prefix)."""
    if kind.fulltext is None:
        return None
    if kind.fulltext == CHUNK_INDEXES:
        return _chunk_document_ids(project_id, q, limit)
    memory_index = kind.fulltext == "memory_fulltext"
    # messages are indexed by their words (memory.text): the query is split by the same tokenizer
    asked = " ".join(message_text.words(q)) if memory_index else q
    terms = [lucene.escape(t) for t in lucene.query_terms(asked, max_terms=32)]
    if not terms:
        return []
    field_name = "name" if kind.label == "Entity" else "search_text"
    expression = f"{field_name}:(" + " OR ".join(terms) + ")"
    if kind.label == "Entity":
        expression = "(" + expression + " OR description:(" + " OR ".join(terms) + "))"
    if memory_index and project_id:
        expression += " AND " + lucene_filter(project_id, Scope())
    via = kind.search_via
    rows = graph.read(
        "CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $fetch}) YIELD node, score "
        "WHERE $project_id IS NULL OR node.project_id = $project_id "
        + (f"RETURN DISTINCT node.{via} AS id LIMIT $limit" if via else "RETURN node.id AS id LIMIT $limit"),
        index=kind.fulltext,
        lucene=expression,
        fetch=limit * 20,
        project_id=project_id,
        limit=limit,
    )
    return [r["id"] for r in rows if r["id"]]


def _chunk_document_ids(project_id: str | None, q: str, limit: int) -> list[str]:
    """Documents whose chunks match `q`, in the chosen project's chunk fulltext index, or with no
    project chosen in each project's whose index is online, one project after another until `limit`."""
    terms = lucene.query_terms(q, max_terms=32)
    expression = lucene.chunk_query(terms, project_id=None, field="search_text")
    if not expression:
        return []
    projects = (
        [project_id] if project_id else list(Project.objects.order_by("id").values_list("id", flat=True))
    )
    found: list[str] = []
    for pid in projects:
        if len(found) >= limit:
            break
        if not tenancy.project_fulltext_online(pid, create=False):
            continue
        rows = graph.read(
            "CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $fetch}) YIELD node "
            "WHERE node.project_id = $project_id RETURN DISTINCT node.document_id AS id LIMIT $limit",
            index=tenancy.chunk_fulltext_index(pid),
            lucene=expression,
            fetch=limit * 20,
            project_id=pid,
            limit=limit - len(found),
        )
        found += [r["id"] for r in rows if r["id"]]
    return found


def _filters(
    kind: Kind,
    params: dict[str, Any],
    *,
    project_id: str | None,
    user_id: str | None,
    date_from: date | None,
    date_to: date | None,
    q: str | None,
) -> list[str]:
    """The WHERE conditions of a page's filters; their values go into `params`."""
    where: list[str] = []
    if project_id:
        where.append("n.project_id = $project_id")
        params["project_id"] = project_id
    if user_id and kind.user_property:
        where.append(f"n.{kind.user_property} = $user_id")
        params["user_id"] = user_id
    if kind.time_order:
        if date_from:
            expr, params["date_from"] = _time_bound(kind, date_from, end=False)
            where.append(f"n.{kind.order} >= " + expr.format("date_from"))
        if date_to:
            expr, params["date_to"] = _time_bound(kind, date_to, end=True)
            where.append(f"n.{kind.order} < " + expr.format("date_to"))
    if q:
        ids = _search_ids(kind, project_id, q, limit=500)
        if ids is None and kind.search_property:
            where.append(f"n.{kind.search_property} STARTS WITH $q")
            params["q"] = q
        elif ids is not None:
            where.append("n.id IN $ids")
            params["ids"] = ids
    return where


def _display_row(kind: Kind, row: dict[str, Any]) -> dict[str, Any]:
    """A row as a list page shows it: times as text, long text and descriptions cut at 200 characters."""
    if kind.time_type == "datetime" and row.get(kind.order) is not None:
        row[kind.order] = str(row[kind.order])
    for name in ("text", "description"):
        if isinstance(row.get(name), str) and len(row[name]) > 200:
            row[name] = row[name][:200] + "…"
    return row


def graph_page(
    *,
    kind_name: str,
    project_id: str | None = None,
    user_id: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    q: str | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> Page:
    """One page of a kind, newest (or first by name) first, filtered; `next_cursor` continues it."""
    kind = KINDS.get(kind_name)
    if kind is None:
        raise NotFound("no such kind of graph content")
    params: dict[str, Any] = {"limit": limit + 1}
    where = _filters(
        kind, params, project_id=project_id, user_id=user_id, date_from=date_from, date_to=date_to, q=q
    )
    order = f"n.{kind.order}"
    if cursor:
        value, after_id = _cursor_decode(cursor)
        params["after_value"], params["after_id"] = value, after_id
        if kind.time_order:
            cmp = "datetime($after_value)" if kind.time_type == "datetime" else "$after_value"
            where.append(f"{order} <= {cmp} AND ({order} < {cmp} OR n.id > $after_id)")
        else:
            where.append(f"{order} >= $after_value AND ({order} > $after_value OR n.id > $after_id)")
    else:
        where.append(f"{order} IS NOT NULL")
    direction = "DESC" if kind.time_order else ""
    columns = ", ".join(f".{c}" for c in kind.columns)
    query = (
        f"MATCH (n:{kind.label}) WHERE {' AND '.join(where)} "
        f"RETURN n {{.id, .project_id, {columns}}} AS row, "
        + (f"toString({order}) AS sort_value " if kind.time_type == "datetime" else f"{order} AS sort_value ")
        + f"ORDER BY {order} {direction}, n.id LIMIT $limit"
    )
    rows = graph.read(query, **params)
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit and page:
        next_cursor = _cursor_encode(page[-1]["sort_value"], page[-1]["row"]["id"])
    out = [_display_row(kind, dict(r["row"])) for r in page]
    filters = {
        "project_id": project_id,
        "user_id": user_id,
        "date_from": date_from,
        "date_to": date_to,
        "q": q,
    }
    return Page(kind=kind, rows=out, next_cursor=next_cursor, filters=filters)


# --- details ---------------------------------------------------------------------------------------------

_DETAILS = {
    "conversations": cypher.CONVERSATION_DETAIL,
    "documents": cypher.DOCUMENT_DETAIL,
    "memories": cypher.MEMORY_DETAIL,
    "entities": cypher.ENTITY_DETAIL,
    "communities": cypher.COMMUNITY_DETAIL,
    "sessions": cypher.SESSION_DETAIL,
}


def graph_detail(*, kind_name: str, node_id: str) -> dict[str, Any]:
    """A node and its neighbourhood (a document's chunks and entities, a conversation's messages,
    summaries and facts, …)."""
    query = _DETAILS.get(kind_name)
    if query is None:
        raise NotFound("no such kind of graph content")
    rows = graph.read(query, id=node_id, messages=200)
    if not rows:
        raise NotFound("no such node")
    return dict(rows[0])


def conversation_privacy_get(*, project_id: str, conversation_id: str) -> dict[str, Any]:
    conversation = memory_conversation_privacy(project_id=project_id, conversation_id=conversation_id)
    if conversation is None:
        raise NotFound("no such conversation in this project")
    return conversation


def erasure_request_get(*, project_id: str, request_id: str) -> ErasureRequest:
    found = ErasureRequest.objects.filter(pk=request_id, project_id=project_id).first()
    if found is None:
        raise NotFound("no such erasure request in this project")
    return found
