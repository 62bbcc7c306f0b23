"""Writes of document-to-document references (seed 003's ReferenceManager): a typed REFERENCES edge
added after ingestion. Ingestion writes the references a document names when it is submitted."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core import graph
from core.errors import InvalidInput
from knowledge import cypher
from knowledge.selectors import document_require

REFERENCE_TYPE = re.compile(r"[a-z][a-z0-9_]{0,39}")
DEFAULT_REFERENCE_TYPE = "references"
MAX_CONTEXT_CHARS = 2000


@dataclass(frozen=True)
class ReferenceAdded:
    from_document_id: str
    to_document_id: str
    type: str
    context: str | None
    created: bool
    created_at: str


def document_reference_add(
    *, project_id: str, from_document_id: str, to_document_id: str, type: str | None, context: str | None
) -> ReferenceAdded:
    """One REFERENCES edge from a document to another of the same project; adding it again updates
    its type and context. The target must exist (400 otherwise), the source too (404)."""
    kind = type or DEFAULT_REFERENCE_TYPE
    if not REFERENCE_TYPE.fullmatch(kind):
        raise InvalidInput(
            "type must be 1 to 40 characters: a lower-case letter, then letters, digits or '_'",
            details={"field": "type"},
        )
    if context is not None and len(context) > MAX_CONTEXT_CHARS:
        raise InvalidInput(
            f"context has at most {MAX_CONTEXT_CHARS} characters", details={"field": "context"}
        )
    document_require(project_id=project_id, document_id=from_document_id)
    if to_document_id == from_document_id:
        raise InvalidInput("a document cannot reference itself", details={"field": "to_document_id"})
    rows = graph.write(
        cypher.REFERENCE_ADD,
        project_id=project_id,
        from_id=from_document_id,
        to_id=to_document_id,
        type=kind,
        context=context or None,
    )
    if not rows:
        # no row: the target is not in this project (or the source was deleted meanwhile: 404)
        document_require(project_id=project_id, document_id=from_document_id)
        raise InvalidInput(
            "to_document_id names no document of this project", details={"field": "to_document_id"}
        )
    return ReferenceAdded(
        from_document_id=from_document_id,
        to_document_id=to_document_id,
        type=kind,
        context=context or None,
        created=rows[0]["created"],
        created_at=rows[0]["created_at"],
    )
