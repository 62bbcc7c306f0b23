"""A chat turn as seed 003's agent loop runs it: create or continue the conversation, store the user
message, retrieve with conversation awareness, answer (LLM or extractive), store the reply with
REFERENCES to the documents it used, and return the answer with a numbered "References" block
(seed 003's build_response_with_references). The reply's store queues one processing job for both
messages, which also embeds both (from their lines, memory.text): nothing searches them within the
turn that writes them, and embedding is the turn's costliest step after retrieval (docs/decisions.md,
"Chat turns")."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from core.embeddings import embed_soon
from core.errors import DependencyUnavailable, InvalidInput, PayloadTooLarge
from core.llm.client import chat, llm_configured
from knowledge.selectors import documents_brief
from memory import vectors as message_vectors
from memory.conversation_search import conversation_sources, recent_items
from memory.conversations import conversation_with_recent
from memory.dto import MessageInput
from memory.scope import Scope, validate_value
from memory.services import (
    StorePlan,
    memories_queue_processing,
    memories_store,
    memories_store_finish,
    memories_store_plan,
    memories_store_write,
)
from retrieval.conversation import ConversationQuery
from retrieval.drift.progress import Reporter
from retrieval.dto import SearchFilters, SearchItem
from retrieval.sentences import sentences, terms
from retrieval.services import search_run

ANSWER_MODES = ("llm", "extractive")
SEARCH_MODES = ("vector", "fulltext", "hybrid", "graph")
SYSTEM_PROMPT = (
    "You answer the user's question in an ongoing conversation. Use the numbered sources when they "
    "help and cite them as [n]; say so when they do not hold the answer. Be concise."
)
NOTHING_FOUND = "I found nothing in the documents or this conversation that answers that."

# the question's Neo4j write runs here (once its embedding is ready) while the turn searches
_writer = ThreadPoolExecutor(max_workers=4, thread_name_prefix="chat-store")


@dataclass(frozen=True)
class ChatTurnInput:
    message: str
    user_id: str
    conversation_id: str | None = None
    rag: bool = True
    persist: bool = True
    mode: str | None = None  # llm | extractive; None: llm when one is configured
    top_k: int = 5
    search_mode: str = "hybrid"
    turn_id: str | None = None


@dataclass
class ChatTurn:
    turn_id: str
    conversation_id: str | None
    message_id: str | None
    reply_id: str | None
    answer: str
    references: list[dict[str, Any]]
    answer_with_references: str
    mode: str
    job_id: str | None = None  # the processing job of both messages, when one was queued
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class _Context:
    """What the answer is built from: the ranked items, the conversation's summary and history
    (oldest first), and its latest messages as search items (the retrieval's recent context)."""

    items: list[SearchItem]
    summary: str | None
    history: list[dict[str, Any]]
    recent: list[SearchItem] = field(default_factory=list)


def references_block(answer: str, references: list[dict[str, Any]]) -> str:
    """The answer followed by seed 003's numbered references: `[n] title (author, date)` and the path."""
    if not references:
        return answer
    lines = []
    for ref in references:
        line = f"[{ref['n']}] {ref['title'] or ref['source_path'] or ref['document_id']}"
        line += f" ({ref['author'] or 'Unknown'}, {(ref['updated_at'] or 'Unknown date')[:10]})"
        if ref["source_path"]:
            line += f"\nPath: {ref['source_path']}"
        lines.append(line)
    return f"{answer}\n\nReferences:\n" + "\n".join(lines)


def _check(turn: ChatTurnInput) -> str:
    if not turn.message.strip():
        raise InvalidInput("message must not be blank", details={"field": "message"})
    if len(turn.message) > settings.MEMORY_MAX_MESSAGE_CHARS:
        raise PayloadTooLarge(
            f"message has {len(turn.message)} characters; the limit is {settings.MEMORY_MAX_MESSAGE_CHARS}",
            details={"field": "message", "limit": settings.MEMORY_MAX_MESSAGE_CHARS},
        )
    validate_value("user_id", turn.user_id)
    if turn.search_mode not in SEARCH_MODES:
        raise InvalidInput(
            f"search_mode must be one of {', '.join(SEARCH_MODES)}", details={"field": "search_mode"}
        )
    mode = turn.mode or ("llm" if llm_configured() else "extractive")
    if mode == "llm" and not llm_configured():
        raise InvalidInput("mode llm needs an LLM (LLM_PROVIDER is none)", details={"field": "mode"})
    return mode


def _conversation(project_id: str, turn: ChatTurnInput) -> tuple[Scope, _Context]:
    """The conversation's scope and what the answer reads of it, in one read: the one continued
    (404 when it is not this user's), or a new thread with nothing in it yet."""
    if turn.conversation_id is None:
        return Scope(user_id=turn.user_id, thread_id=f"chat-{uuid.uuid4()}"), _Context([], None, [])
    header, latest = conversation_with_recent(
        project_id=project_id,
        conversation_id=turn.conversation_id,
        user_id=turn.user_id,
        limit=max(settings.CHAT_HISTORY_MESSAGES, settings.CONVERSATION_SEARCH_RECENT),
    )
    scope = Scope(
        application_id=header["application_id"],
        agent_id=header["agent_id"],
        user_id=header["user_id"],
        thread_id=header["thread_id"],
    )
    history = sorted(latest[: settings.CHAT_HISTORY_MESSAGES], key=lambda m: m["seq"])
    return scope, _Context([], header["summary"], history, recent_items(latest))


def _retrieve(
    project_id: str,
    turn: ChatTurnInput,
    context: _Context,
    vector: Future[list[float]] | None,
) -> list[SearchItem]:
    if turn.conversation_id is None:
        found = search_run(
            project_id=project_id, query=turn.message, mode=turn.search_mode, top_k=turn.top_k, vector=vector
        )
        return found.items
    return conversation_sources(
        project_id=project_id,
        query=turn.message,
        mode=turn.search_mode,
        top_k=turn.top_k,
        filters=SearchFilters(),
        conversation=ConversationQuery(conversation_id=turn.conversation_id, user_id=turn.user_id),
        include_context=False,
        recent=context.recent,
        vector=vector,
    ).items


def _references(project_id: str, items: list[SearchItem], limit: int) -> list[dict[str, Any]]:
    """The documents among the ranked items, in rank order, numbered from 1."""
    ids: list[str] = []
    for item in items:
        if item.document_id and item.document_id not in ids:
            ids.append(item.document_id)
    briefs = documents_brief(project_id=project_id, ids=ids[:limit])
    refs = [briefs[i] for i in ids[:limit] if i in briefs]
    return [
        {
            "n": n,
            "document_id": ref["id"],
            "title": ref["title"],
            "author": ref["author"],
            "updated_at": ref["updated_at"],
            "source_path": ref["source_path"],
        }
        for n, ref in enumerate(refs, start=1)
    ]


def _llm_answer(turn: ChatTurnInput, context: _Context, references: list[dict[str, Any]]) -> str:
    number = {ref["document_id"]: ref["n"] for ref in references}
    sources = [
        f"[{number[item.document_id]}] {item.document_name}\n{item.text}"
        for item in context.items
        if item.document_id in number
    ]
    past = [
        f"({item.metadata.get('role', 'message')}) {item.text}" for item in context.items if item.memory_id
    ]
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    if context.summary:
        messages.append(
            {"role": "system", "content": f"Summary of the conversation so far: {context.summary}"}
        )
    messages += [{"role": m["role"], "content": m["text"]} for m in context.history]
    prompt = turn.message
    if sources or past:
        blocks = ["Sources:\n" + "\n\n".join(sources)] if sources else []
        blocks += ["From the user's conversations:\n" + "\n".join(past)] if past else []
        prompt = "\n\n".join(blocks) + f"\n\nQuestion: {turn.message}"
    messages.append({"role": "user", "content": prompt})
    return chat(messages).strip()


def _extractive_answer(turn: ChatTurnInput, context: _Context, references: list[dict[str, Any]]) -> str:
    """The sentences that share most of the question's terms: from the referenced documents' chunks
    (cited [n]) or, without documents, from the conversation's earlier messages."""
    wanted = terms(turn.message)
    number = {ref["document_id"]: ref["n"] for ref in references}
    candidates: list[tuple[float, int, str]] = []
    texts = [
        (item.text, number.get(item.document_id or ""))
        for item in context.items
        if item.document_id in number
    ]
    if not texts:
        texts = [(m["text"], None) for m in context.history] + [
            (item.text, None) for item in context.items if item.memory_id
        ]
    for rank, (text, n) in enumerate(texts):
        for sentence in sentences(text) or [text.strip()]:
            overlap = len(wanted & terms(sentence)) / max(1, len(wanted))
            if overlap > 0:
                candidates.append((overlap, rank, sentence + (f" [{n}]" if n else "")))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    chosen = list(dict.fromkeys(c[2] for c in candidates))[: settings.CHAT_EXTRACTIVE_SENTENCES]
    return " ".join(chosen) or NOTHING_FOUND


class _Question:
    """The turn's question, planned (checked, ids given) in the request's thread and written to Neo4j
    on a worker thread while the turn searches; its processing job, queued with the reply's, embeds
    it (with processing off, the worker thread does)."""

    def __init__(self, plan: StorePlan, writing: Future[dict[str, Any] | None]) -> None:
        self.plan = plan
        self.writing = writing
        self.message_id: str = plan.rows[0]["id"]

    @classmethod
    def write(cls, project_id: str, scope: Scope, text: str) -> _Question:
        message = MessageInput("user", text)
        plan = memories_store_plan(
            project_id=project_id, scope=scope, messages=[message], queue=False, embed=False
        )
        return cls(plan, _writer.submit(cls._embedded_write, plan))

    @staticmethod
    def _embedded_write(plan: StorePlan) -> dict[str, Any] | None:
        # A stored message's vectors are its line's or sentences' (memory.vectors), not the query's.
        # The turn's processing job embeds it with the reply, as nothing in the turn searches it; with
        # processing off there is no job, so it is embedded here.
        if not settings.MEMORY_PROCESS_ON_STORE:
            message_vectors.set_on(plan.rows)
        return memories_store_write(plan)

    def stored(self) -> str | None:
        """Wait for the write (raising what it raised); the conversation's id."""
        return memories_store_finish(self.plan, self.writing.result()).conversation_id

    def kept(self) -> None:
        """The turn failed after the question was sent: once it is written, queue its processing."""
        try:
            self.writing.result()
        except Exception:
            return  # not written: nothing to process
        if settings.MEMORY_PROCESS_ON_STORE:
            memories_queue_processing(self.plan.project_id, [self.message_id])


class _LLMFailed(Exception):
    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _retrieved(
    project_id: str,
    turn: ChatTurnInput,
    context: _Context,
    vector: Future[list[float]] | None,
    progress: Reporter,
) -> list[dict[str, Any]]:
    """The ranked items (with `rag`) into `context`; their documents as the turn's references."""
    if turn.rag:
        progress.phase("retrieving", "Searching documents and past conversations", pct=30)
        context.items = _retrieve(project_id, turn, context, vector)
    return _references(project_id, context.items, turn.top_k)


def _answer(mode: str, turn: ChatTurnInput, context: _Context, references: list[dict[str, Any]]) -> str:
    if mode != "llm":
        return _extractive_answer(turn, context, references)
    try:
        return _llm_answer(turn, context, references)
    except Exception as exc:
        raise _LLMFailed(exc) from exc


class _Clock:
    def __init__(self) -> None:
        self.started = self.lap = time.perf_counter()
        self.timings: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name], self.lap = round((now - self.lap) * 1000, 2), now

    def total(self) -> dict[str, float]:
        return {**self.timings, "total": round((time.perf_counter() - self.started) * 1000, 2)}


