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
    doc["counts"] = {k: doc.pop(f"{k}_count") or 0 for k in ("chunk", "entity", "relation")}
    doc["counts"] = {
        "chunks": doc["counts"]["chunk"],
        "entities": doc["counts"]["entity"],
        "relations": doc["counts"]["relation"],
    }
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
