"""Memory's services for privacy and retention: the conversation's privacy settings, messages found
by age, anonymised text written in place of the original, deletion of messages and conversations.
Curation's retention runs, anonymisation and privacy pages call these; the Cypher is memory's, so
the locking every store takes is taken here too."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core import graph
from memory import cypher
from memory import metadata as message_metadata
from memory import text as message_text
from memory import vectors as message_vectors
from memory.services import now_iso


@dataclass(frozen=True)
class MessageText:
    """A stored message as anonymisation reads it."""

    id: str
    text: str
    author_name: str | None
    conversation_id: str
    timestamp: str
    role: str = ""


@dataclass(frozen=True)
class MessageRewrite:
    """The anonymised text (and author) that replaces a message's own."""

    id: str
    text: str
    author_name: str | None
    role: str = ""
    timestamp: str | None = None


@dataclass(frozen=True)
class PrivacyChange:
    """What a curator changes on a conversation; a `set_*` flag False leaves that setting alone."""

    set_retention: bool = False
    retention_days: int | None = None
    anonymize: bool | None = None
    accessibility: str | None = None
    set_expires: bool = False
    expires_at: str | None = None


def _messages(rows: list[dict[str, Any]]) -> list[MessageText]:
    return [
        MessageText(
            id=r["id"],
            text=r["text"] or "",
            author_name=r["author_name"],
            conversation_id=r["conversation_id"],
            timestamp=r["timestamp"],
            role=r.get("role") or "",
        )
        for r in rows
    ]


# --- privacy -------------------------------------------------------------------------------------------


def conversation_privacy_set(
    *, project_id: str, conversation_id: str, change: PrivacyChange
) -> dict[str, Any] | None:
    """Apply a privacy change; the conversation's messages, summaries, facts and preferences follow
    its accessibility. None when the project has no such conversation."""
    rows = graph.write(
        cypher.CONVERSATION_PRIVACY_SET,
        project_id=project_id,
        id=conversation_id,
        set_retention=change.set_retention,
        retention_days=change.retention_days,
        anonymize=change.anonymize,
        accessibility=change.accessibility,
        set_expires=change.set_expires,
        expires_at=change.expires_at,
    )
    return dict(rows[0]["conversation"]) if rows else None


def conversation_privacy_get(*, project_id: str, conversation_id: str) -> dict[str, Any] | None:
    rows = graph.read(cypher.CONVERSATION_PRIVACY_GET, project_id=project_id, id=conversation_id)
    return dict(rows[0]["conversation"]) if rows else None


# --- messages by age --------------------------------------------------------------------------------------


def messages_before_count(*, project_id: str, cutoff: str, only_plain: bool) -> tuple[int, int]:
    """(messages, conversations) with messages older than `cutoff`; `only_plain` skips anonymised ones."""
    row = graph.read(
        cypher.MESSAGES_BEFORE_PREVIEW, project_id=project_id, cutoff=cutoff, only_plain=only_plain
    )[0]
    return int(row["messages"]), int(row["conversations"])


def messages_before_plain_page(
    *, project_id: str, cutoff: str, after_ts: str, after_id: str, batch: int
) -> list[MessageText]:
    """The next `batch` messages older than `cutoff` and not anonymised, after (after_ts, after_id)."""
    rows = graph.read(
        cypher.MESSAGES_BEFORE_PLAIN_PAGE,
        project_id=project_id,
        cutoff=cutoff,
        after_ts=after_ts,
        after_id=after_id,
        batch=batch,
    )
    return _messages(rows)


def messages_before_delete(*, project_id: str, cutoff: str, batch: int) -> tuple[Counter[str], bool]:
    """Delete up to `batch` messages older than `cutoff` with what was drawn from them and the
    summaries covering them. Returns the counts and whether older messages may remain."""
    ids = graph.read(cypher.MESSAGES_BEFORE_IDS, project_id=project_id, cutoff=cutoff, batch=batch)[0]["ids"]
    return messages_delete(project_id=project_id, ids=ids), len(ids) == batch


