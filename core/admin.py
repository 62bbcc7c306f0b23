from django.contrib import admin, messages
from django.http import HttpRequest

from core.errors import Conflict
from core.jobs import job_rerun
from core.models import ApiKey, Job, Project
from core.services import api_key_revoke


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = ("name", "prefix", "scopes", "rate_limit", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("name", "prefix", "scopes", "created_at", "last_used_at")
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # keys are issued with `manage.py create_api_key` (the secret is shown once)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display: tuple[str, ...] = ("name", "id", "embedder", "embedding_dimensions", "created_at")
    search_fields = ("name", "id")
    readonly_fields: tuple[str, ...] = ("id", "embedder", "embedding_dimensions", "created_at")
    inlines = [ApiKeyInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # created through the API or `manage.py create_project` (graph node too)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "project", "scopes", "created_at", "last_used_at", "revoked_at")
    list_filter = ("project",)
    search_fields = ("name", "prefix", "project__name")
    readonly_fields = ("prefix", "project", "created_at", "last_used_at", "revoked_at")
    fields = ("name", "project", "prefix", "scopes", "rate_limit", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: object) -> None:
        count = 0
        for key in queryset:  # type: ignore[attr-defined]
            api_key_revoke(key_id=key.pk)
            count += 1
        self.message_user(request, f"revoked {count} key(s)", messages.SUCCESS)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Background jobs, read-only; a failed one can be run again with the inputs it was given."""

    list_display = ("kind", "status", "phase", "progress_pct", "project", "created_at", "finished_at")
    list_filter = ("status", "kind", "project")
    search_fields = ("id", "kind", "project__name")
    readonly_fields = (
        "id",
        "project",
        "kind",
        "task",
        "queue",
        "inputs",
        "status",
        "phase",
        "progress_pct",
        "counts",
        "errors",
        "token_usage",
        "timings",
        "created_at",
        "started_at",
        "finished_at",
    )
    actions = ["rerun"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Re-run selected failed jobs")
    def rerun(self, request: HttpRequest, queryset: object) -> None:
        queued, refused = 0, []
        for job in queryset:  # type: ignore[attr-defined]
            try:
                job_rerun(job_id=job.pk)
                queued += 1
            except Conflict as exc:
                refused.append(f"{job.kind} {job.pk}: {exc.message}")
        if queued:
            self.message_user(request, f"queued {queued} job(s) again", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, reason, messages.WARNING)
