"""Typed values of the memory app."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from memory import cypher
from memory import metadata as message_metadata

SEARCH_MODES = ("vector", "fulltext", "hybrid", "graph", "recency")
DEPTHS = ("messages", "summaries", "facts")
LEVELS = ("message", "summary", "fact", "preference", "profile")


@dataclass(frozen=True)
class MessageInput:
    role: str
    text: str
    message_id: str | None = None
    author_name: str | None = None
    timestamp: str | None = None  # ISO-8601; now when not given
    # client-supplied, computed when not given: the numbers as sent, or the float32 values of a
    # base64 string (kept as an array: the service checks the batch as one matrix, then converts it)
    embedding: list[float] | npt.NDArray[np.float32] | None = None
    # document ids, chunk ids or source paths of the project (seed 003: (:Memory)-[:REFERENCES]->)
    references: tuple[str, ...] = ()
    status: str | None = None  # "failed": a chat reply the LLM could not give (kept with the turn)
    # the caller's free metadata, checked (memory.metadata.metadata_check)
    metadata: dict[str, message_metadata.Value] | None = None


@dataclass
class StoreResult:
    conversation_id: str | None
    stored: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    job_id: str | None
    # the stored messages' embeddings are left to the processing job (MEMORY_EMBED_IN_WORKER)
    embedding_pending: bool = False


@dataclass
class MemoryItem:
    id: str
    level: str
    text: str
    score: float
    timestamp: str | None
    scope: dict[str, str | None]
    role: str | None = None
    conversation_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # a message's own metadata as its caller stored it (`metadata` holds the platform's); {} otherwise
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class MemorySearchResult:
    items: list[MemoryItem]
    mode: str
    depth: str
    took_ms: float
    timings_ms: dict[str, float]


@dataclass
class ForgetResult:
    erased: dict[str, int]
    audit_id: int
    took_ms: float


@dataclass(frozen=True)
class MessageFilters:
    """Conditions on the messages a search returns: their time in [since, until) (normalised ISO text,
    as stored), their role, their author's name (exact), their metadata (each key's value equals the
    given one or, for a list, holds it; keys checked by memory.metadata.filter_check); with `as_of`,
    only what had been said by then and the facts and preferences valid then."""

    since: str | None = None
    until: str | None = None
    roles: tuple[str, ...] = ()
    author: str | None = None
    as_of: str | None = None
    metadata: tuple[tuple[str, message_metadata.Scalar], ...] = ()

    def where(self, var: str) -> str:
        """` AND …` over `var` (fixed text; values are `params()`), "" without conditions."""
        parts = []
        if self.since is not None:
            parts.append(f"{var}.timestamp >= $filter_since")
        if self.until is not None:
            parts.append(f"{var}.timestamp < $filter_until")
        if self.roles:
            parts.append(f"{var}.role IN $filter_roles")
        if self.author is not None:
            parts.append(f"{var}.author_name = $filter_author")
        if self.as_of is not None:
            parts.append(f"{var}.timestamp <= $filter_as_of")
        if self.metadata:
            parts.append(cypher.METADATA_FILTER.format(var=var))
        return "".join(f" AND {p}" for p in parts)

    def valid_where(self, var: str) -> str:
        """` AND …` over a fact or preference `var`: valid now (not superseded), or with `as_of` valid
        then (its window [valid_from, valid_until) holds that time)."""
        if self.as_of is None:
            return f" AND {var}.valid_until IS NULL"
        return (
            f" AND {var}.valid_from <= $filter_as_of"
            f" AND ({var}.valid_until IS NULL OR {var}.valid_until > $filter_as_of)"
        )

    def params(self) -> dict[str, Any]:
        return {
            "filter_since": self.since,
            "filter_until": self.until,
            "filter_roles": list(self.roles),
            "filter_author": self.author,
            "filter_as_of": self.as_of,
            "filter_metadata": message_metadata.filter_params(self.metadata),
        }


@dataclass
class ContextItem:
    """One memory written into a context block; `reason` says why it is there: a search `hit`, a
    `neighbour` turn of a hit, a `summary` of a hit's conversation, a current `fact` or `preference`."""

    id: str
    level: str
    timestamp: str | None
    conversation_id: str | None
    role: str | None
    text: str
    reason: str
    # a fact's or preference's source turns: the ids of the messages it was drawn from
    sources: list[str] = field(default_factory=list)


@dataclass
class MemoryContext:
    context: str
    tokens: int
    items: list[ContextItem]
    took_ms: float
