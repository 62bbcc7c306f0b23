"""The curators' admin: graph content pages, privacy settings, retention policies with
preview and run, erasure requests and the audit log. Every action needs its Django permission; the
admin only parses input, calls one service or selector and renders."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from core.admin import ProjectAdmin
from core.errors import PlatformError
from core.models import ACCESSIBILITY, Project
from curation import neighbourhood, selectors, services
from curation.dashboard import JOB_DAYS, project_dashboard
from curation.models import AuditEntry, ErasureRequest, GraphContent, PolicyRun, RetentionPolicy

BROWSE = "curation.browse_graph"
CHANGE_PRIVACY = "curation.change_privacy"
ANONYMISE = "curation.anonymise_content"


def actor_of(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


# --- audit log -----------------------------------------------------------------------------------------


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor", "action", "project", "target_kind", "target_id", "counts")
    list_filter = ("action", "project", "target_kind", "created_at")
    search_fields = ("actor", "target_id")
    date_hierarchy = "created_at"
    list_per_page = 50
    readonly_fields = [f.name for f in AuditEntry._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# --- graph content list pages ------------------------------------------------------------------------------

TIME_COLUMNS = {"ended_at", "timestamp", "created_at", "expires_at", "orphaned_at", "last_update_time"}


def human_cell(column: str, value: Any) -> Any:
    """A list page's cell as a curator reads it: times as `2026-03-01 10:00 UTC` (whether stored as
    ISO text, a Neo4j datetime or epoch seconds), an empty value as a dash."""
    if value is None or value == "":
        return "—"
    if column not in TIME_COLUMNS:
        return value
    try:
        if isinstance(value, int | float):
            moment = datetime.fromtimestamp(float(value), tz=UTC)
        else:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _display_rows(page: Any) -> list[dict[str, Any]]:
    """Rows of a list page: project names (linked to the dashboard) instead of ids, human cells."""
    ids = {row.get("project_id") for row in page.rows}
    names = dict(Project.objects.filter(pk__in=ids).values_list("id", "name"))
    return [
        {
            "id": row["id"],
            "project_id": row.get("project_id"),
            "project_name": names.get(row.get("project_id"), row.get("project_id")),
            "cells": [human_cell(c, row.get(c)) for c in page.kind.columns],
        }
        for row in page.rows
    ]


# --- project privacy defaults -------------------------------------------------------------------------------


class CuratedProjectAdmin(ProjectAdmin):
    """The project page, whose privacy defaults and redaction setting changes are audited, and its
    dashboard (what the project holds, its jobs, LLM tokens, last retention and backup runs)."""

    list_display = ("name", "dashboard_link", "embedder", "embedding_dimensions", "created_at", "id")
    readonly_fields = (*ProjectAdmin.readonly_fields, "dashboard_link")

    @admin.display(description="dashboard")
    def dashboard_link(self, obj: Project) -> str:
        url = reverse("admin:core_project_dashboard", args=[obj.pk])
        return format_html('<a class="dashboard-link" href="{}">Dashboard</a>', url)

    def get_urls(self) -> list[Any]:
        dashboard = path(
            "<path:object_id>/dashboard/",
            self.admin_site.admin_view(self.dashboard_view),
            name="core_project_dashboard",
        )
        return [dashboard, *super().get_urls()]

    def dashboard_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not request.user.has_perm(BROWSE):
            raise PermissionDenied
        project = Project.objects.filter(pk=object_id).first()
        if project is None:
            raise Http404("no such project")
        data = project_dashboard(project=project)
        context = {
            **self.admin_site.each_context(request),
            "title": f"{project.name}: dashboard",
            "d": data,
            "job_days": JOB_DAYS,
            "chart_width": 40 * len(data.tokens_per_day),
        }
        return render(request, "admin/curation/project_dashboard.html", context)

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        changed = {f: getattr(obj, f) for f in services.PROJECT_PRIVACY_FIELDS if f in form.changed_data}
        if changed:
            services.audit_record(
                actor=actor_of(request),
                action=AuditEntry.Action.PRIVACY_SET,
                project_id=obj.pk,
                target_kind="project",
                target_id=obj.pk,
                details={"set": changed},
            )


admin.site.unregister(Project)
admin.site.register(Project, CuratedProjectAdmin)


# --- retention ------------------------------------------------------------------------------------------


class PolicyRunInline(admin.TabularInline):
    model = PolicyRun
    extra = 0
    max_num = 0
    can_delete = False
    fields = ("created_at", "project", "status", "cutoff", "counts", "attempts", "finished_at")
    readonly_fields = fields
    ordering = ("-created_at",)
    show_change_link = True

    def get_queryset(self, request: HttpRequest) -> QuerySet[PolicyRun]:
        return super().get_queryset(request).select_related("project")


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "kind", "age_days", "action", "enabled", "updated_at")
    list_filter = ("kind", "action", "enabled", "project")
    search_fields = ("name",)
    fields = ("name", "project", "kind", "age_days", "action", "enabled")
    actions = ["preview", "run_now"]
    inlines = [PolicyRunInline]

    def has_run_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("curation.run_retentionpolicy"))

    def save_model(self, request: HttpRequest, obj: RetentionPolicy, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        services.audit_record(
            actor=actor_of(request),
            action=AuditEntry.Action.POLICY_CHANGED,
            project_id=obj.project_id,
            target_kind="retention_policy",
            target_id=str(obj.pk),
            details={
                "created": not change,
                "kind": obj.kind,
                "age_days": obj.age_days,
                "action": obj.action,
                "enabled": obj.enabled,
            },
        )

    def delete_model(self, request: HttpRequest, obj: RetentionPolicy) -> None:
        self._audit_deleted(request, [obj])
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RetentionPolicy]) -> None:
        self._audit_deleted(request, list(queryset))
        super().delete_queryset(request, queryset)

    def _audit_deleted(self, request: HttpRequest, policies: list[RetentionPolicy]) -> None:
        for policy in policies:
            services.audit_record(
                actor=actor_of(request),
                action=AuditEntry.Action.POLICY_CHANGED,
                project_id=policy.project_id,
                target_kind="retention_policy",
                target_id=str(policy.pk),
                details={"deleted": True, "name": policy.name, "kind": policy.kind, "action": policy.action},
            )

    @admin.action(
        description="Preview (dry run): what would the selected policies do now?", permissions=["run"]
    )
    def preview(self, request: HttpRequest, queryset: QuerySet[RetentionPolicy]) -> None:
        for policy in queryset:
            for preview in services.policy_preview(policy_id=policy.pk, actor=actor_of(request)):
                self.message_user(
                    request,
                    f"{policy.name} — project {preview['project_id']}: {preview['summary']}",
                    messages.INFO,
                )

    @admin.action(description="Run the selected policies now", permissions=["run"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[RetentionPolicy]) -> None:
        count = 0
        for policy in queryset:
            count += len(services.policy_runs_queue(policy_id=policy.pk, actor=actor_of(request)))
        self.message_user(
            request,
            f"queued {count} run(s); their progress and counts are under Policy runs",
            messages.SUCCESS,
        )


@admin.register(PolicyRun)
class PolicyRunAdmin(admin.ModelAdmin):
    list_display = ("created_at", "policy", "project", "status", "counts", "attempts", "finished_at")
    list_filter = ("status", "policy", "project")
    readonly_fields = [f.name for f in PolicyRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# --- erasure ------------------------------------------------------------------------------------------------


class ErasureRequestForm(forms.ModelForm):
    class Meta:
        model = ErasureRequest
        fields = ("project", "user_id")

    def clean_user_id(self) -> str:
        value = self.cleaned_data["user_id"]
        if not value.strip() or "\x00" in value:
            raise forms.ValidationError("a user id is required")
        return str(value)


@admin.register(ErasureRequest)
class ErasureRequestAdmin(admin.ModelAdmin):
    form = ErasureRequestForm
    list_display = ("created_at", "project", "user_id", "status", "counts", "requested_by", "took_ms")
    list_filter = ("status", "project")
    search_fields = ("user_id",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("curation.run_erasurerequest"))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in ErasureRequest._meta.fields] if obj else []

    def save_model(self, request: HttpRequest, obj: ErasureRequest, form: Any, change: bool) -> None:
        created = services.erasure_request_create(
            project_id=obj.project_id, user_id=obj.user_id, actor=actor_of(request)
        )
        obj.pk = created.pk
        obj.status = created.status
        obj.created_at = created.created_at


# --- graph content ---------------------------------------------------------------------------------------


class PageFilters(forms.Form):
    project = forms.ChoiceField(required=False)
    user_id = forms.CharField(required=False, max_length=256, label="User")
    date_from = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    q = forms.CharField(required=False, max_length=500, label="Search")
    cursor = forms.CharField(required=False, max_length=2000, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["project"].choices = [("", "all projects")] + [
            (p.pk, p.name) for p in Project.objects.only("id", "name")
        ]


class PrivacyForm(forms.Form):
    accessibility = forms.ChoiceField(choices=[(a, a) for a in ACCESSIBILITY])
    retention_days = forms.IntegerField(required=False, min_value=1, max_value=36_500)
    anonymize = forms.BooleanField(required=False, label="Anonymise instead of delete when expired")
    expires_at = forms.DateTimeField(
        required=False,
        label="Fixed expiry (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="empty: the retention counts from the last message",
    )


@admin.register(GraphContent)
class GraphContentAdmin(admin.ModelAdmin):
    """Pages over the graph (no SQL table): lists per kind and detail pages with neighbourhoods."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(BROWSE))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm(BROWSE))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("graph/<str:label>/<str:node_id>/", wrap(self.graph_view), name="curation_graph_view"),
            path(
                "graph/<str:label>/<str:node_id>/neighbours/",
                wrap(self.neighbours_view),
                name="curation_graph_neighbours",
            ),
            path("<str:kind>/", wrap(self.list_view), name="curation_graph_list"),
            path("<str:kind>/<str:node_id>/", wrap(self.detail_view), name="curation_graph_detail"),
            *super().get_urls(),
        ]

    def _context(self, request: HttpRequest, title: str) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            "kinds": list(selectors.KINDS),
        }

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return HttpResponseRedirect(reverse("admin:curation_graph_list", args=["conversations"]))

    def list_view(self, request: HttpRequest, kind: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        if kind not in selectors.KINDS:
            return HttpResponse("no such kind of graph content", status=404)
        form = PageFilters(request.GET or None)
        filters: dict[str, Any] = {}
        if form.is_bound and form.is_valid():
            filters = {k: v for k, v in form.cleaned_data.items() if v not in (None, "")}
        elif form.is_bound:
            return render(
                request,
                "admin/curation/graph_list.html",
                {**self._context(request, kind.capitalize()), "kind": kind, "form": form, "page": None},
                status=400,
            )
        try:
            page = selectors.graph_page(
                kind_name=kind,
                project_id=filters.get("project"),
                user_id=filters.get("user_id"),
                date_from=filters.get("date_from"),
                date_to=filters.get("date_to"),
                q=filters.get("q"),
                cursor=filters.get("cursor"),
                limit=_page_size(),
            )
        except PlatformError as exc:
            messages.error(request, exc.message)
            return HttpResponseRedirect(reverse("admin:curation_graph_list", args=[kind]))
        next_url = None
        if page.next_cursor:
            query = {k: _plain(v) for k, v in filters.items() if k != "cursor"}
            next_url = "?" + urlencode({**query, "cursor": page.next_cursor})
        return render(
            request,
            "admin/curation/graph_list.html",
            {
                **self._context(request, kind.capitalize()),
                "kind": kind,
                "form": form if form.is_bound else PageFilters(),
                "page": page,
                "columns": page.kind.columns,
                "rows": _display_rows(page),
                "next_url": next_url,
            },
        )

    def _anonymise(
        self, request: HttpRequest, kind: str, node_id: str, detail: dict[str, Any]
    ) -> HttpResponse:
        """The detail page's anonymise button: a conversation at once, a document re-ingested."""
        project_id = (detail.get("conversation") or detail.get("document") or {})["project_id"]
        if kind == "conversations":
            counts = services.conversation_anonymise_now(
                project_id=project_id, conversation_id=node_id, actor=actor_of(request)
            )
            messages.success(request, f"anonymised: {counts}")
            return HttpResponseRedirect(request.path)
        result = services.document_anonymise(
            project_id=project_id, document_id=node_id, actor=actor_of(request)
        )
        messages.success(
            request,
            f"anonymised; re-ingesting as document {result['document_id']} (job {result['job_id']})",
        )
        return HttpResponseRedirect(
            reverse("admin:curation_graph_detail", args=[kind, result["document_id"]])
        )

    def _privacy(
        self, request: HttpRequest, node_id: str, conversation: dict[str, Any], can_change: bool
    ) -> tuple[PrivacyForm, HttpResponse | None]:
        """A conversation's privacy form: saved on POST (then a redirect), else filled from the node."""
        if request.method != "POST":
            initial = {
                "accessibility": conversation.get("accessibility") or "shared",
                "retention_days": conversation.get("retention_days"),
                "anonymize": bool(conversation.get("anonymize")),
                "expires_at": _parse(conversation.get("expires_at"))
                if conversation.get("expires_fixed")
                else None,
            }
            return PrivacyForm(initial=initial), None
        if not can_change:
            raise PermissionDenied
        form = PrivacyForm(request.POST)
        if not form.is_valid():
            return form, None
        data = form.cleaned_data
        services.conversation_privacy_set(
            project_id=conversation["project_id"],
            conversation_id=node_id,
            actor=actor_of(request),
            accessibility=data["accessibility"],
            retention_days=data["retention_days"],
            anonymize=data["anonymize"],
            expires_at=data["expires_at"],
        )
        messages.success(request, "privacy settings saved")
        return form, HttpResponseRedirect(request.path)

    def graph_view(self, request: HttpRequest, label: str, node_id: str) -> HttpResponse:
        """The interactive neighbourhood of one node (or of a project: its top communities and
        documents); the page asks `neighbours_view` for each group's pages."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            first = neighbourhood.neighbourhood(label=label, node_id=node_id)
        except PlatformError as exc:
            return HttpResponse(exc.message, status=exc.status_code)
        kind = neighbourhood.LABELS.get(label)
        return render(
            request,
            "admin/curation/graph_view.html",
            {
                **self._context(request, f"Graph of {label.lower()} {first['node']['caption']}"),
                "kind": kind,
                "root": first,
                "detail_url": _detail_url(kind, node_id),
                "urls": {
                    "neighbours": reverse("admin:curation_graph_neighbours", args=["LABEL", "ID"]),
                    "detail": reverse("admin:curation_graph_detail", args=["KIND", "ID"]),
                    "graph": reverse("admin:curation_graph_view", args=["LABEL", "ID"]),
                },
            },
        )

    def neighbours_view(self, request: HttpRequest, label: str, node_id: str) -> HttpResponse:
        """One node's groups with their first pages, or (`group`, `after`) the next page of one group, as
        JSON; errors as the API's `{"error": {code, message, details}}`."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            body = neighbourhood.neighbourhood(
                label=label,
                node_id=node_id,
                group=request.GET.get("group") or None,
                after=request.GET.get("after", ""),
            )
        except PlatformError as exc:
            error = {"code": exc.code, "message": exc.message, "details": exc.details}
            return JsonResponse({"error": error}, status=exc.status_code)
        return JsonResponse(body)

    def detail_view(self, request: HttpRequest, kind: str, node_id: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            detail = selectors.graph_detail(kind_name=kind, node_id=node_id)
        except PlatformError as exc:
            return HttpResponse(exc.message, status=404)
        privacy_form = None
        can_change = bool(request.user.has_perm(CHANGE_PRIVACY))
        can_anonymise = kind in ("conversations", "documents") and bool(request.user.has_perm(ANONYMISE))
        if request.method == "POST" and request.POST.get("action") == "anonymise":
            if not can_anonymise:
                raise PermissionDenied
            return self._anonymise(request, kind, node_id, detail)
        if kind == "conversations":
            privacy_form, saved = self._privacy(request, node_id, detail["conversation"], can_change)
            if saved is not None:
                return saved
        elif request.method == "POST":
            return HttpResponse("nothing to change here", status=405)
        return render(
            request,
            "admin/curation/graph_detail.html",
            {
                **self._context(request, f"{kind[:-1].capitalize()} {node_id}"),
                "kind": kind,
                "detail": detail,
                "sections": _sections(kind, detail),
                "privacy_form": privacy_form,
                "can_change_privacy": can_change,
                "can_anonymise": can_anonymise,
                "graph_url": reverse(
                    "admin:curation_graph_view", args=[neighbourhood.KIND_LABELS[kind], node_id]
                ),
            },
        )


# neighbours that have their own detail pages
_LINKS = {
    "messages": "memories",
    "chunks": None,
    "entities": "entities",
    "related": "entities",
    "derived": None,
    "references": "documents",
    "conversations": "conversations",
    "cites": "documents",
    "cited_by": "documents",
}


_VECTORS = ("embedding", "sentence_embeddings")  # a node's vectors are never shown


def _sections(kind: str, detail: dict[str, Any]) -> list[dict[str, Any]]:
    """The detail as page sections: the node's properties, then one table per neighbour list."""
    sections: list[dict[str, Any]] = []
    for name, value in detail.items():
        if isinstance(value, dict):
            props = {k: v for k, v in sorted(value.items()) if k not in ("scope_tokens", "_lock", *_VECTORS)}
            sections.insert(0, {"title": name, "props": props})
        elif isinstance(value, list):
            rows = [r for r in value if isinstance(r, dict)]
            columns = list(dict.fromkeys(k for r in rows for k in r if k not in _VECTORS))
            sections.append(
                {
                    "title": f"{name} ({len(rows)})",
                    "columns": columns,
                    "rows": [
                        {
                            "cells": [r.get(c) for c in columns],
                            "url": _detail_url(_LINKS.get(name), r.get("id")),
                        }
                        for r in rows
                    ],
                }
            )
        elif value is not None:
            sections.append({"title": name, "props": {name: value}})
    return sections


def _detail_url(kind: str | None, node_id: Any) -> str | None:
    """The detail page of a neighbour that has one."""
    if kind is None or not node_id:
        return None
    return reverse("admin:curation_graph_detail", args=[kind, str(node_id)])


def _page_size() -> int:
    return int(settings.CURATION_PAGE_SIZE)


def _plain(value: Any) -> str:
    return value.isoformat() if isinstance(value, date | datetime) else str(value)


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
