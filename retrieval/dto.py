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


SOURCES = ("document", "past_conversation", "referenced_document", "recent_conversation")


@dataclass
class SearchItem:
    chunk_id: str | None
    document_id: str | None
    document_name: str
    text: str
    score: float
    metadata: dict[str, Any]
    extras: dict[str, Any] = field(default_factory=dict)  # a profile's extra columns, in its order
    # what found it: a document chunk, or (conversation-aware search) a message of another
    # conversation of the user, a chunk of a document such a message referenced, or a recent message
    # of the current conversation (then memory_id and conversation_id name the message)
    source: str = "document"
    sources: list[str] | None = None
    memory_id: str | None = None
    conversation_id: str | None = None


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
    conversation: dict[str, Any] | None = None  # conversation-aware search: the conversation and limits
