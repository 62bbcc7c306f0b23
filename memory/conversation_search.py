"""Conversation-aware search (seed 003, "Conversation-Aware Retrieval Flow"): one ranking fused from
four sources, each item labelled with its `source`:
- `document`: the project's chunks for the query (any search mode, the request's filters);
- `past_conversation`: messages of the user's other conversations whose similarity to the query is
  at least the threshold (Neo4j's normalised cosine, (1 + cos) / 2, as memory vector search scores);
  the current conversation and private conversations are never drawn from;
- `referenced_document`: chunks, best for the query, of the documents those messages referenced;
- `recent_conversation`: the current conversation's latest messages.
Fused by reciprocal rank (RETRIEVAL_RRF_K); an item several sources found keeps them all in `sources`.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core import graph
from core.embeddings import embed_soon
from core.models import Project
from core.services import project_embedder_check
from memory import cypher
from memory.conversations import conversation_with_recent
from memory.scope import Scope
from memory.selectors import MessageSearch, messages_hydrated
from retrieval import fusion
from retrieval.conversation import ConversationQuery
from retrieval.dto import Candidate, SearchFilters, SearchItem, SearchResult
from retrieval.services import chunks_nearest, context_format, search_run

# Neo4j reads beside the document search (no SQL on these threads: they would not see the request's
# transaction)
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="conversation-search")

# the query's embedding, or the Future of one being computed meanwhile (a chat turn's question)
VectorLike = list[float] | Future[list[float]]


def _resolved(vector: VectorLike) -> list[float]:
    return vector.result() if isinstance(vector, Future) else vector


# past-conversation candidates rescored by their sentences, per past message returned
_RESCORED_PER_PAST = 4


@dataclass(frozen=True)
class _Limits:
    past: int
    referenced: int
    recent: int
    min_similarity: float


def _limits(conversation: ConversationQuery) -> _Limits:
    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    return _Limits(
        past=pick(conversation.past, settings.CONVERSATION_SEARCH_PAST),
        referenced=pick(conversation.referenced, settings.CONVERSATION_SEARCH_REFERENCED),
        recent=pick(conversation.recent, settings.CONVERSATION_SEARCH_RECENT),
        min_similarity=pick(conversation.min_similarity, settings.CONVERSATION_SEARCH_MIN_SIMILARITY),
    )


def _message_items(project_id: str, hits: list[Candidate], source: str) -> list[SearchItem]:
    return _items_of(messages_hydrated(project_id=project_id, hits=hits), source)


def _items_of(hydrated: list[tuple[Candidate, dict[str, Any]]], source: str) -> list[SearchItem]:
    items = []
    for hit, row in hydrated:
        metadata = {k: row[k] for k in ("role", "timestamp", "seq", "author_name") if row.get(k) is not None}
        items.append(
            SearchItem(
                chunk_id=None,
                document_id=None,
                document_name=f"conversation {row['conversation_id']}",
                text=row["text"],
                score=round(hit.score, 6),
                metadata=metadata,
                source=source,
                memory_id=row["id"],
                conversation_id=row["conversation_id"],
            )
        )
    return items


def _key(item: SearchItem) -> str:
    return f"m:{item.memory_id}" if item.memory_id else f"c:{item.chunk_id}"


def _fused(lists: list[tuple[str, list[SearchItem]]]) -> list[SearchItem]:
    """Reciprocal-rank fusion of the sources; an item is labelled with the source where it ranked
    best (the earlier source on a tie) and lists every source that found it."""
    ranks: dict[str, dict[str, int]] = {}  # key → source → rank
    first: dict[str, SearchItem] = {}
    for source, items in lists:
        for rank, item in enumerate(items):
            ranks.setdefault(_key(item), {})[source] = rank
            first.setdefault(_key(item), item)
    rankings = [[Candidate(_key(item), item.score) for item in items] for _source, items in lists]
    out = []
    for fused in fusion.reciprocal_rank(rankings, k=settings.RETRIEVAL_RRF_K):
        found = ranks[fused.chunk_id]
        item = first[fused.chunk_id]
        item.source = min(found, key=lambda source: found[source])
        item.sources = list(found)
        item.score = round(fused.score, 6)
        out.append(item)
    return out


def _past(
    project_id: str, query: str, vector: VectorLike, conversation: ConversationQuery, limits: _Limits
) -> list[SearchItem]:
    if not limits.past:
        return []
    scope = Scope(user_id=conversation.user_id)
    search = MessageSearch(project_id=project_id, scope=scope, query=query, vector=_resolved(vector))
    rescoring = settings.MEMORY_SENTENCE_WEIGHT > 0
    # a few times `past` are rescored: asking the user-filtered index for more than it first returns
    # (RETRIEVAL_INDEX_MIN_CANDIDATES, less the current and private conversations) would widen it
    fetch = (
        max(limits.past, min(_RESCORED_PER_PAST * limits.past, settings.MEMORY_SENTENCE_CANDIDATES))
        if rescoring
        else limits.past
    )
    hits = search.user_vector_memories(
        fetch, where=cypher.PAST_MESSAGES_WHERE, current_conversation=conversation.conversation_id
    )
    # the threshold judges a message's own vector (its sentences' mean); its best sentence then only
    # raises its score, as in memory search (MessageSearch.sentence_rescored)
    similar = [h for h in hits if h.score >= limits.min_similarity]
    if rescoring:
        similar = search.sentence_rescored(similar)[0]
    return _message_items(project_id, similar[: limits.past], "past_conversation")


def _referenced(project_id: str, vector: VectorLike, past: list[SearchItem], limit: int) -> list[SearchItem]:
    """The chunks nearest the query (by vector: a handful of documents, scanned exactly) of the
    documents the past messages referenced."""
    if not past or not limit:
        return []
    ids = [item.memory_id for item in past]
    rows = graph.read(cypher.MESSAGES_REFERENCED_DOCUMENTS, project_id=project_id, ids=ids)
    found = chunks_nearest(
        project_id=project_id, document_ids=[r["id"] for r in rows], vector=_resolved(vector), top_k=limit
    )
    for item in found:
        item.source = "referenced_document"
    return found


def _past_and_referenced(
    project_id: str, query: str, vector: VectorLike, conversation: ConversationQuery, limits: _Limits
) -> tuple[list[SearchItem], list[SearchItem]]:
    past = _past(project_id, query, vector, conversation, limits)
    return past, _referenced(project_id, vector, past, limits.referenced)


def recent_items(rows: list[dict[str, Any]]) -> list[SearchItem]:
    """The current conversation's latest messages (newest first, as `conversation_with_recent` gives
    them) as `recent_conversation` items, scored by recency."""
    ranked = [(Candidate(r["id"], 1.0 / (1 + i)), r) for i, r in enumerate(rows)]
    return _items_of(ranked, "recent_conversation")


def conversation_search(
    *,
    project_id: str,
    query: str,
    mode: str,
    top_k: int,
    filters: SearchFilters,
    conversation: ConversationQuery,
    include_context: bool,
) -> SearchResult:
    """Search the project's documents and the user's conversations for `query`, in the context of
    one conversation of that user (404 when it is not the user's, or not in the project)."""
    started = time.perf_counter()
    limits = _limits(conversation)
    _header, recent = conversation_with_recent(
        project_id=project_id,
        conversation_id=conversation.conversation_id,
        user_id=conversation.user_id,
        limit=limits.recent,
    )
    return conversation_sources(
        project_id=project_id,
        query=query,
        mode=mode,
        top_k=top_k,
        filters=filters,
        conversation=conversation,
        include_context=include_context,
        recent=recent_items(recent),
        started=started,
    )


def conversation_sources(
    *,
    project_id: str,
    query: str,
    mode: str,
    top_k: int,
    filters: SearchFilters,
    conversation: ConversationQuery,
    include_context: bool,
    recent: list[SearchItem],
    vector: VectorLike | None = None,
    started: float | None = None,
) -> SearchResult:
    """`conversation_search` once the conversation is checked and its `recent` items read (a chat
    turn reads them with its history). `vector` is the query's embedding, or its Future, when the
    caller has one (computed meanwhile otherwise). The past messages and the documents they
    referenced (Neo4j only) are read on a worker thread beside the document search."""
    started = started or time.perf_counter()
    limits = _limits(conversation)
    recent = recent[: limits.recent]
    timings: dict[str, float] = {}
    lap = time.perf_counter()

    def timed(name: str) -> None:
        nonlocal lap
        now = time.perf_counter()
        timings[name], lap = round((now - lap) * 1000, 2), now

    project_embedder_check(project=Project.objects.get(pk=project_id))  # the past messages' vectors too
    vector = vector if vector is not None else embed_soon(query)
    conversations = _pool.submit(_past_and_referenced, project_id, query, vector, conversation, limits)
    documents = search_run(
        project_id=project_id, query=query, mode=mode, top_k=top_k, filters=filters, vector=vector
    )
    timed("documents")
    past, referenced = conversations.result()
    timed("conversations")
    sources = [
        ("document", documents.items),
        ("past_conversation", past),
        ("referenced_document", referenced),
        ("recent_conversation", recent),
    ]
    items = _fused(sources)
    return SearchResult(
        items=items,
        mode=mode,
        profile=None,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
        timings_ms=timings,
        context=context_format(items) if include_context else None,
        fallback=documents.fallback,
        conversation={
            "conversation_id": conversation.conversation_id,
            "user_id": conversation.user_id,
            "top_k": {
                "document": top_k,
                "past_conversation": limits.past,
                "referenced_document": limits.referenced,
                "recent_conversation": limits.recent,
            },
            "min_similarity": limits.min_similarity,
            "counts": {source: len(found) for source, found in sources},
        },
    )
