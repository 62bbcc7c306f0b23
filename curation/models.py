"""SQL models of curation: retention policies and their runs, erasure requests and the
audit log of every curator action and policy run. None of them ever holds erased or anonymised
text: only identifiers, settings and counts."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.models import Project


def _uuid_str() -> str:
    return str(uuid.uuid4())


class RetentionPolicy(models.Model):
    """What to do with which data of which project (all projects when empty) once it is older than
    `age_days`. Enforced by Celery beat and on demand from the admin (with a dry-run preview)."""

    class Kind(models.TextChoices):
        MESSAGES = "messages", "conversation messages older than the age"
        EXPIRED_CONVERSATIONS = "expired_conversations", "conversations past their own expiry"
        ORPHANED_ENTITIES = "orphaned_entities", "entities without any reference for the age"
        SESSION_EVENTS = "session_events", "session events older than the age"

    class Action(models.TextChoices):
        ANONYMISE = "anonymise"
        SUMMARISE_THEN_DELETE = "summarise_then_delete", "summarise, then delete"
        DELETE = "delete"

    ACTIONS_BY_KIND: dict[Any, set[Any]] = {
        Kind.MESSAGES: {Action.ANONYMISE, Action.SUMMARISE_THEN_DELETE, Action.DELETE},
        Kind.EXPIRED_CONVERSATIONS: {Action.ANONYMISE, Action.DELETE},
        Kind.ORPHANED_ENTITIES: {Action.DELETE},
        Kind.SESSION_EVENTS: {Action.DELETE},
    }

    name = models.CharField(max_length=200)
    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="retention_policies",
        help_text="empty: every project",
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    age_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(36_500)],
        help_text="required for every kind but expired conversations (they carry their own expiry)",
    )
    action = models.CharField(max_length=32, choices=Action.choices)
    enabled = models.BooleanField(default=True, help_text="run by Celery beat on its schedule")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        verbose_name_plural = "retention policies"
        permissions = [("run_retentionpolicy", "Can preview and run retention policies")]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.kind == self.Kind.EXPIRED_CONVERSATIONS:
            if self.age_days is not None:
                errors["age_days"] = "expired conversations use their own expiry; leave the age empty"
        elif self.age_days is None:
            errors["age_days"] = "an age in days (at least 1) is required for this kind"
        allowed = self.ACTIONS_BY_KIND.get(self.kind)
        if allowed is not None and self.action and self.action not in allowed:
            names = sorted(str(a) for a in allowed)
            errors["action"] = f"{self.get_kind_display()} can only be: " + ", ".join(names)
        if errors:
            raise ValidationError(errors)


class PolicyRun(models.Model):
    """One run (or dry run) of a policy over one project. The cutoff is fixed when the run is
    created, so data written during the run is left for the next one; `cursor` records progress so
    a run re-delivered after a worker died resumes instead of starting over."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = models.CharField(primary_key=True, max_length=36, default=_uuid_str, editable=False)
    policy = models.ForeignKey(RetentionPolicy, on_delete=models.CASCADE, related_name="runs")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="policy_runs")
    dry_run = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    cutoff = models.DateTimeField(help_text="data older than this (or expired before it) is in scope")
    counts = models.JSONField(default=dict, blank=True)
    cursor = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    requested_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["policy", "status"])]

    def __str__(self) -> str:
        return f"{'preview' if self.dry_run else 'run'} of {self.policy} ({self.status})"


class ErasureRequest(models.Model):
    """Erase everything of one user of one project. Holds the user id (the subject of the request)
    and counts, never the erased content."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        NOTHING_TO_ERASE = "nothing_to_erase", "nothing to erase"
        FAILED = "failed"

    id = models.CharField(primary_key=True, max_length=36, default=_uuid_str, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="erasure_requests")
    user_id = models.CharField(max_length=256)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    counts = models.JSONField(default=dict, blank=True)
    requested_by = models.CharField(max_length=200, blank=True, default="")
    took_ms = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("run_erasurerequest", "Can run erasure requests")]

    def __str__(self) -> str:
        return f"erasure of user {self.user_id!r} in {self.project_id} ({self.status})"


class AuditEntry(models.Model):
    """Who did what to which data, when, with what counts. Written by the platform only."""

    class Action(models.TextChoices):
        PRIVACY_SET = "privacy_set", "privacy settings changed"
        POLICY_PREVIEW = "policy_preview", "retention policy previewed"
        POLICY_RUN = "policy_run", "retention policy run"
        ERASURE = "erasure", "erasure request"
        ANONYMISE = "anonymise", "content anonymised"
        POLICY_CHANGED = "policy_changed", "retention policy changed"

    project = models.ForeignKey(
        Project, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_entries"
    )
    actor = models.CharField(max_length=200, help_text="user:<name>, api_key:<prefix> or celery-beat")
    action = models.CharField(max_length=32, choices=Action.choices)
    target_kind = models.CharField(max_length=40, blank=True, default="")
    target_id = models.CharField(max_length=256, blank=True, default="")
    counts = models.JSONField(default=dict, blank=True)
    details = models.JSONField(default=dict, blank=True, help_text="settings and ids, never content")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["project", "action", "created_at"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.target_kind}"


class GraphContent(models.Model):
    """No table: the holder of the permissions of the graph content pages of the admin."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("browse_graph", "Can browse graph content (documents, conversations, memories, …)"),
            ("change_privacy", "Can change the privacy settings of conversations"),
            ("anonymise_content", "Can anonymise a conversation or a document now"),
        ]

    def __str__(self) -> str:
        return "graph content"
