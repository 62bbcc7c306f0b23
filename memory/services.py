"""Writes of the memory app: store, process (facts, preferences, mentions, summaries), consolidate,
delete and forget. Reads are in memory.selectors."""

from __future__ import annotations

import hashlib
import logging
import time
import unicodedata
import uuid
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.db import transaction
from neo4j import ManagedTransaction
from neo4j.exceptions import ClientError
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from core import graph
from core.embeddings import get_embedder
from core.errors import DependencyUnavailable, InvalidInput, NotFound, PayloadTooLarge
from core.graph.schema import ensure_schema
from core.graph.transfer import GraphOwner, module_labels
from core.jobs import broker_ensure, job_submit
from core.jobs.tasks import JobOutcome
from core.llm.client import LLMInvalidOutput, llm_configured
from core.models import Job, Project
from core.progress.events import job_progress
from core.services import project_embedder_check
from core.text.pii import anonymise
from knowledge.pipeline.chunking import count_tokens
from knowledge.selectors import entities_named, references_resolve
from memory import cypher, extraction
from memory import embedding as memory_embedding
from memory import metadata as message_metadata
from memory import nodes as memory_nodes
from memory import text as message_text
from memory import vectors as message_vectors
from memory.dto import ForgetResult, MessageInput, StoreResult
from memory.indexes import ensure_memory_indexes
from memory.models import MemoryErasure
from memory.scope import Scope, conversation_key, node_tokens, token

logger = logging.getLogger(__name__)

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def now_iso() -> str:
    return datetime.now(UTC).strftime(TIMESTAMP_FORMAT)


def normalise_timestamp(value: str) -> str:
    """Any ISO-8601 time → UTC `YYYY-MM-DDTHH:MM:SS.ffffffZ` (sorts as text); naive means UTC."""
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(
            f"timestamp {value[:40]!r} is not ISO-8601", details={"field": "timestamp"}
        ) from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:  # 0001-01-01T00:00:00+14:00 is a valid ISO-8601 time before the first UTC one
        utc = parsed.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidInput(
            f"timestamp {value[:40]!r} is outside the years 1 to 9999 in UTC", details={"field": "timestamp"}
        ) from exc
    # isoformat, not strftime: strftime writes the year 1 as "1", which does not sort as text
    return utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _prepare(project_id: str, scope: Scope, *, embeds: bool = True) -> Project:
    """The scope's project, its schema and indexes in place; 409 when the work `embeds` (stores,
    searches, summaries) and the project's vectors come from another embedder than the configured one."""
    scope.require()
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound("no such project")
    if embeds:
        project_embedder_check(project=project)
    ensure_schema()
    ensure_memory_indexes()
    return project


def _progress(job: Job, phase: str, pct: int, summary: str, details: str = "") -> None:
    job_progress(job, message_type="memory_progress", phase=phase, pct=pct, summary=summary, details=details)


# --- store ----------------------------------------------------------------------------------------------


def _supplied_embeddings(
    given: list[tuple[int, list[float] | npt.NDArray[np.float32]]],
) -> dict[int, list[float]]:
    """Client-supplied embeddings by message position, checked in one numpy pass (right size,
    finite, not all zero) and returned as `Vector`s of floats."""
    if not given:
        return {}
    dims = settings.EMBEDDINGS_DIMENSIONS
    for position, vector in given:
        if len(vector) != dims:
            raise InvalidInput(
                f"messages[{position}].embedding has {len(vector)} values; this project's embedder has "
                f"{dims}",
                details={"field": f"messages[{position}].embedding"},
            )
    try:
        matrix = np.asarray([vector for _p, vector in given], dtype=np.float64)
        # checked as what is stored: float32. 1e39 is a finite double but no float32 (Neo4j refuses
        # it), 1e-46 a non-zero double that is a float32 zero.
        with np.errstate(over="ignore", under="ignore"):
            stored = matrix.astype(np.float32)
        valid = np.isfinite(stored).all(axis=1) & stored.any(axis=1)
    except OverflowError:  # an integer beyond float range: find which
        valid = np.asarray([_finite_vector(vector) for _p, vector in given])
    if not valid.all():
        position = given[int(np.argmin(valid))][0]
        raise InvalidInput(
            f"messages[{position}].embedding must be finite and not all zero as float32 values",
            details={"field": f"messages[{position}].embedding"},
        )
    # A list of Python floats (what JSON numbers with a fraction or exponent parse to) goes on as it
    # came; one with integers in it, or an array, is converted. Building 384,000 new floats cost
    # ~20 ms per 1,000.
    return {
        p: graph.Vector(
            vector if isinstance(vector, list) and set(map(type, vector)) == {float} else matrix[i].tolist()
        )
        for i, (p, vector) in enumerate(given)
    }


def _finite_vector(vector: list[float] | npt.NDArray[np.float32]) -> bool:
    try:
        with np.errstate(over="ignore", under="ignore"):
            stored = np.asarray(vector, dtype=np.float64).astype(np.float32)
    except OverflowError:
        return False
    return bool(np.isfinite(stored).all() and stored.any())


def memories_batch_check(*, count: int) -> None:
    if count > settings.MEMORY_MAX_MESSAGES_PER_REQUEST:
        raise PayloadTooLarge(
            f"at most {settings.MEMORY_MAX_MESSAGES_PER_REQUEST} messages per request; send the rest "
            "in further requests",
            details={"messages": count, "limit": settings.MEMORY_MAX_MESSAGES_PER_REQUEST},
        )


