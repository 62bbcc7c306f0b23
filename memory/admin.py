"""Curators read the memory erasure audit trail here (it is written only by the platform)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from memory.models import MemoryErasure


@admin.register(MemoryErasure)
class MemoryErasureAdmin(admin.ModelAdmin):
    list_display = ("created_at", "project", "kind", "scope", "counts", "requested_by", "took_ms")
    list_filter = ("kind", "project")
    search_fields = ("requested_by",)
    readonly_fields = ("project", "kind", "scope", "counts", "requested_by", "took_ms", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: MemoryErasure | None = None) -> bool:
        return False
