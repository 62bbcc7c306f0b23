"""Writes of curation: privacy settings, retention runs, anonymisation, erasure requests,
and the audit entry every one of them leaves. Reads are in curation.selectors."""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from core.errors import InvalidInput, NotFound
from core.graph.schema import ensure_schema
from core.jobs import broker_ensure, job_enqueue
from core.models import ACCESSIBILITY, Project
from core.progress.events import ProgressEvent, publish
from core.text.pii import PLACEHOLDERS, anonymise
from curation.models import AuditEntry, ErasureRequest, PolicyRun, RetentionPolicy
from knowledge import retention as knowledge_retention
from knowledge.dto import DocumentInput
from knowledge.selectors import document_source
from knowledge.services import document_delete, document_redact, documents_submit
from memory import retention as memory_retention
from memory.retention import MessageRewrite, MessageText, PrivacyChange
from memory.scope import Scope
from memory.services import TIMESTAMP_FORMAT, memories_consolidate, memories_forget
from sessions_graph.services import user_erase

logger = logging.getLogger(__name__)

UNSET: Any = object()


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(TIMESTAMP_FORMAT)


def audit_record(
    *,
    actor: str,
    action: Any,  # an AuditEntry.Action
    project_id: str | None = None,
    target_kind: str = "",
    target_id: str = "",
    counts: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEntry:
    return AuditEntry.objects.create(
        project_id=project_id,
        actor=actor[:200] or "unknown",
        action=action,
        target_kind=target_kind,
        target_id=target_id[:256],
        counts=counts or {},
        details=details or {},
    )


# --- privacy -------------------------------------------------------------------------------------------


def conversation_privacy_set(
    *,
    project_id: str,
    conversation_id: str,
    actor: str,
    retention_days: int | None = UNSET,
    anonymize: bool | None = None,
    accessibility: str | None = None,
    expires_at: datetime | None = UNSET,
) -> dict[str, Any]:
    """Change a conversation's privacy settings (seed 003). `retention_days` None keeps it for good;
    `expires_at` fixes a date (None goes back to the retention). Audited."""
    if retention_days is not UNSET and retention_days is not None and not 1 <= retention_days <= 36_500:
        raise InvalidInput("retention_days must be between 1 and 36500", details={"field": "retention_days"})
    if accessibility is not None and accessibility not in ACCESSIBILITY:
        raise InvalidInput(
            f"accessibility must be one of {', '.join(ACCESSIBILITY)}", details={"field": "accessibility"}
        )
    ensure_schema()
    conversation = memory_retention.conversation_privacy_set(
        project_id=project_id,
        conversation_id=conversation_id,
        change=PrivacyChange(
            set_retention=retention_days is not UNSET,
            retention_days=None if retention_days is UNSET else retention_days,
            anonymize=anonymize,
            accessibility=accessibility,
            set_expires=expires_at is not UNSET,
            expires_at=None if expires_at is UNSET or expires_at is None else _iso(expires_at),
        ),
    )
    if conversation is None:
        raise NotFound("no such conversation in this project")
    changed = {
        "retention_days": None if retention_days is UNSET else retention_days,
        "anonymize": anonymize,
        "accessibility": accessibility,
        "expires_at": None if expires_at is UNSET or expires_at is None else _iso(expires_at),
    }
    audit_record(
        actor=actor,
        action=AuditEntry.Action.PRIVACY_SET,
        project_id=project_id,
        target_kind="conversation",
        target_id=conversation_id,
        details={"set": {k: v for k, v in changed.items() if v is not None}},
    )
    return conversation


PROJECT_PRIVACY_FIELDS = (
    "default_accessibility",
    "default_retention_days",
    "default_anonymize",
    "redact_pii_at_ingest",
)


def project_privacy_get(*, project_id: str) -> dict[str, Any]:
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound("no such project")
    return {"project_id": project.pk, **{f: getattr(project, f) for f in PROJECT_PRIVACY_FIELDS}}


def project_privacy_set(*, project_id: str, actor: str, **changes: Any) -> dict[str, Any]:
    """Project defaults for new conversations (existing ones keep theirs) and redaction at ingest."""
    unknown = set(changes) - set(PROJECT_PRIVACY_FIELDS)
    if unknown:
        raise InvalidInput(f"unknown setting(s): {', '.join(sorted(unknown))}")
    if "default_accessibility" in changes and changes["default_accessibility"] not in ACCESSIBILITY:
        raise InvalidInput("default_accessibility must be private, shared or public")
    with transaction.atomic():
        updated = Project.objects.filter(pk=project_id).update(**changes)
        if not updated:
            raise NotFound("no such project")
        audit_record(
            actor=actor,
            action=AuditEntry.Action.PRIVACY_SET,
            project_id=project_id,
            target_kind="project",
            target_id=project_id,
            details={"set": changes},
        )
    return project_privacy_get(project_id=project_id)


# --- anonymisation ------------------------------------------------------------------------------------------


def _anonymise_rows(project_id: str, rows: list[MessageText], known: Iterable[str] = ()) -> Counter[str]:
    """Anonymise a batch of messages: text and author replaced (the memory app re-embeds them and
    removes what was drawn from the originals: facts, preferences, covering summaries, mentions)."""
    if not rows:
        return Counter()
    names = {*known, *(r.author_name for r in rows if r.author_name)}
    for row in rows:  # a name found by cue in one message is replaced in every message of the batch
        names |= anonymise(row.text, known_names=names, phone_region=settings.PII_PHONE_REGION).names
    counts: Counter[str] = Counter()
    rewrites = []
    for row in rows:
        result = anonymise(row.text, known_names=names, phone_region=settings.PII_PHONE_REGION)
        counts.update(result.counts)
        author = PLACEHOLDERS["person"] if row.author_name else None
        rewrites.append(
            MessageRewrite(
                id=row.id, text=result.text, author_name=author, role=row.role, timestamp=row.timestamp
            )
        )
    counts += memory_retention.messages_anonymised_write(project_id=project_id, rewrites=rewrites)
    return counts


def conversation_anonymise(*, project_id: str, conversation_id: str) -> Counter[str]:
    known = memory_retention.conversation_author_names(project_id=project_id, conversation_id=conversation_id)
    counts: Counter[str] = Counter()
    while True:
        rows = memory_retention.conversation_plain_messages(
            project_id=project_id, conversation_id=conversation_id, batch=settings.RETENTION_BATCH
        )
        if not rows:
            break
        counts += _anonymise_rows(project_id, rows, known)
    counts["summaries"] += memory_retention.conversation_anonymised_mark(
        project_id=project_id, conversation_id=conversation_id
    )
    counts["conversations"] += 1
    return counts


def conversation_anonymise_now(*, project_id: str, conversation_id: str, actor: str) -> dict[str, int]:
    """A curator anonymises one conversation at once (the admin's button). Audited."""
    if (
        memory_retention.conversation_privacy_get(project_id=project_id, conversation_id=conversation_id)
        is None
    ):
        raise NotFound("no such conversation in this project")
    counts = dict(conversation_anonymise(project_id=project_id, conversation_id=conversation_id))
    audit_record(
        actor=actor,
        action=AuditEntry.Action.ANONYMISE,
        project_id=project_id,
        target_kind="conversation",
        target_id=conversation_id,
        counts=counts,
    )
    return counts


def document_anonymise(*, project_id: str, document_id: str, actor: str) -> dict[str, Any]:
    """Anonymise a stored document: its title, text and author get placeholders and it is ingested
    again from that text, so chunks, embeddings, entities and relations are re-derived from the
    anonymised text and what only the original supported goes (the ingestion's replacement). A
    document without a source path gets a new id; the original is deleted at once."""
    doc = document_source(project_id=project_id, document_id=document_id)
    redacted = document_redact(
        DocumentInput(
            title=doc["title"] or "untitled",
            text=doc["content"] or "",
            source_path=doc["source_path"],
            mime_type=doc["mime_type"] or "text/plain",
            author=doc["author"],
            metadata=doc["metadata"],
        )
    )
    if not redacted.text.strip():
        raise InvalidInput("the document has no text to anonymise")
    # the ingestion task is queued when this block commits, so the original (and what only it
    # supported) is gone before the anonymised copy is resolved against the project's entities
    with transaction.atomic():
        submitted = documents_submit(project_id=project_id, documents=[redacted])
        new_id = submitted.documents[0].document_id
        if new_id != document_id:
            document_delete(project_id=project_id, document_id=document_id)
    result = {"document_id": new_id, "replaced": document_id, "job_id": submitted.job_id}
    audit_record(
        actor=actor,
        action=AuditEntry.Action.ANONYMISE,
        project_id=project_id,
        target_kind="document",
        target_id=document_id,
        details=result,
    )
    return result


# --- retention ----------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One batch of a run: what it did, where the next one starts, whether the run is over."""

    counts: Counter[str]
    cursor: dict[str, Any]
    done: bool


def _cutoff(policy: RetentionPolicy, now: datetime) -> datetime:
    return now if policy.age_days is None else now - timedelta(days=policy.age_days)


def _preview(policy: RetentionPolicy, project_id: str, cutoff: datetime) -> dict[str, Any]:
    kind, action = policy.kind, policy.action
    if kind == RetentionPolicy.Kind.MESSAGES:
        messages, conversations = memory_retention.messages_before_count(
            project_id=project_id, cutoff=_iso(cutoff), only_plain=action == RetentionPolicy.Action.ANONYMISE
        )
        verb = {
            "anonymise": "anonymise",
            "delete": "delete",
            "summarise_then_delete": "summarise, then delete",
        }
        return {
            "messages": messages,
            "conversations": conversations,
            "summary": f"this will {verb[action]} {messages} messages in {conversations} conversations",
        }
    if kind == RetentionPolicy.Kind.EXPIRED_CONVERSATIONS:
        by = memory_retention.conversations_expired_count(
            project_id=project_id,
            cutoff=cutoff.astimezone(UTC).isoformat(),
            force_anonymise=action == RetentionPolicy.Action.ANONYMISE,
        )
        parts = [
            f"{'anonymise' if a == 'anonymise' else 'delete'} {by[a]['messages']} messages in "
            f"{by[a]['conversations']} conversations"
            for a in ("delete", "anonymise")
            if a in by
        ]
        return {
            "conversations": sum(r["conversations"] for r in by.values()),
            "messages": sum(r["messages"] for r in by.values()),
            "to_anonymise": by.get("anonymise", {}).get("conversations", 0),
            "to_delete": by.get("delete", {}).get("conversations", 0),
            "summary": "this will " + " and ".join(parts) if parts else "nothing has expired",
        }
    orphans = knowledge_retention.entities_orphaned_count(project_id=project_id, cutoff=_iso(cutoff))
    return {
        "entities": orphans.prunable,
        "newly_orphaned": orphans.unstamped,
        "summary": f"this will delete {orphans.prunable} orphaned entities"
        + (f" (and start the clock on {orphans.unstamped} newly orphaned ones)" if orphans.unstamped else ""),
    }


def _messages_step(run: PolicyRun, action: str) -> Step:
    project_id, cutoff, batch = run.project_id, _iso(run.cutoff), settings.RETENTION_BATCH
    if action == RetentionPolicy.Action.ANONYMISE:
        rows = memory_retention.messages_before_plain_page(
            project_id=project_id,
            cutoff=cutoff,
            after_ts=run.cursor.get("after_ts", ""),
            after_id=run.cursor.get("after_id", ""),
            batch=batch,
        )
        counts = _anonymise_rows(project_id, rows)
        cursor = {"after_ts": rows[-1].timestamp, "after_id": rows[-1].id} if rows else run.cursor
        return Step(counts, cursor, len(rows) < batch)
    if action == RetentionPolicy.Action.DELETE:
        removed, more = memory_retention.messages_before_delete(
            project_id=project_id, cutoff=cutoff, batch=batch
        )
        return Step(removed, run.cursor, not more)
    # summarise, then delete: the memory app's consolidation (what the messages supported stays)
    totals = memories_consolidate(project_id=project_id, scope=None, older_than_days=0, cutoff=run.cutoff)
    return Step(
        Counter({"messages": totals["folded"], "summaries": totals["summaries"], "kept": totals["kept"]}),
        run.cursor,
        True,
    )


def _expired_step(run: PolicyRun, action: str) -> Step:
    page = memory_retention.conversations_expired_page(
        project_id=run.project_id,
        cutoff=run.cutoff.astimezone(UTC).isoformat(),
        after_id=run.cursor.get("after_id", ""),
        batch=10,
    )
    counts: Counter[str] = Counter()
    for conversation_id, asks_anonymisation in page:
        if action == RetentionPolicy.Action.ANONYMISE or asks_anonymisation:
            done = conversation_anonymise(project_id=run.project_id, conversation_id=conversation_id)
            counts["anonymised_conversations"] += 1
        else:
            done = memory_retention.conversation_delete(
                project_id=run.project_id, conversation_id=conversation_id
            )
            counts["deleted_conversations"] += 1
        done.pop("conversations", None)
        counts += done
    cursor = {"after_id": page[-1][0]} if page else run.cursor
    return Step(counts, cursor, len(page) < 10)


def _entities_step(run: PolicyRun, action: str) -> Step:
    project_id, batch = run.project_id, settings.RETENTION_BATCH
    counts: Counter[str] = Counter()
    if not run.cursor.get("stamped"):
        unstamped, stamped = knowledge_retention.entities_orphans_stamp(
            project_id=project_id, now=_iso(datetime.now(UTC)), batch=batch
        )
        counts["unstamped"] += unstamped
        counts["newly_orphaned"] += stamped
        return Step(counts, {"stamped": True}, False)
    deleted = knowledge_retention.entities_orphans_prune(
        project_id=project_id, cutoff=_iso(run.cutoff), batch=batch
    )
    counts["entities"] += deleted
    return Step(counts, run.cursor, deleted < batch)


_STEPS: dict[Any, Callable[[PolicyRun, str], Step]] = {
    RetentionPolicy.Kind.MESSAGES: _messages_step,
    RetentionPolicy.Kind.EXPIRED_CONVERSATIONS: _expired_step,
    RetentionPolicy.Kind.ORPHANED_ENTITIES: _entities_step,
}


def _projects_of(policy: RetentionPolicy) -> list[str]:
    if policy.project_id:
        return [policy.project_id]
    return list(Project.objects.values_list("id", flat=True))


def policy_preview(*, policy_id: int, project_id: str | None = None, actor: str) -> list[dict[str, Any]]:
    """Dry run: what the policy would do now in each of its projects (nothing is written but the
    audit entry)."""
    policy = RetentionPolicy.objects.get(pk=policy_id)
    ensure_schema()
    now = datetime.now(UTC)
    previews = []
    for pid in [project_id] if project_id else _projects_of(policy):
        preview = _preview(policy, pid, _cutoff(policy, now))
        previews.append({"project_id": pid, **preview})
        audit_record(
            actor=actor,
            action=AuditEntry.Action.POLICY_PREVIEW,
            project_id=pid,
            target_kind="retention_policy",
            target_id=str(policy.pk),
            counts={k: v for k, v in preview.items() if isinstance(v, int)},
            details={"summary": preview["summary"], "kind": policy.kind, "action": policy.action},
        )
    return previews


def policy_runs_create(*, policy_id: int, actor: str, project_id: str | None = None) -> list[str]:
    """A run per project of the policy (or the one given), its cutoff fixed now. Returns the run ids."""
    policy = RetentionPolicy.objects.get(pk=policy_id)
    now = datetime.now(UTC)
    runs = [
        PolicyRun.objects.create(
            policy=policy, project_id=pid, cutoff=_cutoff(policy, now), requested_by=actor[:200]
        )
        for pid in ([project_id] if project_id else _projects_of(policy))
    ]
    return [run.id for run in runs]


def policy_runs_queue(*, policy_id: int, actor: str) -> list[str]:
    """A run per project of the policy, queued on Celery after commit. Returns the run ids."""
    with transaction.atomic():
        ids = policy_runs_create(policy_id=policy_id, actor=actor)
        for run_id in ids:
            job_enqueue(task="curation.tasks.retention_run", args=(run_id,), queue=settings.RETENTION_QUEUE)
    return ids


def retention_enforce_all() -> list[str]:
    """Celery beat: queue a run of every enabled policy for each of its projects."""
    ids: list[str] = []
    for policy in RetentionPolicy.objects.filter(enabled=True):
        ids += policy_runs_queue(policy_id=policy.pk, actor="celery-beat")
    return ids


def _run_progress(run: PolicyRun, phase: str, pct: int, summary: str) -> None:
    publish(
        ProgressEvent(
            message_type="curation_progress",
            project_id=run.project_id,
            job_id=run.id,
            phase=phase,
            progress_pct=pct,
            thought_summary=summary,
        )
    )


def policy_run_execute(*, run_id: str) -> PolicyRun:
    """Run (or resume) one policy run. Each batch is committed to Neo4j and then recorded with its
    cursor, so a run re-delivered after its worker died goes on from its last batch; a finished run
    is never run again, and only a finished run writes its audit entry."""
    run = PolicyRun.objects.select_related("policy").get(pk=run_id)
    if run.status in (PolicyRun.Status.SUCCEEDED, PolicyRun.Status.FAILED):
        return run
    PolicyRun.objects.filter(pk=run.pk).update(
        status=PolicyRun.Status.RUNNING,
        started_at=run.started_at or datetime.now(UTC),
        attempts=run.attempts + 1,
    )
    ensure_schema()
    policy = run.policy
    step_of = _STEPS[policy.kind]
    started = time.perf_counter()
    counts: Counter[str] = Counter(run.counts)
    _run_progress(run, "running", 1, f"{policy.name}: started")
    batches = 0
    while True:
        step = step_of(run, policy.action)
        counts += step.counts
        batches += 1
        run.cursor = step.cursor
        run.counts = dict(counts)
        PolicyRun.objects.filter(pk=run.pk).update(counts=run.counts, cursor=run.cursor)
        if step.done:
            break
        if batches % 10 == 0:
            _run_progress(run, "running", 50, f"{policy.name}: {dict(counts)}")
    took_ms = round((time.perf_counter() - started) * 1000, 1)
    with transaction.atomic():
        updated = PolicyRun.objects.filter(pk=run.pk, status=PolicyRun.Status.RUNNING).update(
            status=PolicyRun.Status.SUCCEEDED, finished_at=datetime.now(UTC)
        )
        if updated:
            audit_record(
                actor=run.requested_by or "celery-beat",
                action=AuditEntry.Action.POLICY_RUN,
                project_id=run.project_id,
                target_kind="retention_policy",
                target_id=str(policy.pk),
                counts=dict(counts),
                details={"run_id": run.id, "kind": policy.kind, "action": policy.action, "took_ms": took_ms},
            )
    _run_progress(run, "done", 100, f"{policy.name}: {dict(counts)}")
    run.refresh_from_db()
    return run


def policy_run_fail(*, run_id: str, error: str) -> None:
    PolicyRun.objects.filter(pk=run_id).exclude(status=PolicyRun.Status.SUCCEEDED).update(
        status=PolicyRun.Status.FAILED, error=error[:2000], finished_at=datetime.now(UTC)
    )


# --- erasure ----------------------------------------------------------------------------------------------


def erasure_request_create(*, project_id: str, user_id: str, actor: str) -> ErasureRequest:
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > 256 or "\x00" in user_id:
        raise InvalidInput(
            "user_id must be a non-blank string of at most 256 characters", details={"field": "user_id"}
        )
    if not Project.objects.filter(pk=project_id).exists():
        raise NotFound("no such project")
    broker_ensure()  # the erasure task is queued after the commit
    with transaction.atomic():
        request = ErasureRequest.objects.create(
            project_id=project_id, user_id=user_id, requested_by=actor[:200]
        )
        job_enqueue(task="curation.tasks.erasure_run", args=(request.id,), queue=settings.RETENTION_QUEUE)
    return request


def erasure_execute(*, request_id: str) -> ErasureRequest:
    """Erase everything of the user in the project: memories, conversations, summaries, facts,
    preferences, profile, mentions and embeddings (the memory app's forget), then sessions with their
    events, tool calls and state. Safe to re-run: what is gone is not found again."""
    request = ErasureRequest.objects.get(pk=request_id)
    if request.status in (ErasureRequest.Status.SUCCEEDED, ErasureRequest.Status.NOTHING_TO_ERASE):
        return request
    ErasureRequest.objects.filter(pk=request.pk).update(status=ErasureRequest.Status.RUNNING)
    started = time.perf_counter()
    project_id, user_id = request.project_id, request.user_id
    forgotten = memories_forget(
        project_id=project_id, scope=Scope(user_id=user_id), requested_by=f"erasure:{request.id}"
    )
    counts: dict[str, int] = defaultdict(int)
    counts.update({k: int(v) for k, v in forgotten.erased.items()})
    for key, n in user_erase(project_id=project_id, user_id=user_id, batch=settings.RETENTION_BATCH).items():
        counts[key] += n
    counts = {k: v for k, v in counts.items() if v}
    took_ms = round((time.perf_counter() - started) * 1000, 1)
    status = ErasureRequest.Status.SUCCEEDED if counts else ErasureRequest.Status.NOTHING_TO_ERASE
    with transaction.atomic():
        ErasureRequest.objects.filter(pk=request.pk).update(
            status=status, counts=counts, took_ms=took_ms, finished_at=datetime.now(UTC)
        )
        audit_record(
            actor=request.requested_by,
            action=AuditEntry.Action.ERASURE,
            project_id=project_id,
            target_kind="user",
            target_id=user_id,
            counts=counts,
            details={"request_id": request.id, "result": status, "took_ms": took_ms},
        )
    request.refresh_from_db()
    return request


def erasure_fail(*, request_id: str) -> None:
    ErasureRequest.objects.filter(pk=request_id).exclude(
        status__in=[ErasureRequest.Status.SUCCEEDED, ErasureRequest.Status.NOTHING_TO_ERASE]
    ).update(status=ErasureRequest.Status.FAILED, finished_at=datetime.now(UTC))