def _redacted(
    keep: list[tuple[int, MessageInput]], supplied: dict[int, list[float]]
) -> list[tuple[int, MessageInput]]:
    """The project redacts PII at ingest: placeholders replace it before anything is stored, and an
    embedding the caller computed from the original text is dropped (it would encode the PII). The
    strings of the metadata are redacted as the text is."""
    known = {m.author_name for _p, m in keep if m.author_name}
    out = []
    for position, message in keep:
        result = anonymise(message.text, known_names=known, phone_region=settings.PII_PHONE_REGION)
        if result.changed:
            supplied.pop(position, None)
            message = replace(message, text=result.text)
        if message.metadata:
            message = replace(message, metadata=_redacted_metadata(message.metadata, known))
        out.append((position, message))
    return out


def _redacted_metadata(
    metadata: dict[str, message_metadata.Value], known: set[str]
) -> dict[str, message_metadata.Value]:
    def redact(value: message_metadata.Value) -> message_metadata.Value:
        if isinstance(value, list):
            return [str(redact(item)) for item in value]
        if isinstance(value, str):
            return anonymise(value, known_names=known, phone_region=settings.PII_PHONE_REGION).text
        return value

    return {key: redact(value) for key, value in metadata.items()}


def memories_store(
    *,
    project_id: str,
    scope: Scope,
    messages: list[MessageInput],
    queue: bool = True,
    process_with: tuple[str, ...] = (),
    embed_later: bool = False,
    embed_in_worker: bool | None = None,
) -> StoreResult:
    """Store a batch of messages in one transaction (one UNWIND), in order, as the next messages of
    the scope's conversation. A role outside MEMORY_ROLES is 400 (nothing stored). Facts,
    preferences, mentions and summaries are derived afterwards by a Celery job (MEMORY_PROCESS_ON_STORE).

    `queue` False: this call queues no job (the caller's next store names these messages in
    `process_with`, the ids of earlier messages that its job processes too). `embed_later`: when no
    message has a supplied embedding and this call queues the job, the job embeds the messages
    instead of this call (a chat reply, which nothing searches in the turn that stores it).
    `embed_in_worker` (default MEMORY_EMBED_IN_WORKER) does the same for any store: the call answers
    without embedding, and the worker embeds in batches (`embedding_pending` in the result).

    The three steps are also called one by one (a chat turn writes its question while it searches):
    `memories_store_plan` checks and prepares (400/413/503 before anything is written),
    `memories_store_write` writes to Neo4j alone (no Django database: safe on a worker thread), and
    `memories_store_finish` queues the processing job. A store that queues one writes on a worker
    thread while this one creates the job's row (`_store_and_queue`)."""
    plan = memories_store_plan(
        project_id=project_id,
        scope=scope,
        messages=messages,
        queue=queue,
        process_with=process_with,
        embed_later=embed_later
        or (settings.MEMORY_EMBED_IN_WORKER if embed_in_worker is None else embed_in_worker),
    )
    if plan.rows and plan.queues:
        return _store_and_queue(plan)
    return memories_store_finish(plan, memories_store_write(plan))


# the Neo4j writes of stores that queue a job (Neo4j only: no SQL on these threads)
_writes = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memory-store")


def _store_and_queue(plan: StorePlan) -> StoreResult:
    """Write the plan on a worker thread while the processing job's row is created here, in a
    transaction the write's failure rolls back; the job's task is sent when the transaction commits,
    after the write (the ids it names are the plan's)."""
    writing: Future[dict[str, Any] | None] = _writes.submit(memories_store_write, plan)
    try:
        with transaction.atomic():
            job_id = memories_queue_processing(
                plan.project_id,
                [*plan.process_with, *(row["id"] for row in plan.rows)],
                embedding_pending=plan.embedding_pending,
            )
            written = writing.result()
    except BaseException:
        wait([writing])  # the error is answered once the write has ended, not while it runs
        raise
    return _result(plan, written, job_id)


@dataclass
class StorePlan:
    """A checked store: the rows to write (ids given here) and what finishing it needs."""

    project_id: str
    scope: Scope
    project: Project
    rows: list[dict[str, Any]]
    positions: list[int]  # each row's index in the request
    references: list[list[str]]  # each row's referenced document ids
    skipped: list[dict[str, Any]]
    queues: bool
    process_with: tuple[str, ...]
    # messages whose caller message id the conversation holds already: not stored again, answered
    # with the stored message (index, id, seq, role, duplicate) and its conversation's id
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    duplicate_of: str | None = None
    embedding_pending: bool = False  # the rows are written without embeddings; the job embeds them


def memories_store_plan(
    *,
    project_id: str,
    scope: Scope,
    messages: list[MessageInput],
    queue: bool = True,
    process_with: tuple[str, ...] = (),
    embed_later: bool = False,
    embed: bool = True,
) -> StorePlan:
    """Everything of `memories_store` before the write; nothing is written. `embed` False: no
    message is embedded here, the caller sets each row's `embedding` before `memories_store_write`
    (a chat turn's question, embedded while the plan is made; a redacted text needs its own)."""
    scope.require()
    keep, skipped = _kept(messages)
    keep, duplicates, duplicate_of = _not_stored_yet(project_id, scope, keep)
    supplied = _supplied_embeddings([(p, m.embedding) for p, m in keep if m.embedding is not None])
    stamp = now_iso()
    timestamps = {p: normalise_timestamp(m.timestamp) if m.timestamp else stamp for p, m in keep}
    project = _prepare(project_id, scope)
    references = _references(project_id, keep) if keep else {}
    queues = bool(keep) and queue and settings.MEMORY_PROCESS_ON_STORE
    if keep and settings.MEMORY_PROCESS_ON_STORE:
        broker_ensure()  # the processing job is queued after the write
    if project.redact_pii_at_ingest:
        keep = _redacted(keep, supplied)
    rows = [
        {
            "id": str(uuid.uuid4()),
            "text": m.text,
            "role": m.role,
            "timestamp": timestamps[p],
            "message_id": m.message_id,
            "author_name": m.author_name,
            **message_text.indexed(
                text=m.text, role=m.role, author_name=m.author_name, timestamp=timestamps[p]
            ),
            "token_count": count_tokens(m.text),
            "embedding": supplied.get(p),
            "sentence_embeddings": None,  # a supplied embedding comes without (memory.vectors)
            "refs": references[p][0],
            "status": m.status,
            "metadata": message_metadata.stored_properties(m.metadata),
            "metadata_keys": message_metadata.stored_keys(m.metadata),
        }
        for p, m in keep
    ]
    embedding_pending = bool(rows) and embed_later and queues and not supplied
    if embed and not embedding_pending:
        _embed_missing(rows)
    return StorePlan(
        project_id=project_id,
        scope=scope,
        project=project,
        rows=rows,
        positions=[p for p, _m in keep],
        references=[references[p][1] for p, _m in keep],
        skipped=skipped,
        queues=queues,
        process_with=process_with,
        duplicates=duplicates,
        duplicate_of=duplicate_of,
        embedding_pending=embedding_pending,
    )


