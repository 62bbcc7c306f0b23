"""Backup schedules in the admin: one per project (how often, how many kept), its last backup job and
the archives stored for it, and "Back up now"."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.errors import PlatformError
from portability import backups
from portability.models import BackupSchedule


@admin.register(BackupSchedule)
class BackupScheduleAdmin(admin.ModelAdmin):
    list_display = ("project", "enabled", "every_hours", "keep", "next_run_at", "last_backup")
    list_filter = ("enabled",)
    search_fields = ("project__name", "project__id")
    readonly_fields = ("last_backup", "stored_backups", "created_at")
    actions = ["back_up_now"]

    @admin.display(description="last backup")
    def last_backup(self, obj: BackupSchedule) -> str:
        job = obj.last_job
        if job is None:
            return "-"
        url = reverse("admin:core_job_change", args=[job.pk])
        when = job.finished_at or job.created_at
        return format_html('<a href="{}">{}</a> ({} UTC)', url, job.status, f"{when:%Y-%m-%d %H:%M}")

    @admin.display(description="stored backups (newest first)")
    def stored_backups(self, obj: BackupSchedule) -> str:
        if obj.pk is None:
            return "-"
        try:
            found = backups.backups_list(project_id=obj.project_id)
        except Exception as exc:  # noqa: BLE001 - a storage that is down is shown, not raised
            return f"the backups storage did not answer: {exc}"
        if not found:
            return "none yet"
        rows = (
            (b.name, f"{b.taken_at:%Y-%m-%d %H:%M:%S} UTC", f"{b.size / 1024**2:.1f} MiB")
            for b in reversed(found)
        )
        return format_html(
            "<ul>{}</ul><p>Restore one with <code>python manage.py backup_restore NAME</code>.</p>",
            format_html_join("", "<li><code>{}</code> {}, {}</li>", rows),
        )

    @admin.action(description="Back up now", permissions=["change"])
    def back_up_now(self, request: HttpRequest, queryset: QuerySet[BackupSchedule]) -> None:
        for schedule in queryset:
            try:
                job = backups.backup_submit(schedule=schedule)
            except PlatformError as exc:
                self.message_user(request, f"{schedule.project}: {exc.message}", messages.WARNING)
                continue
            self.message_user(request, f"{schedule.project}: backup job {job.pk} queued", messages.SUCCESS)

    def get_queryset(self, request: HttpRequest) -> QuerySet[BackupSchedule]:
        return super().get_queryset(request).select_related("project", "last_job")
