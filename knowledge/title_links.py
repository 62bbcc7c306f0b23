"""Title links of a batch being ingested: `(:Chunk)-[:NAMES]->(:Document)` wherever a chunk names
another document's title (knowledge/pipeline/titles.py says what counts as naming it).

Two directions: the batch's new chunks against every title of the project (documents exist from
submission on, so a title submitted with a later batch is already known), and chunks already stored
against the batch's titles, found through the project's fulltext index (a phrase per title) and
verified against every title of the project, so that a stored chunk naming "Inside the Room" is not
linked to a new document titled "The Room".
"""

from __future__ import annotations

from typing import Any

from core import graph
from knowledge import cypher, tenancy
from knowledge.pipeline.titles import TitleMatcher, title_names

# Stored chunks examined per batch for naming one of its titles (the fulltext index ranks them).
STORED_CANDIDATES_MAX = 20_000


def title_links(
    project_id: str, docs: list[dict[str, Any]], chunks: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """{chunk_id, document_id} rows: the batch's chunks naming any title of the project, and stored
    chunks naming one of the batch's titles; never a chunk naming its own document."""
    titles = {
        str(r["id"]): str(r["title"] or "") for r in graph.read(cypher.PROJECT_TITLES, project_id=project_id)
    }
    titles.update({d["id"]: d["title"] or "" for d in docs})
    matcher = TitleMatcher.of(titles)
    links = {
        (chunk["id"], document_id)
        for chunk in chunks
        for document_id in matcher.mentioned(chunk["text"])
        if document_id != chunk["document_id"]
    }
    links |= _stored_naming(project_id, {d["id"]: d["title"] or "" for d in docs}, matcher)
    return [{"chunk_id": c, "document_id": d} for c, d in sorted(links)]


def _stored_naming(
    project_id: str, batch_titles: dict[str, str], matcher: TitleMatcher
) -> set[tuple[str, str]]:
    phrases = {" ".join(name) for title in batch_titles.values() for name in title_names(title)}
    if not phrases or not tenancy.project_fulltext_online(project_id):
        return set()
    # a title's words hold only word characters, apostrophes, dots and hyphens: safe inside a phrase
    query = "search_text:(" + " OR ".join(f'"{phrase}"' for phrase in sorted(phrases)) + ")"
    rows = graph.read(
        cypher.TITLE_CANDIDATES,
        index=tenancy.chunk_fulltext_index(project_id),
        lucene=query,
        limit=STORED_CANDIDATES_MAX,
        project_id=project_id,
        document_ids=list(batch_titles),
    )
    return {
        (r["chunk_id"], d)
        for r in rows
        for d in matcher.mentioned(str(r["text"] or ""))
        if d in batch_titles and d != r["document_id"]
    }