def _stored_message_ids(project_id: str, scope: Scope, message_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Of these caller message ids, those the scope's conversation holds: id → the stored message."""
    if not message_ids:
        return {}
    rows = graph.read(
        cypher.STORED_MESSAGE_IDS,
        project_id=project_id,
        conversation_key=conversation_key(scope),
        message_ids=message_ids,
    )
    return {r["message_id"]: r for r in rows}


def _not_stored_yet(
    project_id: str, scope: Scope, keep: list[tuple[int, MessageInput]]
) -> tuple[list[tuple[int, MessageInput]], list[dict[str, Any]], str | None]:
    """Split off the messages whose `message_id` the conversation holds already (a retried store
    changes nothing): (the rest, what the stored ones answer, their conversation's id). A batch
    that names one message id twice is 400."""
    first: dict[str, int] = {}
    for position, message in keep:
        if message.message_id is not None:
            if message.message_id in first:
                raise InvalidInput(
                    f"messages[{position}].message_id repeats messages[{first[message.message_id]}]'s: a "
                    "message id names one message of a conversation",
                    details={"field": f"messages[{position}].message_id"},
                )
            first[message.message_id] = position
    stored = _stored_message_ids(project_id, scope, list(first))
    duplicates = [
        _duplicate(position, stored[m.message_id]) for position, m in keep if m.message_id in stored
    ]
    rest = [(position, m) for position, m in keep if m.message_id not in stored]
    return rest, duplicates, next((s["conversation_id"] for s in stored.values()), None)


def _duplicate(position: int, stored: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": stored["id"],
        "index": position,
        "seq": stored["seq"],
        "role": stored["role"],
        "duplicate": True,
    }


def _drop_stored_meanwhile(plan: StorePlan) -> None:
    """A store of the same message ids that committed between this one's check and its write: the
    rows it wrote are dropped from the plan and answered as duplicates."""
    wanted = [row["message_id"] for row in plan.rows if row["message_id"] is not None]
    stored = _stored_message_ids(plan.project_id, plan.scope, wanted)
    if not stored:
        return
    keep = [i for i, row in enumerate(plan.rows) if row["message_id"] not in stored]
    plan.duplicates += [
        _duplicate(plan.positions[i], stored[row["message_id"]])
        for i, row in enumerate(plan.rows)
        if row["message_id"] in stored
    ]
    plan.duplicate_of = plan.duplicate_of or next(iter(stored.values()))["conversation_id"]
    plan.rows = [plan.rows[i] for i in keep]
    plan.positions = [plan.positions[i] for i in keep]
    plan.references = [plan.references[i] for i in keep]


def _message_id_taken(exc: BaseException) -> bool:
    return isinstance(exc, ClientError) and exc.code == "Neo.ClientError.Schema.ConstraintValidationFailed"


def memories_store_write(plan: StorePlan) -> dict[str, Any] | None:
    """Write the plan's rows (Neo4j only); what the store statement returned, None for no rows."""
    if not plan.rows:
        return None
    # A forget running at the same moment may delete the conversation the MERGE has just matched
    # (Neo4j: EntityNotFound). Nothing of the attempt was written; the next one starts a new
    # conversation.
    # A store of the same message ids may commit between this one's check and its write (the
    # constraint on conversation and message id refuses the second): those rows are answered as
    # duplicates and the rest written.
    written = None
    for attempt in Retrying(
        stop=stop_after_attempt(3),
        retry=retry_if_exception(lambda e: _conversation_vanished(e) or _message_id_taken(e)),
        reraise=True,
    ):
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                _drop_stored_meanwhile(plan)
            written = _store_rows(plan.project_id, plan.scope, plan.project, plan.rows) if plan.rows else None
    return written


def memories_store_finish(plan: StorePlan, written: dict[str, Any] | None) -> StoreResult:
    """The store's result, after queueing its processing job (when it queues one)."""
    job_id = None
    if written is not None and plan.queues:
        job_id = memories_queue_processing(
            plan.project_id,
            [*plan.process_with, *(s["id"] for s in written["stored"])],
            embedding_pending=plan.embedding_pending,
        )
    return _result(plan, written, job_id)


def _result(plan: StorePlan, written: dict[str, Any] | None, job_id: str | None) -> StoreResult:
    stored = [
        {"id": s["id"], "index": plan.positions[i], "seq": s["seq"], "role": plan.rows[i]["role"]}
        | ({"references": plan.references[i]} if plan.references[i] else {})
        for i, s in enumerate(written["stored"] if written is not None else [])
    ]
    stored = sorted(stored + plan.duplicates, key=lambda s: s["index"])
    conversation_id = written["conversation_id"] if written is not None else plan.duplicate_of
    return StoreResult(
        conversation_id=conversation_id,
        stored=stored,
        skipped=plan.skipped,
        job_id=job_id,
        embedding_pending=plan.embedding_pending and written is not None,
    )


def _kept(messages: list[MessageInput]) -> tuple[list[tuple[int, MessageInput]], list[dict[str, Any]]]:
    """The batch checked (413 for a text over the limit), then split into the messages stored, with
    their positions, and those skipped for their role or an empty text."""
    memories_batch_check(count=len(messages))
    for position, message in enumerate(messages):
        if len(message.text) > settings.MEMORY_MAX_MESSAGE_CHARS:
            raise PayloadTooLarge(
                f"messages[{position}].text has {len(message.text)} characters; the limit is "
                f"{settings.MEMORY_MAX_MESSAGE_CHARS}",
                details={"field": f"messages[{position}].text", "limit": settings.MEMORY_MAX_MESSAGE_CHARS},
            )
    allowed = settings.MEMORY_ROLES
    for position, message in enumerate(messages):
        if message.role not in allowed:  # refused, never dropped: nothing of the batch is stored
            raise InvalidInput(
                f"messages[{position}].role {message.role!r} is not one this platform stores; "
                f"MEMORY_ROLES allows {', '.join(allowed)}",
                details={"field": f"messages[{position}].role", "allowed": list(allowed)},
            )
    keep: list[tuple[int, MessageInput]] = []
    skipped: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        if not message.text.strip():
            skipped.append({"index": position, "role": message.role, "reason": "empty_text"})
        else:  # one Unicode form for what is stored, embedded and indexed (a query is normalised too)
            keep.append((position, replace(message, text=unicodedata.normalize("NFC", message.text))))
    return keep, skipped


def _embed_missing(rows: list[dict[str, Any]]) -> None:
    """Embed the rows that came without an embedding: their lines (memory.text.line: speaker, day,
    text), or their sentences' (memory.vectors)."""
    missing = [row for row in rows if row["embedding"] is None]
    if missing:
        message_vectors.set_on(missing)


def _references(
    project_id: str, keep: list[tuple[int, MessageInput]]
) -> dict[int, tuple[list[str], list[str]]]:
    """Each kept message's references → (element ids to link: documents and chunks, the document
    ids). Every reference must name a document or chunk of this project: otherwise 400, nothing
    stored."""
    limit = settings.MEMORY_MAX_REFERENCES_PER_MESSAGE
    for position, message in keep:
        if len(message.references) > limit:
            raise InvalidInput(
                f"messages[{position}].references has {len(message.references)} entries; "
                f"the limit is {limit}",
                details={"field": f"messages[{position}].references", "limit": limit},
            )
    wanted = [ref for _p, m in keep for ref in m.references]
    resolved = references_resolve(project_id=project_id, refs=wanted) if wanted else {}
    unknown = sorted(set(wanted) - set(resolved))
    if unknown:
        raise InvalidInput(
            "references name no document or chunk of this project",
            details={"field": "references", "unknown_references": unknown[:50]},
        )
    out: dict[int, tuple[list[str], list[str]]] = {}
    for position, message in keep:
        found = [resolved[ref] for ref in message.references]
        refs = {r.document_ref for r in found} | {r.chunk_ref for r in found if r.chunk_ref}
        out[position] = (sorted(refs), sorted({r.document_id for r in found}))
    return out


def _conversation_vanished(exc: BaseException) -> bool:
    return isinstance(exc, ClientError) and exc.code == "Neo.ClientError.Statement.EntityNotFound"


def _store_rows(
    project_id: str, scope: Scope, project: Project, rows: list[dict[str, Any]]
) -> dict[str, Any]:
    statement = cypher.STORE_STATEMENTS[
        (
            any(row["refs"] for row in rows),
            any(row["embedding"] is not None for row in rows),
            any(row.get("sentence_embeddings") is not None for row in rows),
        )
    ]
    return graph.write(
        statement,
        project_id=project_id,
        conversation_key=conversation_key(scope),
        conversation_id=str(uuid.uuid4()),
        scope_tokens=node_tokens(project_id, scope),
        accessibility=project.default_accessibility,
        anonymize=project.default_anonymize,
        retention_days=project.default_retention_days,
        rows=rows,
        **scope.params(),
    )[0]


def memories_queue_processing(
    project_id: str, memory_ids: list[str], *, embedding_pending: bool = False
) -> str:
    """Queue the processing job of these stored messages (after the transaction commits); its id.
    `embedding_pending`: they were stored without embeddings (another job may embed them early)."""
    inputs: dict[str, Any] = {"memory_ids": memory_ids}
    if embedding_pending:
        inputs[memory_embedding.PENDING] = True
    job = job_submit(
        project_id=project_id,
        kind=memory_embedding.KIND,
        task="memory.tasks.memory_process",
        queue=settings.MEMORY_QUEUE,
        inputs=inputs,
        counts={"memories": len(memory_ids)},
    )
    return job.id


# --- processing: facts, preferences, mentions, summaries ----------------------------------------------


def _owner_key(conversation: dict[str, Any]) -> str:
    """Whose facts these are: the user (per application) when the scope names one, else the
    conversation's whole scope."""
    if conversation.get("user_id"):
        parts = [token("user_id", conversation["user_id"])]
        if conversation.get("application_id"):
            parts.append(token("application_id", conversation["application_id"]))
        return " ".join(parts)
    return conversation["key"]


def _derived_key(owner: str, *parts: str) -> str:
    raw = "\x1f".join([owner, *(extraction.norm(p) for p in parts)])
    return hashlib.sha256(raw.encode()).hexdigest()


# A statement drawn from messages: (label, key, normalised value, properties, source message ids).
_Item = tuple[str, str, str, dict[str, Any], list[str]]


def _write_derived(
    project_id: str,
    conversation: dict[str, Any],
    derived: extraction.Derived,
    timestamps: dict[str, str],
) -> dict[str, int]:
    """Facts and preferences of one conversation's messages, in one transaction. A statement already
    current gains sources; a different value for the same key supersedes the current one (or is
    itself superseded when the current one is newer); sources that were forgotten meanwhile make
    the statement go unwritten."""
    owner = _owner_key(conversation)
    items = _derived_items(owner, conversation, derived)
    if not items:
        return {"facts": 0, "preferences": 0, "superseded": 0}
    vectors = get_embedder().embed([props["text"] for _l, _k, _v, props, _s in items])
    counts = {"facts": 0, "preferences": 0, "superseded": 0}

    def work(tx: ManagedTransaction) -> None:
        alive, current = _statements_on_record(tx, project_id, items)
        plan = _DerivedPlan()
        # decided in order, so two statements of one job with the same key behave as if stored apart
        for item, vector in zip(items, vectors, strict=True):
            label, key, value_norm, props, item_sources = item
            alive_ids = [s for s in item_sources if s in alive]
            if not alive_ids:  # forgotten meanwhile: nothing drawn from it is written
                continue
            node = {
                **props,
                "project_id": project_id,
                "key": key,
                "value_norm": value_norm,
                "mode": derived.mode,
                "valid_from": max(timestamps.get(s, "") for s in alive_ids) or now_iso(),
                "source_message_ids": alive_ids,
                "embedding": vector,
                "conversation_id": conversation["id"],
                "application_id": conversation.get("application_id"),
                "agent_id": conversation.get("agent_id"),
                "user_id": conversation.get("user_id"),
                "thread_id": conversation.get("thread_id"),
                "scope_tokens": conversation.get("scope_tokens"),
            }
            plan.decide(label, node, current[(label, key)], counts)
        plan.apply(tx, project_id)
        if plan.new_preferences and conversation.get("user_id"):
            _link_profile(tx, project_id, owner, conversation, plan.new_preferences)

    graph.write_tx(work)
    return counts


def _derived_items(owner: str, conversation: dict[str, Any], derived: extraction.Derived) -> list[_Item]:
    accessibility = conversation.get("accessibility") or "shared"
    items: list[_Item] = []
    for fact in derived.facts:
        props = {
            "text": fact.text[:1000],
            "subject": fact.subject,
            "predicate": fact.predicate,
            "object": fact.object,
            "confidence": fact.confidence,
            "accessibility": accessibility,
        }
        key = _derived_key(owner, fact.subject, fact.predicate)
        items.append(("Fact", key, extraction.norm(fact.object), props, fact.source_ids))
    for pref in derived.preferences:
        props = {
            "text": pref.text[:1000],
            "category": pref.category,
            "value": pref.value,
            "sentiment": pref.sentiment,
            "accessibility": accessibility,
        }
        key = _derived_key(owner, "preference", pref.value)
        items.append(("Preference", key, pref.sentiment, props, pref.source_ids))
    return items


def _statements_on_record(
    tx: ManagedTransaction, project_id: str, items: list[_Item]
) -> tuple[set[str], dict[tuple[str, str], list[dict[str, Any]]]]:
    """The items' source messages that still exist, and the current statements of their keys."""
    sources = sorted({source for item in items for source in item[4]})
    row = tx.run(cypher.SOURCES_ALIVE, ids=sources, project_id=project_id).single()
    alive = set(row["ids"]) if row else set()
    current: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for label in ("Fact", "Preference"):
        keys = sorted({key for lab, key, _v, _p, _s in items if lab == label})
        if keys:
            query = cypher.DERIVED_CURRENT.format(label=label)
            for found in tx.run(query, keys=keys, project_id=project_id):
                current[(label, found["key"])].append(found.data())
    return alive, current


@dataclass
class _DerivedPlan:
    """What one job's statements do to those on record: create, add sources, supersede."""

    creates: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    additions: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    supersedes: dict[str, list[dict[str, str]]] = field(default_factory=lambda: defaultdict(list))
    new_preferences: list[str] = field(default_factory=list)

    def decide(
        self, label: str, node: dict[str, Any], on_record: list[dict[str, Any]], counts: dict[str, int]
    ) -> None:
        """A statement with the value on record adds its sources to it; another value is created
        and supersedes the statements on record, or is superseded by a newer one. `on_record` is
        updated as if the statement were stored."""
        sources, valid_from, value_norm = node["source_message_ids"], node["valid_from"], node["value_norm"]
        same = next((r for r in on_record if r["value_norm"] == value_norm), None)
        if same is not None:
            self.additions[label].append({"id": same["id"], "sources": sources})
            return
        new_id = str(uuid.uuid4())
        self.creates[label].append({"props": {**node, "id": new_id}, "sources": sources})
        counts["facts" if label == "Fact" else "preferences"] += 1
        is_current = True
        for other in list(on_record):
            if other["valid_from"] and other["valid_from"] > valid_from:
                # the statement on record is newer: this one arrives already superseded
                self.supersedes[label].append({"new_id": other["id"], "old_id": new_id})
                is_current = False
            else:
                self.supersedes[label].append({"new_id": new_id, "old_id": other["id"]})
                on_record.remove(other)
            counts["superseded"] += 1
        if is_current:
            on_record.append({"id": new_id, "value_norm": value_norm, "valid_from": valid_from})
        if label == "Preference":
            self.new_preferences.append(new_id)

    def apply(self, tx: ManagedTransaction, project_id: str) -> None:
        for label, rows in self.creates.items():
            tx.run(cypher.DERIVED_CREATE.format(label=label), rows=rows, project_id=project_id).consume()
        for label, rows in self.additions.items():
            tx.run(cypher.DERIVED_ADD_SOURCES.format(label=label), rows=rows, project_id=project_id).consume()
        for label, rows in self.supersedes.items():
            tx.run(cypher.DERIVED_SUPERSEDE.format(label=label), rows=rows, project_id=project_id).consume()


def _link_profile(
    tx: ManagedTransaction,
    project_id: str,
    owner: str,
    conversation: dict[str, Any],
    preference_ids: list[str],
) -> None:
    """The user's profile (one per owner key) links the new preferences."""
    tx.run(
        cypher.PROFILE_LINK,
        project_id=project_id,
        key=owner,
        id=str(uuid.uuid4()),
        user_id=conversation["user_id"],
        application_id=conversation.get("application_id"),
        scope_tokens=node_tokens(
            project_id,
            Scope(application_id=conversation.get("application_id"), user_id=conversation["user_id"]),
        ),
        now=now_iso(),
        preference_ids=preference_ids,
    ).consume()


def _link_mentions(project_id: str, messages: list[dict[str, Any]]) -> int:
    grams = {m["id"]: extraction.mention_grams(m["text"]) for m in messages}
    named = entities_named(project_id=project_id, grams=[g for gs in grams.values() for g in gs])
    links = [
        {"memory_id": memory_id, "refs": sorted({ref for g in gs for ref in named.get(g, [])})}
        for memory_id, gs in grams.items()
    ]
    links = [link for link in links if link["refs"]]
    if not links:
        return 0
    return int(graph.write(cypher.MENTIONS_LINK, project_id=project_id, links=links)[0]["links"])


def _conversation(project_id: str, conversation_id: str) -> dict[str, Any] | None:
    rows = graph.read(cypher.CONVERSATION_GET, project_id=project_id, id=conversation_id)
    return rows[0]["conversation"] if rows else None


def memories_embed_pending(*, project_id: str, memory_ids: list[str]) -> int:
    """Embed the given messages stored without an embedding (`memories_store(embed_later=True)`).
    A message whose text changed meanwhile (anonymised, with its new embedding) keeps what it has."""
    rows = graph.read(cypher.EMBEDDING_PENDING, project_id=project_id, ids=memory_ids)
    if not rows:
        return 0
    message_vectors.set_on(rows)
    written = graph.write(
        cypher.EMBEDDING_SET,
        project_id=project_id,
        rows=[{k: r[k] for k in ("id", "text", "embedding", "sentence_embeddings")} for r in rows],
    )
    return int(written[0]["embedded"]) if written else 0


def memories_derive(*, project_id: str, memory_ids: list[str]) -> dict[str, int]:
    """Facts, preferences and entity mentions of the given (still existing) memories."""
    rows = graph.read(cypher.MEMORIES_BY_ID, project_id=project_id, ids=memory_ids)
    by_conversation: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_conversation[row["conversation_id"]].append(row)
    totals = {"facts": 0, "preferences": 0, "superseded": 0, "mentions": 0}
    for conversation_id, messages in by_conversation.items():
        conversation = _conversation(project_id, conversation_id)
        if conversation is None:
            continue
        derived = extraction.derive(
            [
                extraction.Message(m["id"], m["role"], m["text"], m["timestamp"], m["author_name"])
                for m in messages
            ]
        )
        counts = _write_derived(
            project_id, conversation, derived, {m["id"]: m["timestamp"] for m in messages}
        )
        for key, value in counts.items():
            totals[key] += value
    totals["mentions"] = _link_mentions(project_id, rows)
    graph.write(cypher.MARK_PROCESSED, project_id=project_id, ids=[r["id"] for r in rows])
    return totals


def conversation_summarize(*, project_id: str, conversation_id: str, force: bool = False) -> str | None:
    """Summarise the conversation's messages that no summary covers yet (at most
    MEMORY_SUMMARY_MAX_MESSAGES of them). Without `force`, only once they reach MEMORY_SUMMARY_MESSAGES
    messages or MEMORY_SUMMARY_TOKENS tokens. Returns the new summary's id, if one was written."""
    rows = graph.read(
        cypher.PENDING_MESSAGES,
        project_id=project_id,
        conversation_id=conversation_id,
        limit=settings.MEMORY_SUMMARY_MAX_MESSAGES,
    )
    if not rows or not rows[0]["messages"]:
        return None
    messages = rows[0]["messages"]
    tokens = sum(m["token_count"] or 0 for m in messages)
    if (
        not force
        and len(messages) < settings.MEMORY_SUMMARY_MESSAGES
        and tokens < settings.MEMORY_SUMMARY_TOKENS
    ):
        return None
    text, mode = extraction.summarize(
        [extraction.Message(m["id"], m["role"], m["text"], m["timestamp"]) for m in messages]
    )
    written = graph.write(
        cypher.SUMMARY_WRITE,
        project_id=project_id,
        conversation_id=conversation_id,
        summarized_seq=rows[0]["summarized_seq"] or 0,
        memory_ids=[m["id"] for m in messages],
        id=str(uuid.uuid4()),
        text=text,
        embedding=get_embedder().embed_one(text),
        first_seq=messages[0]["seq"],
        last_seq=messages[-1]["seq"],
        mode=mode,
        created_at=now_iso(),
        tokens=tokens,
    )
    return written[0]["id"] if written else None


def conversation_describe(*, project_id: str, conversation_id: str, refresh: bool) -> bool:
    """Title and sentiment of a conversation (seed 003), from its first messages: written when it has
    none, and again with `refresh` (a new summary was written) or without an LLM (it costs nothing).
    Invalid LLM output falls back to the extractive description. True when written."""
    titled = graph.read(cypher.CONVERSATION_TITLE, project_id=project_id, conversation_id=conversation_id)
    if not titled or (titled[0]["title"] and not refresh and llm_configured()):
        return False
    rows = graph.read(
        cypher.CONVERSATION_OPENING,
        project_id=project_id,
        conversation_id=conversation_id,
        limit=settings.MEMORY_SUMMARY_MAX_MESSAGES,
    )
    if not rows:
        return False
    messages = [extraction.Message(r["id"], r["role"], r["text"], r["timestamp"]) for r in rows]
    try:
        title, sentiment, mode = extraction.describe(messages)
    except (LLMInvalidOutput, DependencyUnavailable) as exc:  # a title is not worth failing the job
        logger.warning("conversation %s described without the LLM: %s", conversation_id, exc)
        title, sentiment, mode = extraction.describe_extractive(messages)
    written = graph.write(
        cypher.CONVERSATION_DESCRIBE,
        project_id=project_id,
        conversation_id=conversation_id,
        title=title,
        sentiment=sentiment,
        mode=mode,
    )
    return bool(written)


def memories_process(*, job: Job) -> JobOutcome:
    """The job after a store: derive, link, and summarise conversations past the threshold."""
    memory_ids = list(job.inputs.get("memory_ids", []))
    started = time.perf_counter()
    # its own messages still without embeddings, and those of the stores queued behind it
    taken = memory_embedding.claim_queued(
        project_id=job.project_id, job_id=job.id, room=settings.MEMORY_EMBED_BATCH - len(memory_ids)
    )
    embedded = memories_embed_pending(project_id=job.project_id, memory_ids=[*memory_ids, *taken])
    embedded_sec = time.perf_counter() - started
    _progress(job, "extracting", 10, f"Extracting facts and preferences from {len(memory_ids)} message(s)")
    counts = memories_derive(project_id=job.project_id, memory_ids=memory_ids)
    counts["embedded"] = embedded  # its own and those of the queued stores it took
    counts["taken"] = len(taken)
    _progress(
        job,
        "summarizing",
        70,
        f"{counts['facts']} fact(s), {counts['preferences']} preference(s), {counts['mentions']} mention(s)",
    )
    conversations = {
        r["conversation_id"]
        for r in graph.read(cypher.MEMORIES_BY_ID, project_id=job.project_id, ids=memory_ids)
    }
    summaries = described = 0
    for conversation_id in sorted(conversations):
        written = 0
        while conversation_summarize(project_id=job.project_id, conversation_id=conversation_id):
            written += 1
        summaries += written
        described += conversation_describe(
            project_id=job.project_id, conversation_id=conversation_id, refresh=bool(written)
        )
    counts["summaries"] = summaries
    counts["described"] = described
    return JobOutcome(
        counts=counts,
        summary=f"Processed {len(memory_ids)} message(s); {summaries} summary(ies) written",
        timings={"embed_sec": round(embedded_sec, 3), "total_sec": round(time.perf_counter() - started, 3)},
    )


def memories_summarize(*, project_id: str, scope: Scope) -> str:
    """On demand: a job that summarises every conversation of the scope (whatever the threshold)."""
    _prepare(project_id, scope)
    broker_ensure()
    job = job_submit(
        project_id=project_id,
        kind="memory_summarize",
        task="memory.tasks.memory_summarize",
        queue=settings.MEMORY_QUEUE,
        inputs={"scope": scope.given()},
    )
    return job.id


def memories_summarize_run(*, job: Job) -> JobOutcome:
    scope = Scope(**job.inputs.get("scope", {}))
    ids = [
        r["id"]
        for r in graph.read(
            cypher.CONVERSATIONS_IN_SCOPE.format(scope=scope.where("c")),
            project_id=job.project_id,
            limit=settings.MEMORY_SCOPE_MAX_CONVERSATIONS,
            **scope.params(),
        )
    ]
    written = 0
    for i, conversation_id in enumerate(ids):
        _progress(
            job, "summarizing", 5 + int(90 * i / max(1, len(ids))), f"Conversation {i + 1} of {len(ids)}"
        )
        while conversation_summarize(project_id=job.project_id, conversation_id=conversation_id, force=True):
            written += 1
    return JobOutcome(
        counts={"conversations": len(ids), "summaries": written},
        summary=f"{written} summary(ies) written for {len(ids)} conversation(s)",
    )


# --- consolidation --------------------------------------------------------------------------------------


def memories_consolidate(
    *,
    project_id: str,
    scope: Scope | None,
    older_than_days: int,
    job: Job | None = None,
    cutoff: datetime | None = None,
) -> dict[str, int]:
    """Fold messages older than `older_than_days` (or than `cutoff`, a retention run's fixed moment)
    into consolidated summaries (seed 003: turns older than 90 days condensed to summaries). Facts,
    preferences and mentions drawn from them are first derived (if not yet) and then re-attached to
    the summary, so what they supported stays."""
    moment = cutoff or datetime.now(UTC) - timedelta(days=older_than_days)
    cutoff_text = moment.astimezone(UTC).strftime(TIMESTAMP_FORMAT)
    where = scope.where("m") if scope else "true"
    params = scope.params() if scope else {}
    candidates = graph.read(
        cypher.CONSOLIDATE_CANDIDATES.format(scope=where),
        project_id=project_id,
        cutoff=cutoff_text,
        limit=settings.MEMORY_SCOPE_MAX_CONVERSATIONS,
        **params,
    )
    totals = {"conversations": 0, "folded": 0, "summaries": 0, "kept": 0}
    for i, row in enumerate(candidates):
        if job is not None:
            _progress(
                job,
                "consolidating",
                5 + int(90 * i / max(1, len(candidates))),
                f"Conversation {i + 1} of {len(candidates)}",
            )
        conversation_id = row["conversation_id"]
        while True:
            old = graph.read(
                cypher.OLD_MESSAGES,
                project_id=project_id,
                conversation_id=conversation_id,
                cutoff=cutoff_text,
                limit=settings.MEMORY_SUMMARY_MAX_MESSAGES,
            )
            if not old:
                break
            pending = [m["id"] for m in old if not m["processed"]]
            if pending:
                memories_derive(project_id=project_id, memory_ids=pending)
            text, mode = extraction.summarize(
                [extraction.Message(m["id"], m["role"], m["text"], m["timestamp"]) for m in old]
            )
            written = graph.write(
                cypher.CONSOLIDATE_WRITE,
                project_id=project_id,
                conversation_id=conversation_id,
                memory_ids=[m["id"] for m in old],
                id=str(uuid.uuid4()),
                text=text,
                embedding=get_embedder().embed_one(text),
                first_seq=old[0]["seq"],
                last_seq=old[-1]["seq"],
                mode=mode,
                created_at=now_iso(),
                covers_from=old[0]["timestamp"],
                covers_to=old[-1]["timestamp"],
            )
            if not written:  # changed meanwhile (a message deleted): read again
                continue
            totals["folded"] += written[0]["folded"]
            totals["kept"] += written[0]["kept"]
            totals["summaries"] += 1
        totals["conversations"] += 1
    return totals


def _consolidate_submit(project_id: str, scope: dict[str, Any], older_than_days: int) -> str:
    job = job_submit(
        project_id=project_id,
        kind="memory_consolidate",
        task="memory.tasks.memory_consolidate",
        queue=settings.MEMORY_QUEUE,
        inputs={"scope": scope, "older_than_days": older_than_days},
    )
    return job.id


def memories_consolidate_queue(*, project_id: str, scope: Scope, older_than_days: int) -> str:
    _prepare(project_id, scope)
    broker_ensure()
    return _consolidate_submit(project_id, scope.given(), older_than_days)


def memories_consolidate_schedule() -> list[str]:
    """Queue a project-wide consolidation job for every project (the periodic run)."""
    days = settings.MEMORY_CONSOLIDATE_AFTER_DAYS
    return [_consolidate_submit(pid, {}, days) for pid in Project.objects.values_list("id", flat=True)]


def memories_consolidate_run(*, job: Job) -> JobOutcome:
    scope = Scope(**job.inputs.get("scope", {}))
    totals = memories_consolidate(
        project_id=job.project_id,
        scope=scope if not scope.empty else None,
        older_than_days=int(job.inputs.get("older_than_days", settings.MEMORY_CONSOLIDATE_AFTER_DAYS)),
        job=job,
    )
    return JobOutcome(
        counts=dict(totals),
        summary=f"Folded {totals['folded']} message(s) into {totals['summaries']} summary(ies)",
    )


# --- delete and forget --------------------------------------------------------------------------------


def memory_delete(*, project_id: str, memory_id: str, requested_by: str = "") -> dict[str, int]:
    """Delete one memory and what holds its words: facts and preferences drawn only from it, and
    summaries whose span covers it (the span is summarised again later)."""
    started = time.perf_counter()
    rows = graph.write(cypher.DELETE_ONE, project_id=project_id, id=memory_id)
    if not rows:
        raise NotFound("no such memory in this project")
    erased = {"memories": 1, "derived": int(rows[0]["derived"]), "summaries": int(rows[0]["summaries"])}
    MemoryErasure.objects.create(
        project_id=project_id,
        kind=MemoryErasure.Kind.DELETE,
        scope={"memory_id": memory_id},
        counts=erased,
        requested_by=requested_by[:200],
        took_ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return erased


def memories_forget(*, project_id: str, scope: Scope, requested_by: str = "") -> ForgetResult:
    """Erase every memory of the scope and everything derived from it: summaries, facts,
    preferences, the user's profile (when the scope names a user), mention links and embeddings.
    Other scopes are untouched. The audit record keeps the scope and the counts, never text. It
    needs no embeddings, so it works whichever embedder the project's vectors come from."""
    _prepare(project_id, scope, embeds=False)
    started = time.perf_counter()
    batch = settings.MEMORY_FORGET_BATCH
    erased: dict[str, int] = defaultdict(int)
    names = {
        "Memory": "memories",
        "ConversationSummary": "summaries",
        "Fact": "facts",
        "Preference": "preferences",
    }
    for label, name in names.items():
        query = cypher.FORGET_BATCH.format(label=label, scope=scope.where("n"))
        while True:
            row = graph.write(query, project_id=project_id, batch=batch, **scope.params())[0]
            erased[name] += int(row["deleted"])
            erased["derived"] += int(row["derived"])
            # facts, preferences and summaries drawn from what this batch erased count as what they are
            for kind in ("facts", "preferences", "summaries"):
                erased[kind] += int(row[kind])
            if row["deleted"] < batch:
                break
    row = graph.write(
        cypher.FORGET_CONVERSATIONS.format(scope=scope.where("c")), project_id=project_id, **scope.params()
    )[0]
    erased["conversations"] += int(row["deleted"])
    erased["stragglers"] += int(row["stragglers"] or 0)
    row = graph.write(cypher.FORGET_PROFILES, project_id=project_id, **scope.params())[0]
    erased["profiles"] += int(row["deleted"])
    took_ms = round((time.perf_counter() - started) * 1000, 1)
    audit = MemoryErasure.objects.create(
        project_id=project_id,
        kind=MemoryErasure.Kind.FORGET,
        scope=scope.given(),
        counts=dict(erased),
        requested_by=requested_by[:200],
        took_ms=took_ms,
    )
    return ForgetResult(erased=dict(erased), audit_id=audit.pk, took_ms=took_ms)


# --- export and import (portability/) ----------------------------------------------------------------


def _moved_scope_tokens(props: dict[str, Any], source_project_id: str, project_id: str) -> dict[str, Any]:
    """A node's `scope_tokens` start with its project's token: a node moved to another project
    carries that project's, so the fulltext scope filters find it there."""
    tokens = props.get("scope_tokens")
    if isinstance(tokens, str):
        old, new = token("project_id", source_project_id), token("project_id", project_id)
        props["scope_tokens"] = " ".join(new if part == old else part for part in tokens.split())
    return props


def _import_finished(project_id: str) -> None:
    """After an import: the memory indexes exist (they are shared by every project)."""
    ensure_memory_indexes()


GRAPH = GraphOwner(
    app="memory",
    labels=module_labels(memory_nodes),
    rewrite=_moved_scope_tokens,
    after_import=_import_finished,
)
