"""SQL models of the tenancy layer: projects (mirrored as graph nodes) and their API keys."""

from __future__ import annotations

import hashlib
import secrets
import uuid

from django.conf import settings
from django.db import models

SCOPES = ("read", "write", "admin")
# A scope grants itself and everything below it.
SCOPE_IMPLIES = {"admin": {"admin", "write", "read"}, "write": {"write", "read"}, "read": {"read"}}

KEY_PREFIX_LEN = 8
ACCESSIBILITY = ("private", "shared", "public")


def default_accessibility() -> str:
    return str(settings.MEMORY_DEFAULT_ACCESSIBILITY)


def _uuid_str() -> str:
    return str(uuid.uuid4())


class Project(models.Model):
    """Tenant. Every graph node of the project carries `project_id` = this id."""

    id = models.CharField(primary_key=True, max_length=36, default=_uuid_str, editable=False)
    name = models.CharField(max_length=200)
    embedder = models.CharField(max_length=200, help_text="provider:model used for this project's vectors")
    embedding_dimensions = models.PositiveIntegerField()
    chunk_size_tokens = models.PositiveIntegerField(default=600)
    chunk_overlap_tokens = models.PositiveIntegerField(default=100)
    # Privacy defaults of new conversations (seed 003) and redaction at ingest
    default_retention_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="days a new conversation is kept after its last message; empty: kept"
    )
    default_anonymize = models.BooleanField(
        default=False, help_text="expired conversations are anonymised instead of deleted"
    )
    default_accessibility = models.CharField(
        max_length=16,
        choices=[(a, a) for a in ACCESSIBILITY],
        default=default_accessibility,
        help_text="private: only searches naming the owner see it; shared and public: any matching scope",
    )
    redact_pii_at_ingest = models.BooleanField(
        default=False, help_text="replace PII in documents and messages by placeholders before storing"
    )
    # The API key whose request created the project (its quota is API_KEY_PROJECT_QUOTA); empty for
    # projects made by staff, the admin or `manage.py create_project`.
    created_by_key = models.ForeignKey(
        "ApiKey", null=True, blank=True, editable=False, on_delete=models.SET_NULL, related_name="+"
    )
    # Bumped whenever the project's documents, chunks or links between them change: graph-mode
    # search rebuilds its cached adjacency of the project when this moved (retrieval/passage_graph.py).
    graph_version = models.PositiveBigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        # What a staff session may do through the API (core.auth.keys.HasScope); API keys use scopes.
        permissions = [
            ("api_read", "Can read every project through the API"),
            ("api_write", "Can read and write every project through the API"),
            ("api_admin", "Can administer every project through the API"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(chunk_overlap_tokens__lt=models.F("chunk_size_tokens")),
                name="chunk_overlap_below_size",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class ApiKey(models.Model):
    """A project's API key. Only a SHA-256 of the secret is stored; the prefix identifies it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=KEY_PREFIX_LEN, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list)
    rate_limit = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="Throttle rate for this key such as '100/min'; empty uses API_THROTTLE_RATE.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} (kp_{self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def has_scope(self, scope: str) -> bool:
        granted: set[str] = set()
        for own in self.scopes:
            granted |= SCOPE_IMPLIES.get(own, set())
        return scope in granted

    @staticmethod
    def hash_secret(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    @staticmethod
    def generate() -> tuple[str, str, str]:
        """A new key: (full key shown once, prefix, secret). Format kp_<prefix>_<secret>."""
        prefix = secrets.token_hex(KEY_PREFIX_LEN // 2)
        secret = secrets.token_urlsafe(32).replace("-", "x").replace("_", "y")
        return f"kp_{prefix}_{secret}", prefix, secret


class Job(models.Model):
    """A unit of background work (ingestion, community rebuild, ...) and its progress."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = models.CharField(primary_key=True, max_length=36, default=_uuid_str, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=40)
    # what runs it: the Celery task (called with the job id), its queue, and what it was asked
    task = models.CharField(max_length=200, blank=True, default="")
    queue = models.CharField(max_length=200, blank=True, default="")
    inputs = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    phase = models.CharField(max_length=40, default="queued")
    progress_pct = models.PositiveSmallIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    token_usage = models.JSONField(default=dict, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["project", "kind", "status"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"