def chat_turn(*, project_id: str, turn: ChatTurnInput) -> ChatTurn:
    """One turn. With `persist` the user message is stored first and kept whatever happens next; a
    reply the LLM could not give is stored as failed and answered with 503 naming the ids. The
    question's embedding, its write and the search overlap (docs/decisions.md, "Chat turns")."""
    mode = _check(turn)
    turn_id = turn.turn_id or str(uuid.uuid4())
    progress = Reporter(project_id=project_id, retrieval_id=turn_id)
    clock = _Clock()
    # the query's embedding, computed while the conversation is read (the stored question is embedded
    # from its line by the turn's processing job)
    vector = embed_soon(turn.message) if turn.persist or turn.rag else None
    scope, context = _conversation(project_id, turn)
    clock("read_conversation")
    conversation_id, message_id = turn.conversation_id, None
    question: _Question | None = None
    try:
        if vector is not None and turn.persist:
            question = _Question.write(project_id, scope, turn.message)
            message_id = question.message_id
        clock("store_message")
        references = _retrieved(project_id, turn, context, vector, progress)
        clock("retrieve")
        if question is not None:
            conversation_id = question.stored()
            progress.phase("message_stored", "Stored your message", pct=50)
            clock("store_message_wait")
        progress.phase("answering", f"Answering from {len(references)} documents", pct=60)
        answer = _answer(mode, turn, context, references)
    except _LLMFailed as failed:
        raise _failure(
            project_id, scope, turn, progress, failed.cause, conversation_id, message_id
        ) from failed.cause
    except Exception:
        if question is not None:
            question.kept()
        raise
    clock("answer")
    reply_id = job_id = None
    if turn.persist:
        refs = tuple(ref["document_id"] for ref in references)
        reply = memories_store(
            project_id=project_id,
            scope=scope,
            messages=[MessageInput("assistant", answer, references=refs)],
            process_with=(message_id,) if message_id else (),
            embed_later=True,
        )
        reply_id, job_id = (reply.stored[0]["id"] if reply.stored else None), reply.job_id
    clock("store_reply")
    progress.phase("completed", "Answered", pct=100)
    return ChatTurn(
        turn_id=turn_id,
        conversation_id=conversation_id,
        message_id=message_id,
        reply_id=reply_id,
        answer=answer,
        references=references,
        answer_with_references=references_block(answer, references),
        mode=mode,
        job_id=job_id,
        timings_ms=clock.total(),
    )


def _failure(
    project_id: str,
    scope: Scope,
    turn: ChatTurnInput,
    progress: Reporter,
    exc: Exception,
    conversation_id: str | None,
    message_id: str | None,
) -> DependencyUnavailable:
    """The LLM failed: the reply is stored as failed (the user message stays); the error names both."""
    reason = f"{exc.__class__.__name__}: {exc}"[:300]
    reply_id = None
    if turn.persist:
        failed = MessageInput(
            "assistant", f"(no answer: the language model failed: {reason})", status="failed"
        )
        stored = memories_store(
            project_id=project_id,
            scope=scope,
            messages=[failed],
            process_with=(message_id,) if message_id else (),
            embed_later=True,
        )
        reply_id = stored.stored[0]["id"] if stored.stored else None
    progress.error("The language model failed; your message is kept", reason)
    error = exc if isinstance(exc, DependencyUnavailable) else DependencyUnavailable("llm", reason)
    error.details.update(conversation_id=conversation_id, message_id=message_id, reply_id=reply_id)
    return error
