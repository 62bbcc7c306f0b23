"""Curators manage enrichment profiles here; every save is validated with EXPLAIN and versioned."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.errors import InvalidInput, PlatformError
from retrieval import profiles, services
from retrieval.models import RetrievalProfile, RetrievalProfileVersion


class RetrievalProfileForm(forms.ModelForm):
    class Meta:
        model = RetrievalProfile
        fields = ["name", "description", "retrieval_query", "enabled", "project"]
        widgets = {
            "retrieval_query": forms.Textarea(attrs={"rows": 18, "cols": 100, "class": "vLargeTextField"})
        }

    def clean_retrieval_query(self) -> str:
        query = self.cleaned_data["retrieval_query"]
        try:
            profiles.profile_check(query)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from exc
        except PlatformError as exc:  # Neo4j down: nothing is saved
            raise forms.ValidationError(f"cannot validate now: {exc.message}") from exc
        return query


class VersionInline(admin.TabularInline):
    model = RetrievalProfileVersion
    extra = 0
    can_delete = False
    fields = ["version", "created_at", "created_by", "retrieval_query"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RetrievalProfile)
class RetrievalProfileAdmin(admin.ModelAdmin):
    form = RetrievalProfileForm
    list_display = ["name", "version", "enabled", "builtin", "project", "updated_at", "updated_by"]
    list_filter = ["enabled", "builtin"]
    search_fields = ["name", "description"]
    readonly_fields = ["version", "columns", "builtin", "updated_at", "updated_by"]
    inlines = [VersionInline]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # a profile is found by name: renaming would fork it, so the name is fixed once saved
        return [*self.readonly_fields, "name"] if obj is not None else list(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: RetrievalProfile, form: Any, change: bool) -> None:
        saved = services.profile_save(
            name=obj.name,
            retrieval_query=obj.retrieval_query,
            description=obj.description,
            enabled=obj.enabled,
            project_id=obj.project_id,
            user=request.user.get_username(),
            builtin=obj.builtin,
        )
        obj.pk, obj.version, obj.columns = saved.pk, saved.version, saved.columns
