"""Enrichment profiles: named Cypher `retrieval_query` snippets, edited by curators, versioned."""

from __future__ import annotations

from django.db import models

from core.models import Project


class RetrievalProfile(models.Model):
    """Runs after a search for each hit with `node` (the chunk) and `score` in scope (seed 000's
    retrieval query pattern); it returns `text`, `score` and any extra columns.

    Saved only through `retrieval.services.profile_save`, which validates the query with EXPLAIN and
    records a `RetrievalProfileVersion` for each change.
    """

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True, default="")
    retrieval_query = models.TextField()
    columns = models.JSONField(default=list, editable=False, help_text="output columns found by EXPLAIN")
    version = models.PositiveIntegerField(default=1, editable=False)
    enabled = models.BooleanField(default=True)
    builtin = models.BooleanField(default=False, editable=False)
    project = models.ForeignKey(
        Project,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="retrieval_profiles",
        help_text="Empty: available to every project.",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class RetrievalProfileVersion(models.Model):
    """One saved state of a profile; the newest equals the profile itself."""

    profile = models.ForeignKey(RetrievalProfile, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    retrieval_query = models.TextField()
    columns = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["profile", "-version"]
        constraints = [models.UniqueConstraint(fields=["profile", "version"], name="profile_version_unique")]

    def __str__(self) -> str:
        return f"{self.profile.name} v{self.version}"
