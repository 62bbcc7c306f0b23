"""BM25 among a given set of chunks (DRIFT's community-scoped follow-ups): with the chunks' documents
named, Lucene searches only those documents and grows its fetch while it filled it."""

from __future__ import annotations

from core import graph
from core.models import Project
from knowledge.dto import DocumentInput
from retrieval.dto import Scope
from retrieval.retrievers import FulltextRetriever, Query
from tests.conftest import Tenant
from tests.retrieval.helpers import ingest_now

# every paragraph names the lighthouse; paragraph i repeats it i times, so BM25 ranks later
# paragraphs higher and the first one lowest
PARAGRAPHS = [
    " ".join(["The lighthouse keeper logged the weather."] * (i + 1))
    + f" Paragraph {i} also mentions harbour number {i}."
    for i in range(12)
]


def _chunks(project_id: str, document_id: str) -> list[dict[str, object]]:
    return graph.read(
        "MATCH (c:Chunk {project_id: $p, document_id: $d}) RETURN c.id AS id, c.text AS text "
        "ORDER BY c.index",
        p=project_id,
        d=document_id,
    )


def _ingest(tenant: Tenant) -> tuple[str, str]:
    Project.objects.filter(pk=tenant.project.id).update(chunk_size_tokens=40, chunk_overlap_tokens=0)
    long_doc, other = ingest_now(
        tenant.project.id,
        [
            DocumentInput(title="Keeper's log", text="\n\n".join(PARAGRAPHS)),
            DocumentInput(title="Other log", text="The lighthouse keeper of the other coast rested."),
        ],
    )
    return long_doc, other


def _search(scope: Scope, limit: int) -> list[str]:
    found = FulltextRetriever(scope=scope).search(
        Query(text="lighthouse keeper", embed=lambda _t: []), limit=limit
    )
    return [c.chunk_id for c in found]


def test_scoped_fulltext_finds_a_low_ranked_chunk_beyond_the_first_fetch(tenant_a: Tenant) -> None:
    long_doc, other = _ingest(tenant_a)
    chunks = _chunks(tenant_a.project.id, long_doc)
    assert len(chunks) > 8  # more matching chunks in the document than the first fetch (limit × 4)
    weakest = chunks[0]["id"]
    assert isinstance(weakest, str)
    scope = Scope(project_id=tenant_a.project.id, chunk_ids=[weakest], document_ids=[long_doc])
    assert _search(scope, limit=1) == [weakest]


def test_scoped_fulltext_stays_in_its_chunks(tenant_a: Tenant) -> None:
    long_doc, other = _ingest(tenant_a)
    chunks = [str(c["id"]) for c in _chunks(tenant_a.project.id, long_doc)]
    picked = chunks[2:5]
    with_documents = Scope(project_id=tenant_a.project.id, chunk_ids=picked, document_ids=[long_doc])
    without = Scope(project_id=tenant_a.project.id, chunk_ids=picked)
    found = _search(with_documents, limit=10)
    assert sorted(found) == sorted(picked)
    assert found == _search(without, limit=10)  # the same ranking as the project-wide path


def test_scoped_fulltext_cannot_reach_another_projects_chunks(tenant_a: Tenant, tenant_b: Tenant) -> None:
    long_doc, _other = _ingest(tenant_a)
    foreign = [str(c["id"]) for c in _chunks(tenant_a.project.id, long_doc)]
    scope = Scope(project_id=tenant_b.project.id, chunk_ids=foreign, document_ids=[long_doc])
    assert _search(scope, limit=10) == []
