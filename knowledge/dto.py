"""Typed values of the knowledge app."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EntityInput:
    name: str
    type: str
    description: str = ""


@dataclass(frozen=True)
class RelationInput:
    source: str
    target: str
    description: str = ""
    weight: float = 1.0


@dataclass(frozen=True)
class DocumentInput:
    """A validated, parsed document ready to be queued."""

    title: str
    text: str
    source_path: str | None = None
    mime_type: str = "text/plain"
    author: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    entities: list[EntityInput] | None = None
    relations: list[RelationInput] | None = None
    references: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SubmittedDocument:
    document_id: str
    status: str  # queued | unchanged


@dataclass(frozen=True)
class SubmitResult:
    job_id: str
    documents: list[SubmittedDocument]
