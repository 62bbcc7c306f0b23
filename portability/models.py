"""SQL model of scheduled backups: one schedule per project. The archives themselves live in Django's
"backups" storage (BACKUP_STORAGE_BACKEND), under `<project id>/`; each run is an export job of kind
"backup" (core.models.Job)."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.models import Job, Project


class BackupSchedule(models.Model):
    """Back the project up every `every_hours`, keeping its newest `keep` archives. Celery beat looks
    for schedules that are due every BACKUP_CHECK_EVERY_SEC (portability.tasks.backups_due)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="backup_schedule")
    enabled = models.BooleanField(default=True, help_text="backed up by Celery beat on this schedule")
    every_hours = models.PositiveIntegerField(
        default=24,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 366)],
        help_text="hours between two backups (24: daily)",
    )
    keep = models.PositiveIntegerField(
        default=7,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="newest archives kept; older ones are deleted after each successful backup",
    )
    next_run_at = models.DateTimeField(
        null=True, blank=True, help_text="when the next backup is due (empty: at the next check)"
    )
    last_job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project__name"]

    def __str__(self) -> str:
        return f"backups of {self.project} every {self.every_hours} h, keep {self.keep}"
