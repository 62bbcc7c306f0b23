"""Reads of conversations as knowledge (seed 003): what a conversation referenced, which
conversations used a document. Visibility follows memory.cypher.CONVERSATION_VISIBLE."""

from __future__ import annotations

from typing import Any

from core import graph
from core.errors import NotFound
from knowledge.selectors import document_require
from memory import cypher


def conversation_brief(*, project_id: str, conversation_id: str, user_id: str | None) -> dict[str, Any]:
    """The conversation's header; another project's, another user's or a private one the reader
    does not own is not found."""
    rows = graph.read(cypher.CONVERSATION_BRIEF, project_id=project_id, id=conversation_id, user_id=user_id)
    if not rows:
        raise NotFound("no such conversation in this project")
    return rows[0]["conversation"]


def conversation_with_recent(
    *, project_id: str, conversation_id: str, user_id: str | None, limit: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The conversation's header (404 as `conversation_brief`) and its `limit` latest messages but
    failed replies, newest first, in one read."""
    rows = graph.read(
        cypher.CONVERSATION_WITH_RECENT,
        project_id=project_id,
        id=conversation_id,
        user_id=user_id,
        limit=limit,
    )
    if not rows:
        raise NotFound("no such conversation in this project")
    return rows[0]["conversation"], sorted(rows[0]["recent"], key=lambda m: -m["seq"])


def conversation_references(
    *, project_id: str, conversation_id: str, user_id: str | None, limit: int, offset: int
) -> dict[str, Any]:
    """The documents the conversation's messages reference (seed 003's get_references_in_conversation),
    each with the number of messages, the first and last time and up to 20 of the message ids."""
    conversation = conversation_brief(project_id=project_id, conversation_id=conversation_id, user_id=user_id)
    rows = graph.read(
        cypher.CONVERSATION_REFERENCES, project_id=project_id, id=conversation_id, limit=limit, offset=offset
    )
    return {"conversation": conversation, "items": rows}


def document_conversations(
    *, project_id: str, document_id: str, user_id: str | None, limit: int, offset: int
) -> dict[str, Any]:
    """The conversations that referenced a document, the most recent reference first."""
    document_require(project_id=project_id, document_id=document_id)
    rows = graph.read(
        cypher.DOCUMENT_CONVERSATIONS,
        project_id=project_id,
        document_id=document_id,
        user_id=user_id,
        limit=limit,
        offset=offset,
    )
    return {
        "document_id": document_id,
        "items": [
            {**r["conversation"], "messages": r["messages"], "last_referenced_at": r["last_referenced_at"]}
            for r in rows
        ],
    }


TOPICS_MAX = 8


def conversations_list(
    *, project_id: str, user_id: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """Conversations the reader may see, the most recently active first."""
    params = {"project_id": project_id, "user_id": user_id}
    rows = graph.read(cypher.CONVERSATIONS_LIST, limit=limit, offset=offset, **params)
    total = graph.read(cypher.CONVERSATIONS_COUNT, **params)[0]["n"]
    return [r["conversation"] for r in rows], total


def conversation_detail(
    *, project_id: str, conversation_id: str, user_id: str | None, limit: int, offset: int
) -> dict[str, Any]:
    """The conversation (title, summary, sentiment, topics) and one page of its messages in order,
    each with the concepts it mentions and the documents it references."""
    header = conversation_brief(project_id=project_id, conversation_id=conversation_id, user_id=user_id)
    topics = graph.read(
        cypher.CONVERSATION_TOPICS, project_id=project_id, conversation_id=conversation_id, limit=TOPICS_MAX
    )
    rows = graph.read(
        cypher.CONVERSATION_MESSAGES,
        project_id=project_id,
        conversation_id=conversation_id,
        limit=limit,
        offset=offset,
    )
    messages = [{**r["message"], "mentions": r["mentions"], "references": r["references"]} for r in rows]
    return {
        **header,
        "topics": topics,
        "messages": messages,
        "limit": limit,
        "offset": offset,
    }
