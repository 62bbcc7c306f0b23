"""POST /api/v1/projects/{pid}/search on the real stack: every mode, filters, context, profiles."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from tests.conftest import Tenant, make_tenant
from tests.retrieval.corpus import DOCS, LONG
from tests.retrieval.helpers import ingest_now, search

pytestmark = pytest.mark.django_db

MODES = ["vector", "fulltext", "hybrid", "graph"]


@pytest.fixture
def corpus() -> tuple[Tenant, dict[str, str]]:
    tenant = make_tenant("search")
    ids = ingest_now(tenant.project.id, DOCS)
    return tenant, {doc.title: doc_id for doc, doc_id in zip(DOCS, ids, strict=True)}


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_finds_the_right_document(corpus, mode: str) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = corpus
    response = search(
        tenant.client(tenant.read_key),
        tenant.project.id,
        query="Who wrote the first algorithm for the Analytical Engine?",
        mode=mode,
        top_k=3,
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["mode"] == mode
    assert body["took_ms"] > 0
    items = body["items"]
    assert 1 <= len(items) <= 3
    assert items[0]["document_id"] == ids["Lovelace"]
    assert items[0]["document_name"] == "Lovelace"
    assert "first algorithm" in items[0]["text"]
    assert items[0]["metadata"]["source_path"] == "history/computing/lovelace.md"
    assert items[0]["metadata"]["document_metadata"] == {"lang": "en", "year": 1843}
    scores = [i["score"] for i in items]
    assert scores == sorted(scores, reverse=True)
    assert len({i["chunk_id"] for i in items}) == len(items)


def test_vector_search_understands_meaning_without_shared_words(corpus) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = corpus
    client = tenant.client(tenant.read_key)
    body = search(
        client, tenant.project.id, query="fermented loaf made with natural leaven", mode="vector", top_k=1
    ).json()
    assert body["items"][0]["document_id"] == ids["Sourdough"]
    assert "embedding" in body["timings_ms"]
    # fulltext finds nothing for words that appear nowhere, and says so with an empty list
    empty = search(client, tenant.project.id, query="zeppelin quasar", mode="fulltext").json()
    assert empty["items"] == []


def test_top_k_limits_and_hybrid_covers_both_retrievers(corpus) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = corpus
    client = tenant.client(tenant.read_key)
    body = search(client, tenant.project.id, query="ice valleys moraines", mode="hybrid", top_k=2).json()
    assert len(body["items"]) == 2
    assert body["items"][0]["document_id"] == ids["Glaciers"]
    assert {"vector", "fulltext", "hybrid"} <= set(body["timings_ms"])
    everything = search(
        client, tenant.project.id, query="engine bread ice magma", mode="hybrid", top_k=100
    ).json()
    assert {i["document_id"] for i in everything["items"]} == set(ids.values())


def test_include_context_formats_seed_000_blocks(corpus) -> None:  # type: ignore[no-untyped-def]
    tenant, _ids = corpus
    body = search(
        tenant.client(tenant.read_key),
        tenant.project.id,
        query="sourdough starter",
        mode="fulltext",
        top_k=2,
        include_context=True,
    ).json()
    blocks = body["context"].split("\n\n")
    assert len(blocks) == len(body["items"])
    first = body["items"][0]
    assert blocks[0] == f"[Score: {first['score']:.3f}] [document: {first['document_name']}]\n{first['text']}"
    assert "context" not in search(tenant.client(tenant.read_key), tenant.project.id, query="bread").json()


@pytest.mark.parametrize("mode", MODES)
def test_filters_narrow_every_mode(corpus, mode: str) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = corpus
    client = tenant.client(tenant.read_key)
    query = "glaciers gletscher ice snow volcano magma"

    def docs(**filters: object) -> set[str]:
        response = search(client, tenant.project.id, query=query, mode=mode, top_k=10, filters=filters)
        assert response.status_code == 200, response.json()
        return {i["document_id"] for i in response.json()["items"]}

    assert docs(document_ids=[ids["Volcanoes"]]) == {ids["Volcanoes"]}
    assert docs(source_path_prefix="science/earth/") <= {ids["Glaciers"], ids["Gletscher"], ids["Volcanoes"]}
    assert ids["Glaciers"] in docs(source_path_prefix="science/earth/")
    # no query word occurs in the bread document: fulltext finds nothing there, the others find it
    assert docs(source_path_prefix="kitchen") == (set() if mode == "fulltext" else {ids["Sourdough"]})
    assert docs(metadata={"lang": "de"}) == {ids["Gletscher"]}
    assert docs(metadata={"lang": "en", "year": 2019}) == {ids["Glaciers"]}
    assert docs(metadata={"year": 2019.0}) == {ids["Glaciers"], ids["Gletscher"]}
    assert docs(metadata={"year": "2019"}) == set()  # a string is not the number
    assert docs(source_path_prefix="science/earth", metadata={"lang": "fr"}) == set()
    assert docs(document_ids=["00000000-0000-0000-0000-000000000000"]) == set()


def test_a_filter_on_another_projects_document_leaks_nothing(corpus) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = corpus
    other = make_tenant("other")
    other_ids = ingest_now(other.project.id, [replace(DOCS[0], title="Other Lovelace")])
    client = tenant.client(tenant.read_key)
    for mode in MODES:
        body = search(
            client,
            tenant.project.id,
            query="Analytical Engine",
            mode=mode,
            filters={"document_ids": other_ids},
        ).json()
        assert body["items"] == [], mode
    # and without filters, the other project's copy of the same text never shows up
    for mode in MODES:
        body = search(
            client, tenant.project.id, query="Analytical Engine algorithm", mode=mode, top_k=100
        ).json()
        found = {i["document_id"] for i in body["items"]}
        assert ids["Lovelace"] in found, mode
        assert found <= set(ids.values()), mode
    # the other project's key cannot search this project at all
    assert search(other.client(other.read_key), tenant.project.id, query="engine").status_code == 404
    assert search(tenant.client(), tenant.project.id, query="engine").status_code == 401


def test_profiles_enrich_hits(corpus) -> None:  # type: ignore[no-untyped-def]
    tenant, _ids = corpus
    client = tenant.client(tenant.read_key)
    long_project = make_tenant("long")
    from core.models import Project

    Project.objects.filter(pk=long_project.project.id).update(chunk_size_tokens=40, chunk_overlap_tokens=0)
    ingest_now(long_project.project.id, [LONG])
    long_client = long_project.client(long_project.read_key)

    plain = search(
        long_client, long_project.project.id, query="telescope of year 1800", mode="fulltext", top_k=1
    ).json()
    enriched = search(
        long_client,
        long_project.project.id,
        query="telescope of year 1800",
        mode="fulltext",
        top_k=1,
        profile="document_context",
        include_context=True,
    ).json()
    assert enriched["profile"] == {"name": "document_context", "version": 1}
    hit, base = enriched["items"][0], plain["items"][0]
    assert hit["chunk_id"] == base["chunk_id"]
    assert base["text"] in hit["text"] and len(hit["text"]) > len(base["text"])  # neighbours around it
    assert hit["metadata"]["document_title"] == "Telescope history"
    assert hit["metadata"]["chunk_index"] == base["metadata"]["chunk_index"]
    assert enriched["context"].startswith(
        f"[Score: {hit['score']:.3f}] [document: Telescope history] [document_title: Telescope history] [chunk_index: "
    )

    body = search(
        client,
        tenant.project.id,
        query="Ada Lovelace Analytical Engine",
        mode="hybrid",
        top_k=2,
        profile="entity_neighbourhood",
    ).json()
    top = body["items"][0]
    assert any("Analytical Engine" in e for e in top["metadata"]["entities"])
    assert top["metadata"]["related_entities"]
    assert all(" - " in r for r in top["metadata"]["relations"])


def test_profile_rows_stay_in_the_project(corpus) -> None:  # type: ignore[no-untyped-def]
    """A profile only sees the hits of this project: enrichment of another project's chunk id
    (smuggled in as a candidate) yields nothing."""
    from retrieval.dto import Candidate
    from retrieval.selectors import profile_get
    from retrieval.services import _enrich

    tenant, _ids = corpus
    other = make_tenant("other")
    ingest_now(other.project.id, [DOCS[2]])
    from core import graph

    foreign = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.id AS id", p=other.project.id)[0]["id"]
    for profile in (None, profile_get(name="document_context", project_id=tenant.project.id)):
        assert _enrich(tenant.project.id, [Candidate(chunk_id=foreign, score=1.0)], profile) == []


def test_took_ms_and_score_formats(corpus) -> None:  # type: ignore[no-untyped-def]
    tenant, _ids = corpus
    body = search(
        tenant.client(tenant.read_key), tenant.project.id, query="bread", mode="vector", include_context=True
    ).json()
    assert all(re.match(r"^\[Score: \d\.\d{3}\] ", block) for block in body["context"].split("\n\n"))
    assert all(0.0 <= i["score"] <= 1.0 for i in body["items"])
