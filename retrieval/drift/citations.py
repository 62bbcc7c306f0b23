"""Citations (seed 002 section 2): filter a local executor's citations against the full retrieved
set, enrich the aggregator's chunk-id strings into objects, and format them for progress messages.

Log events, each with `extra={"drift": {...}}`: citation_validation_null_chunk_id,
citation_validation_unmatched_chunk_id, citation_validation_summary, citation_enrichment_missing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from retrieval.drift.dto import ChunkInfo, Citation

logger = logging.getLogger("retrieval.drift.citations")

SPAN_CHARS = 240  # a citation's excerpt when the model gave none
PREVIEW_CHARS = 80  # a citation's excerpt in a progress message


def _log(event: str, **fields: Any) -> None:
    logger.warning(event, extra={"drift": {"event": event, **fields}})


def excerpt(text: str, limit: int = SPAN_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def validate_local(
    citations: list[Citation], *, valid_ids: set[str], known: dict[str, ChunkInfo], stage: str
) -> list[dict[str, str]]:
    """Keep citations whose chunk id was retrieved; give each its document name and a span."""
    kept: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    nulls = unmatched = 0
    for index, citation in enumerate(citations):
        chunk_id = citation.chunk_id
        if not chunk_id:
            nulls += 1
            _log("citation_validation_null_chunk_id", index=index, stage=stage, span=citation.span[:60])
            continue
        if chunk_id not in valid_ids:
            unmatched += 1
            _log(
                "citation_validation_unmatched_chunk_id",
                index=index,
                stage=stage,
                chunk_id=chunk_id,
                span=citation.span[:60],
            )
            continue
        info = known.get(chunk_id)
        span = citation.span or (excerpt(info.text) if info else "")
        if (chunk_id, span) in seen:
            continue
        seen.add((chunk_id, span))
        kept.append(
            {
                "chunk_id": chunk_id,
                "span": span,
                "document_name": info.document_name if info else (citation.document_name or "unknown"),
            }
        )
    if nulls or unmatched:
        _log(
            "citation_validation_summary",
            stage=stage,
            total=len(citations),
            valid=len(kept),
            filtered=nulls + unmatched,
        )
    return kept


def enrich(
    raw_ids: list[str | None],
    *,
    cited: dict[str, dict[str, str]],
    known: dict[str, ChunkInfo],
    valid_ids: set[str],
) -> list[dict[str, str] | str]:
    """The aggregator's chunk-id strings → citation objects: from the follow-ups' citations first,
    then from the retrieved chunks; a retrieved id with no details stays a string (the fallback);
    ids never retrieved are dropped."""
    out: list[dict[str, str] | str] = []
    seen: set[str] = set()
    for index, chunk_id in enumerate(raw_ids):
        if not chunk_id:
            _log("citation_validation_null_chunk_id", index=index, stage="aggregation")
            continue
        if chunk_id not in valid_ids:
            _log(
                "citation_validation_unmatched_chunk_id", index=index, stage="aggregation", chunk_id=chunk_id
            )
            continue
        if chunk_id in seen:
            continue
        seen.add(chunk_id)
        if chunk_id in cited:
            out.append(dict(cited[chunk_id]))
        elif chunk_id in known:
            info = known[chunk_id]
            out.append(
                {"chunk_id": chunk_id, "span": excerpt(info.text), "document_name": info.document_name}
            )
        else:
            _log("citation_enrichment_missing", index=index, chunk_id=chunk_id)
            out.append(chunk_id)
    return out


def document_names(citations: Iterable[dict[str, str] | str]) -> list[str]:
    """Document names in first-seen order, each once (string citations have none)."""
    names: list[str] = []
    for citation in citations:
        if isinstance(citation, dict):
            name = citation.get("document_name") or "unknown"
            if name not in names:
                names.append(name)
    return names


def followup_lines(citations: list[dict[str, str]]) -> list[str]:
    """Follow-up phase display: `[document_name] "excerpt"`, each pair once."""
    lines: list[str] = []
    for citation in citations:
        line = f'[{citation["document_name"]}] "{excerpt(citation["span"], PREVIEW_CHARS)}"'
        if line not in lines:
            lines.append(line)
    return lines
