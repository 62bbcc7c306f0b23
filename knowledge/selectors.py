"""Reads of the knowledge app."""

from __future__ import annotations

import json
from typing import Any

from core import graph
from core.errors import NotFound
from knowledge import cypher


def _document(row: dict[str, Any]) -> dict[str, Any]:
    doc = dict(row)
    doc["metadata"] = json.loads(doc.pop("metadata_json") or "{}")
    names = {"chunk_count": "chunks", "entity_count": "entities", "relation_count": "relations"}
    doc["counts"] = {name: doc.pop(field) or 0 for field, name in names.items()}
    return doc


def document_get(*, project_id: str, document_id: str) -> dict[str, Any]:
    rows = graph.read(cypher.DOCUMENT_GET, project_id=project_id, id=document_id)
    if not rows:
        raise NotFound("document not found")
    return _document(rows[0]["doc"])


def document_list(
    *, project_id: str, status: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    rows = graph.read(cypher.DOCUMENTS_LIST, project_id=project_id, status=status, limit=limit, offset=offset)
    total = graph.read(cypher.DOCUMENTS_COUNT, project_id=project_id, status=status)[0]["n"]
    return [_document(r["doc"]) for r in rows], total


def chunk_get(*, project_id: str, chunk_id: str) -> dict[str, Any]:
    """One chunk with its document's name; another project's chunk is not found."""
    rows = graph.read(cypher.CHUNK_GET, project_id=project_id, id=chunk_id)
    if not rows:
        raise NotFound("chunk not found")
    return rows[0]
