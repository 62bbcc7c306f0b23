"""Chunks are searched in context: each chunk is embedded and fulltext-indexed as its document's title,
heading path and text (`search_text`; `text` stays as written), in a fulltext index of its project's
own, so a project's scores do not depend on what other projects hold."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from core import graph
from core.embeddings import get_embedder
from knowledge import tenancy
from knowledge.dto import DocumentInput
from knowledge.pipeline.chunking import chunk_text, heading_paths, search_text
from tests.conftest import make_tenant
from tests.retrieval.corpus import DOCS
from tests.retrieval.helpers import ingest_now, search

GUIDE = """# Field guide

Birds of the northern coast, seen from the cliffs in spring.

## Seabirds

### Puffins

Puffins nest in burrows on grassy slopes and carry many small fish crosswise in their bills.

```
# counting script: not a heading
count = 0
```

### Gannets

Gannets dive from thirty metres and fold their wings just before they hit the water.

## Waders

Oystercatchers probe the sand at low tide with long orange bills.
"""


def test_each_chunk_knows_the_headings_it_starts_under() -> None:
    chunks = chunk_text(GUIDE, size=24, overlap=0)

    def path(words: str) -> tuple[str, ...]:
        return next(c.headings for c in chunks if words in c.text)

    assert path("Birds of the northern") == ("Field guide",)
    assert path("Puffins nest") == ("Field guide", "Seabirds", "Puffins")
    assert path("Gannets dive") == ("Field guide", "Seabirds", "Gannets")
    assert path("Oystercatchers probe") == ("Field guide", "Waders")
    # the fenced "# counting script" line opens no section: its chunk is still under "Puffins"
    assert path("count = 0") == ("Field guide", "Seabirds", "Puffins")
    assert chunk_text("no headings at all. " * 40, size=20, overlap=5)[0].headings == ()


def test_stored_chunks_find_the_same_headings_again() -> None:
    """reindex_chunks rebuilds paths from the stored chunk texts: they must equal the chunker's."""
    for size, overlap in ((24, 0), (40, 10), (16, 4)):
        chunks = chunk_text(GUIDE, size=size, overlap=overlap)
        assert heading_paths(GUIDE, [c.text for c in chunks]) == [c.headings for c in chunks]


def test_search_text_is_title_path_and_text() -> None:
    assert search_text("Field guide", ("Field guide", "Seabirds", "Puffins"), "Puffins nest.") == (
        "Field guide\nSeabirds > Puffins\nPuffins nest."
    )
    assert search_text("Notes", (), "Just text.") == "Notes\nJust text."
    assert search_text(None, (), "Just text.") == "Just text."
    deep = tuple(f"Heading number {i}" for i in range(40))
    first_line, path, text = search_text("T", deep, "x").split("\n")
    assert len(path) <= 300 and path.endswith("Heading number 39") and "Heading number 0 " not in path


@pytest.mark.django_db
def test_a_word_only_in_the_title_finds_the_chunk_whose_text_stays_as_written(settings) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("search text")
    spice = DocumentInput(
        title="Zanzibar spice trade",
        text="Cloves were the island's main export in the nineteenth century.",
        source_path="trade/spice.md",
    )
    ingest_now(tenant.project.id, [*DOCS, spice])
    for mode in ("fulltext", "vector", "hybrid"):
        body = search(tenant.client(tenant.read_key), tenant.project.id, query="Zanzibar", mode=mode).json()
        assert body["items"][0]["document_name"] == "Zanzibar spice trade", (mode, body)
        assert body["items"][0]["text"] == spice.text
    stored = graph.read(
        "MATCH (c:Chunk {project_id: $p}) WHERE c.text STARTS WITH 'Cloves' RETURN c.text AS t, c.search_text AS s",
        p=tenant.project.id,
    )
    assert stored == [{"t": spice.text, "s": f"Zanzibar spice trade\n{spice.text}"}]
    index = graph.read(
        "SHOW FULLTEXT INDEXES YIELD name, state, labelsOrTypes, properties, options WHERE name = $n "
        "RETURN state, labelsOrTypes AS labels, properties, options.indexConfig.`fulltext.analyzer` AS analyzer",
        n=tenancy.chunk_fulltext_index(tenant.project.id),
    )
    assert index == [
        {
            "state": "ONLINE",
            "labels": [tenancy.chunk_label(tenant.project.id)],
            "properties": ["search_text", "document_id"],
            "analyzer": settings.RETRIEVAL_FULLTEXT_ANALYZER,
        }
    ]


def _other_documents(n: int, salt: str) -> list[DocumentInput]:
    """Texts heavy with the queries' words, and one long one: they move index-wide statistics."""
    return [
        DocumentInput(
            title=f"Engine note {salt} {i}",
            text=("Analytical Engine algorithm Babbage sourdough starter yeast. " * (1 + i % 4))
            + ("A long account of engines and bread. " * (300 if i == 0 else 0)),
            source_path=f"other/{salt}/{i}.md",
        )
        for i in range(n)
    ]


def _ranking(tenant, mode: str, query: str) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    body = search(tenant.client(tenant.read_key), tenant.project.id, query=query, mode=mode, top_k=10).json()
    return [(item["chunk_id"], round(item["score"], 9)) for item in body["items"]]


SHARED = "test_shared_chunk_text"  # what one index over every project's chunks would score


