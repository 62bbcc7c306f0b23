"""Typed values of the retrieval app."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MODES = ("vector", "fulltext", "hybrid", "graph")


@dataclass(frozen=True)
class Candidate:
    """A ranked chunk before enrichment."""

    chunk_id: str
    score: float


@dataclass(frozen=True)
class SearchFilters:
    document_ids: list[str] | None = None
    source_path_prefix: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.document_ids is None and not self.source_path_prefix and not self.metadata


@dataclass(frozen=True)
class Scope:
    """Where a retriever may look: a project, optionally narrowed to some of its documents."""

    project_id: str
    document_ids: list[str] | None = None  # None: the whole project
    chunk_ids: list[str] | None = None  # None: every chunk of the documents (DRIFT narrows to these)


@dataclass
class SearchItem:
    chunk_id: str
    document_id: str
    document_name: str
    text: str
    score: float
    metadata: dict[str, Any]
    extras: dict[str, Any] = field(default_factory=dict)  # a profile's extra columns, in its order


@dataclass
class SearchResult:
    items: list[SearchItem]
    mode: str
    profile: dict[str, Any] | None
    took_ms: float
    timings_ms: dict[str, float]
    context: str | None = None
    debug: dict[str, Any] | None = None  # graph mode, when asked: linked titles, seeds, the graph
    fallback: dict[str, str] | None = None  # the mode that ranked instead of the one asked, and why
