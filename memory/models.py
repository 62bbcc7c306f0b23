"""SQL models of the memory app: the audit trail of erasures."""

from __future__ import annotations

from django.db import models

from core.models import Project


class MemoryErasure(models.Model):
    """One forget (a scope) or delete (one memory): who asked, what scope, how much went. It never
    holds the erased text, only identifiers and counts."""

    class Kind(models.TextChoices):
        FORGET = "forget"
        DELETE = "delete"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memory_erasures")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    scope = models.JSONField(default=dict, help_text="the scope filter (or memory id) that was erased")
    counts = models.JSONField(default=dict, help_text="nodes erased, by kind")
    requested_by = models.CharField(max_length=200, blank=True, default="")
    took_ms = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["project", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.scope} ({self.created_at:%Y-%m-%d %H:%M})"
