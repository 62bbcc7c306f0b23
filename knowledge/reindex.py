"""Bringing a project's chunks to the current search text: each chunk's `search_text` (its document's
title, heading path and text) is rebuilt, re-embedded, and indexed by the project's own fulltext index,
which is recreated when its analyzer is not RETRIEVAL_FULLTEXT_ANALYZER (`manage.py reindex_chunks`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core import graph
from core.embeddings import get_embedder
from core.errors import NotFound
from core.models import Project
from core.services import project_embedder_check
from knowledge import cypher, tenancy
from knowledge.pipeline.chunking import heading_paths, search_text

DOCUMENTS_PER_PAGE = 50


@dataclass
class ReindexResult:
    documents: int = 0
    chunks: int = 0
    index_recreated: bool = False


def _analyzer_of(index: str) -> str | None:
    rows = graph.read(
        "SHOW FULLTEXT INDEXES YIELD name, options WHERE name = $name RETURN options", name=index
    )
    if not rows:
        return None
    return str((rows[0]["options"] or {}).get("indexConfig", {}).get("fulltext.analyzer"))


def chunks_reindex(
    *, project_id: str, embed: bool = True, progress: Callable[[ReindexResult], None] | None = None
) -> ReindexResult:
    """Rebuild the search text (and, with `embed`, the embedding) of every chunk of the project, a page
    of documents per transaction; 409 when the project's vectors come from another embedder."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound("no such project")
    if embed:
        project_embedder_check(project=project)
    result = ReindexResult()
    index = tenancy.chunk_fulltext_index(project_id)
    current = _analyzer_of(index)
    if current is not None and current != tenancy.fulltext_analyzer():
        graph.write_autocommit(f"DROP INDEX {index} IF EXISTS")
        tenancy.project_fulltext_forget(project_id)
        result.index_recreated = True
    tenancy.project_fulltext_create(project_id)
    embedder = get_embedder() if embed else None
    after = ""
    while True:
        page = graph.read(
            cypher.REINDEX_DOCUMENTS_PAGE, project_id=project_id, after=after, limit=DOCUMENTS_PER_PAGE
        )
        if not page:
            break
        rows = []
        for doc in page:
            texts = [c["text"] or "" for c in doc["chunks"]]
            for chunk, text, path in zip(
                doc["chunks"], texts, heading_paths(doc["content"] or "", texts), strict=True
            ):
                rows.append({"id": chunk["id"], "search_text": search_text(doc["title"], path, text)})
        if embedder is not None and rows:
            for row, vector in zip(rows, embedder.embed([r["search_text"] for r in rows]), strict=True):
                row["embedding"] = vector
        else:
            for row in rows:
                row["embedding"] = None
        graph.write(
            cypher.REINDEX_CHUNKS_SET,
            project_id=project_id,
            chunks=rows,
            chunk_label=tenancy.chunk_label(project_id),
        )
        result.documents += len(page)
        result.chunks += len(rows)
        after = page[-1]["id"]
        if progress is not None:
            progress(result)
    return result
