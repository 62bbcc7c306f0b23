"""Conversation-aware search (seed 003, "Conversation-Aware Retrieval Flow") is run by the memory
app, which owns conversations and sits above retrieval: it registers its search here when Django
starts (memory.apps), and `POST /search` with a `conversation` calls it. Without the memory app
installed such a search answers 400."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from core.errors import InvalidInput
from retrieval.dto import SearchFilters, SearchResult


@dataclass(frozen=True)
class ConversationQuery:
    conversation_id: str
    user_id: str
    # per source: how many of each to fuse (None: the settings' defaults)
    past: int | None = None
    referenced: int | None = None
    recent: int | None = None
    min_similarity: float | None = None


class ConversationSearch(Protocol):
    def __call__(
        self,
        *,
        project_id: str,
        query: str,
        mode: str,
        top_k: int,
        filters: SearchFilters,
        conversation: ConversationQuery,
        include_context: bool,
    ) -> SearchResult: ...


_registered: list[ConversationSearch] = []


def conversation_search_register(search: ConversationSearch) -> None:
    _registered[:] = [search]


def conversation_search() -> ConversationSearch:
    if not _registered:
        raise InvalidInput(
            "conversation-aware search needs the memory app", details={"field": "conversation"}
        )
    return _registered[0]