def messages_delete(*, project_id: str, ids: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    if not ids:
        return counts
    counts += _purge_derived(project_id, ids)
    counts["messages"] += int(
        graph.write(cypher.MESSAGES_DELETE, project_id=project_id, ids=ids)[0]["deleted"] or 0
    )
    return counts


def _purge_derived(project_id: str, ids: list[str]) -> Counter[str]:
    rows = graph.write(cypher.MESSAGES_PURGE_DERIVED, project_id=project_id, ids=ids)
    counts: Counter[str] = Counter()
    if rows:
        counts["derived"] += int(rows[0]["derived"] or 0)
        counts["summaries"] += int(rows[0]["summaries"] or 0)
    return counts


def messages_anonymised_write(*, project_id: str, rewrites: list[MessageRewrite]) -> Counter[str]:
    """Replace each message's text and author with the anonymised ones, embedding the new text, and
    drop the strings of its metadata (memory.metadata.anonymised: numbers and booleans stay); facts,
    preferences, covering summaries and entity mentions drawn from the original go first."""
    if not rewrites:
        return Counter()
    stored = graph.read(cypher.MESSAGES_METADATA, project_id=project_id, ids=[r.id for r in rewrites])
    metadata = {row["id"]: message_metadata.anonymised(row["pairs"]) for row in stored}
    lines: list[dict[str, Any]] = [
        {"text": r.text, "role": r.role, "author_name": r.author_name, "timestamp": r.timestamp}
        for r in rewrites
    ]
    vectors = message_vectors.message_vectors(lines)
    counts = _purge_derived(project_id, [r.id for r in rewrites])
    graph.write(
        cypher.MESSAGES_ANONYMISED_WRITE,
        project_id=project_id,
        now=now_iso(),
        rows=[
            {
                "id": r.id,
                "text": r.text,
                "author_name": r.author_name,
                "embedding": vector.embedding,
                "sentence_embeddings": vector.sentences,  # the original's go with it
                **message_text.indexed(**line),
                "metadata_removed": metadata.get(r.id, ({}, None))[0],
                "metadata_keys": metadata.get(r.id, ({}, None))[1],
            }
            for r, line, vector in zip(rewrites, lines, vectors, strict=True)
        ],
    )
    counts["messages"] += len(rewrites)
    return counts


# --- one conversation ---------------------------------------------------------------------------------------


def conversation_author_names(*, project_id: str, conversation_id: str) -> list[str]:
    """The authors named on the conversation's messages that are not anonymised yet."""
    rows = graph.read(
        cypher.CONVERSATION_AUTHOR_NAMES, project_id=project_id, conversation_id=conversation_id
    )
    return list(rows[0]["names"]) if rows else []


def conversation_plain_messages(*, project_id: str, conversation_id: str, batch: int) -> list[MessageText]:
    """The conversation's first `batch` messages (by sequence) that are not anonymised yet."""
    rows = graph.read(
        cypher.CONVERSATION_PLAIN_MESSAGES,
        project_id=project_id,
        conversation_id=conversation_id,
        batch=batch,
    )
    return _messages(rows)


def conversation_anonymised_mark(*, project_id: str, conversation_id: str) -> int:
    """Mark a conversation whose messages are anonymised: its summaries (and what was drawn from
    them) and title go, and retention runs pass it by. Returns the summaries removed."""
    rows = graph.write(
        cypher.CONVERSATION_ANONYMISED_MARK,
        project_id=project_id,
        conversation_id=conversation_id,
        now=now_iso(),
    )
    return int(rows[0]["summaries"]) if rows else 0


def conversation_delete(*, project_id: str, conversation_id: str) -> Counter[str]:
    """Delete a conversation: its messages in batches (with what was drawn from them), then the
    conversation with its summaries; the forget of a scope that is this one conversation."""
    batch = settings.RETENTION_BATCH
    messages = cypher.FORGET_BATCH.format(label="Memory", scope="n.conversation_id = $conversation_id")
    counts: Counter[str] = Counter()
    while True:
        row = graph.write(messages, project_id=project_id, conversation_id=conversation_id, batch=batch)[0]
        counts["messages"] += int(row["deleted"])
        counts["derived"] += int(row["derived"])
        if row["deleted"] < batch:
            break
    row = graph.write(
        cypher.FORGET_CONVERSATIONS.format(scope="c.id = $conversation_id"),
        project_id=project_id,
        conversation_id=conversation_id,
    )[0]
    if row["deleted"]:
        counts["conversations"] += 1
        counts["summaries"] += int(row["stragglers"] or 0)
        counts["derived"] += int(row["derived"] or 0)
    return counts


# --- expired conversations ----------------------------------------------------------------------------------


def conversations_expired_count(
    *, project_id: str, cutoff: str, force_anonymise: bool
) -> dict[str, dict[str, int]]:
    """Expired conversations (not anonymised yet) by what a run would do with them: 'delete' or
    'anonymise' (their own setting, or every one when `force_anonymise`) → conversations, messages."""
    rows = graph.read(
        cypher.CONVERSATIONS_EXPIRED_PREVIEW,
        project_id=project_id,
        cutoff=cutoff,
        force_anonymise=force_anonymise,
    )
    return {
        r["action"]: {"conversations": int(r["conversations"]), "messages": int(r["messages"])} for r in rows
    }


def conversations_expired_page(
    *, project_id: str, cutoff: str, after_id: str, batch: int
) -> list[tuple[str, bool]]:
    """The next `batch` expired conversations after `after_id`: (id, whether it asks for anonymisation)."""
    rows = graph.read(
        cypher.CONVERSATIONS_EXPIRED_PAGE,
        project_id=project_id,
        cutoff=cutoff,
        after_id=after_id,
        batch=batch,
    )
    return [(r["id"], bool(r["anonymize"])) for r in rows]