def _shared_index_scores(project_id: str, term: str) -> list[float]:
    graph.write_autocommit(
        f"CREATE FULLTEXT INDEX {SHARED} IF NOT EXISTS FOR (c:Chunk) ON EACH [c.search_text, c.project_id]"
    )
    try:
        graph.write_autocommit(f"CALL db.awaitIndex('{SHARED}', 120)")
        rows = graph.read(
            f"CALL db.index.fulltext.queryNodes('{SHARED}', $q) YIELD node, score "
            "WHERE node.project_id = $p RETURN score ORDER BY score DESC",
            q=f'search_text:({term}) AND project_id:"{project_id}"^0',
            p=project_id,
        )
    finally:
        graph.write_autocommit(f"DROP INDEX {SHARED} IF EXISTS")
    return [round(r["score"], 9) for r in rows]


@pytest.mark.django_db
@pytest.mark.slow
def test_a_projects_scores_do_not_depend_on_what_other_projects_hold() -> None:
    tenant = make_tenant("statistics alone")
    ingest_now(tenant.project.id, DOCS)
    queries = ["the algorithm for the Analytical Engine", "wild yeast starter for bread"]
    alone = {(m, q): _ranking(tenant, m, q) for m in ("fulltext", "hybrid", "vector") for q in queries}
    shared_alone = _shared_index_scores(tenant.project.id, "engine")
    assert all(alone.values())

    for other in range(10):  # ten times the project's documents in other projects
        ingest_now(
            make_tenant(f"statistics other {other}").project.id, _other_documents(len(DOCS), str(other))
        )

    crowded = {(m, q): _ranking(tenant, m, q) for m in ("fulltext", "hybrid", "vector") for q in queries}
    assert crowded == alone
    # the shared index (index-wide statistics) would have moved: the test can see a difference
    assert _shared_index_scores(tenant.project.id, "engine") != shared_alone


def _drop_own_fulltext_index(project_id: str) -> None:
    graph.write_autocommit(f"DROP INDEX {tenancy.chunk_fulltext_index(project_id)} IF EXISTS")
    tenancy.project_fulltext_forget(project_id)


@pytest.mark.django_db
def test_while_a_projects_fulltext_index_is_built_search_ranks_by_vector_and_says_so() -> None:
    tenant = make_tenant("index building")
    pid = tenant.project.id
    ingest_now(pid, DOCS)
    client = tenant.client(tenant.read_key)
    question = "the algorithm for the Analytical Engine"
    by_vector = search(client, pid, query=question, mode="vector").json()
    assert by_vector["items"] and "fallback" not in by_vector

    _drop_own_fulltext_index(pid)
    building = search(client, pid, query=question, mode="fulltext").json()  # asks for the index again
    assert building["fallback"]["mode"] == "vector" and "being built" in building["fallback"]["reason"]
    assert [i["chunk_id"] for i in building["items"]] == [i["chunk_id"] for i in by_vector["items"]]
    _drop_own_fulltext_index(pid)
    hybrid = search(client, pid, query=question, mode="hybrid").json()
    assert hybrid["fallback"]["mode"] == "vector" and hybrid["items"]
    assert "fulltext" not in hybrid["timings_ms"]  # no Lucene query was run

    assert tenancy.project_fulltext_ensure(pid)  # the index asked for is online
    for mode in ("fulltext", "hybrid"):
        body = search(client, pid, query=question, mode=mode).json()
        assert "fallback" not in body and body["items"] and "fulltext" in body["timings_ms"], mode


@pytest.mark.django_db
def test_reindex_chunks_brings_old_chunks_to_the_search_text(settings) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("reindex")
    pid = tenant.project.id
    spice = DocumentInput(
        title="Zanzibar spice trade", text="Cloves were the main export.", source_path="s.md"
    )
    ingest_now(pid, [*DOCS, spice])
    # chunks as ingestion wrote them before search text: text embeddings, no search_text, no own index
    embedder = get_embedder()
    rows = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.id AS id, c.text AS text", p=pid)
    vectors = embedder.embed([r["text"] for r in rows])
    graph.write(
        "UNWIND $rows AS r MATCH (c:Chunk {id: r.id}) REMOVE c.search_text SET c.embedding = r.v",
        rows=[{"id": r["id"], "v": v} for r, v in zip(rows, vectors, strict=True)],
    )
    _drop_own_fulltext_index(pid)

    client = tenant.client(tenant.read_key)
    # the chunks have no search text yet: the title's word is nowhere in the rebuilt index
    tenancy.project_fulltext_ensure(pid)
    assert search(client, pid, query="Zanzibar", mode="fulltext").json()["items"] == []

    call_command("reindex_chunks", "--project", pid)
    found = search(client, pid, query="Zanzibar", mode="fulltext").json()["items"]
    assert [i["document_name"] for i in found] == ["Zanzibar spice trade"]
    after = graph.read(
        "MATCH (c:Chunk {project_id: $p}) RETURN c.search_text AS s, c.embedding AS e ORDER BY c.id", p=pid
    )
    assert all(r["s"] for r in after)
    expected = embedder.embed([r["s"] for r in after])
    assert all(
        max(abs(a - b) for a, b in zip(r["e"], v, strict=True)) < 1e-5
        for r, v in zip(after, expected, strict=True)
    )

    settings.RETRIEVAL_FULLTEXT_ANALYZER = "standard-no-stop-words"
    call_command("reindex_chunks", "--project", pid, "--no-embeddings")
    tenancy.project_fulltext_ensure(pid)
    analyzer = graph.read(
        "SHOW FULLTEXT INDEXES YIELD name, options WHERE name = $n "
        "RETURN options.indexConfig.`fulltext.analyzer` AS a",
        n=tenancy.chunk_fulltext_index(pid),
    )
    assert analyzer == [{"a": "standard-no-stop-words"}]
    found = search(client, pid, query="Zanzibar", mode="fulltext").json()["items"]
    assert [i["document_name"] for i in found] == ["Zanzibar spice trade"]
