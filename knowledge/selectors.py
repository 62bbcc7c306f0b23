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


def document_source(*, project_id: str, document_id: str) -> dict[str, Any]:
    """What a document was ingested from: title, text, source path, MIME type, author, metadata."""
    rows = graph.read(cypher.DOCUMENT_SOURCE, project_id=project_id, id=document_id)
    if not rows:
        raise NotFound("no such document in this project")
    doc = dict(rows[0]["doc"])
    doc["metadata"] = json.loads(doc.pop("metadata_json") or "{}")
    return doc


def entities_named(*, project_id: str, grams: list[str]) -> dict[str, list[str]]:
    """The element ids of the project's entities whose normalised name is each gram (grams that name
    no entity are left out). Other apps link to entities by these ids and never by entity keys."""
    if not grams or not graph.read(cypher.ENTITIES_ANY, project_id=project_id):
        return {}
    rows = graph.read(cypher.ENTITIES_NAMED, project_id=project_id, grams=sorted(set(grams)))
    return {r["gram"]: list(r["refs"]) for r in rows if r["refs"]}
