"""A project whose vectors come from another embedder than the configured one: 409 `conflict` on
every write and vector read that would mix the two (docs/api.md), and nothing written."""

from __future__ import annotations

import pytest

from core.models import Job, Project
from tests.conftest import Tenant, make_tenant
from tests.knowledge.helpers import graph_counts, post_document
from tests.memory.helpers import forget, memory_nodes, store, user

pytestmark = pytest.mark.django_db

OTHER = "openai:text-embedding-3-large"


@pytest.fixture
def tenant() -> Tenant:
    """A project created under another embedder (3,072 dims) than the suite's local MiniLM."""
    tenant = make_tenant("other embedder")
    Project.objects.filter(pk=tenant.project.id).update(embedder=OTHER, embedding_dimensions=3072)
    return tenant


def _assert_conflict(response) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert error["details"] == {"project_embedder": OTHER, "configured": "local:all-MiniLM-L6-v2"}
    assert "3072 dims" in error["message"] and "384 dims" in error["message"]


def test_ingestion_under_another_embedder_is_409_and_writes_nothing(tenant: Tenant) -> None:
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _assert_conflict(post_document(client, pid, title="Babbage", text="Charles Babbage designed engines."))
    _assert_conflict(
        client.post(
            f"/api/v1/projects/{pid}/documents",
            {"documents": [{"title": f"d{i}", "text": f"Text number {i}."} for i in range(3)]},
            format="json",
        )
    )
    assert not Job.objects.filter(project_id=pid).exists()
    assert set(graph_counts(pid).values()) == {0}


def test_memory_store_under_another_embedder_is_409_and_writes_nothing(tenant: Tenant) -> None:
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _assert_conflict(store(client, pid, [user("I live in Lisbon and like green tea.")], user_id="u1"))
    assert memory_nodes(pid) == 0
    assert not Job.objects.filter(project_id=pid).exists()


def test_vector_searches_are_409_and_fulltext_still_answers(tenant: Tenant) -> None:
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    for mode in ("vector", "hybrid"):
        _assert_conflict(
            client.post(f"/api/v1/projects/{pid}/search", {"query": "engines", "mode": mode}, format="json")
        )
    fulltext = client.post(
        f"/api/v1/projects/{pid}/search", {"query": "engines", "mode": "fulltext"}, format="json"
    )
    assert fulltext.status_code == 200, fulltext.content
    _assert_conflict(client.post("/retrieve", {"query": "engines", "project_id": pid}, format="json"))


def test_forgetting_memories_is_not_blocked_by_the_embedder(tenant: Tenant) -> None:
    """Erasure reads no vector: a project under another embedder can still forget a user."""
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    Project.objects.filter(pk=pid).update(embedder="local:all-MiniLM-L6-v2", embedding_dimensions=384)
    assert store(client, pid, [user("My name is Ana and I live in Porto.")], user_id="ana").status_code == 201
    assert memory_nodes(pid) > 0
    Project.objects.filter(pk=pid).update(embedder=OTHER, embedding_dimensions=3072)
    response = forget(client, pid, user_id="ana")
    assert response.status_code == 200, response.content
    assert memory_nodes(pid) == 0
