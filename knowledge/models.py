"""SQL side of ingestion: the batches a job is split into (each one Celery task, safe to re-run)."""

from __future__ import annotations

from django.db import models

from core.models import Job


class IngestBatch(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="ingest_batches")
    index = models.PositiveIntegerField()
    document_ids = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    counts = models.JSONField(default=dict, blank=True)
    token_usage = models.JSONField(default=dict, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="unique_batch_per_job")]

    def __str__(self) -> str:
        return f"batch {self.index} of {self.job_id} ({self.status})"
