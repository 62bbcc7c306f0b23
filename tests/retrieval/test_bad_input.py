"""Bad search input: a clear 4xx with the error envelope, never a 500, and nothing written."""

from __future__ import annotations

import pytest

from core.models import ApiKey, Job, Project
from tests.conftest import Tenant, make_tenant
from tests.retrieval.corpus import DOCS
from tests.retrieval.helpers import ingest_now, node_count, search

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus() -> Tenant:
    tenant = make_tenant("bad input")
    tenant.document_ids = ingest_now(tenant.project.id, DOCS[:3])  # type: ignore[attr-defined]
    return tenant


def _sql_rows() -> tuple[int, int, int]:
    return Project.objects.count(), ApiKey.objects.count(), Job.objects.count()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": 10_000}, "top_k"),
        ({"query": "x", "top_k": "ten"}, "top_k"),
        ({"query": "x", "mode": "semantic"}, "mode"),
        ({"query": "x" * 100_000}, "query"),
        ({"query": " " * 50_000 + "x" + " " * 50_000}, "query"),  # blanks count toward the limit
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "nul\x00byte"}, "query"),
        ({}, "query"),
        ({"query": "x", "profile": "no_such_profile"}, "profile"),
        ({"query": "x", "profile": "x') DETACH DELETE n //"}, "profile"),
        ({"query": "x", "filters": {"metadata": {"a}) DETACH DELETE n //": 1}}}, "filters"),
        ({"query": "x", "filters": {"metadata": {"lang": {"$ne": "en"}}}}, "filters"),
        ({"query": "x", "filters": {"metadata": {"lang": ["en"]}}}, "filters"),
        ({"query": "x", "filters": {"document_ids": []}}, "filters"),
        ({"query": "x", "filters": {"document_ids": "d1"}}, "filters"),
        ({"query": "x", "filters": {"owner": "me"}}, "filters"),
        ({"query": "x", "filters": "project_id = 'other'"}, "filters"),
        ({"query": "x", "order_by": "score"}, "order_by"),
        ({"query": "x", "include_context": "perhaps"}, "include_context"),
        ({"query": "x", "mode": "hybrid", "debug": True}, "debug"),  # graph mode's block only
        ({"query": "x", "mode": "graph", "debug": "loud"}, "debug"),
        ({"query": "x", "mode": "graph", "feedback": False}, "feedback"),
    ],
)
def test_bad_input_is_400_with_the_field(corpus: Tenant, body: dict, field: str) -> None:
    before_nodes, before_sql = node_count(), _sql_rows()
    response = search(corpus.client(corpus.read_key), corpus.project.id, **body)
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert field in error["details"].get("fields", {}) or error["details"].get("field") == field, error
    assert "Traceback" not in response.text
    assert node_count() == before_nodes
    assert _sql_rows() == before_sql


@pytest.mark.parametrize(
    "query",
    [
        'title:(a OR b)~ \\"',
        "MATCH (n) DETACH DELETE n",
        "'}) MATCH (n) DETACH DELETE n //",
        "$project_id } RETURN 1 UNION MATCH (c:Chunk) RETURN c",
        'AND OR NOT && || ! ( ) { } [ ] ^ " ~ * ? : \\ /',
        "*:*",
        "a" * 9_000,
        "🙂 ∑ ∂ 東京",
    ],
)
@pytest.mark.parametrize("mode", ["vector", "fulltext", "hybrid", "graph"])
def test_hostile_query_text_is_only_text(corpus: Tenant, query: str, mode: str) -> None:
    before = node_count()
    response = search(corpus.client(corpus.read_key), corpus.project.id, query=query, mode=mode, top_k=5)
    assert response.status_code == 200, response.content[:300]
    assert {i["document_id"] for i in response.json()["items"]} <= set(corpus.document_ids)  # type: ignore[attr-defined]
    assert node_count() == before


def test_lucene_match_all_does_not_match_all(corpus: Tenant) -> None:
    body = search(corpus.client(corpus.read_key), corpus.project.id, query="*:*", mode="fulltext").json()
    assert body["items"] == []


def test_write_scope_is_not_needed_and_missing_key_is_401(corpus: Tenant) -> None:
    assert search(corpus.client(corpus.read_key), corpus.project.id, query="engine").status_code == 200
    response = search(corpus.client(), corpus.project.id, query="engine")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


def test_unknown_project_is_404(corpus: Tenant) -> None:
    response = search(corpus.client(corpus.read_key), "00000000-0000-0000-0000-000000000000", query="engine")
    assert response.status_code == 404


def test_body_that_is_not_json_object(corpus: Tenant) -> None:
    client = corpus.client(corpus.read_key)
    url = f"/api/v1/projects/{corpus.project.id}/search"
    assert client.post(url, "[1, 2]", content_type="application/json").status_code == 400
    assert client.post(url, "{not json", content_type="application/json").status_code == 400
