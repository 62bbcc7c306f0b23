"""GET /api/v1/projects/{pid}/chunks/{chunk_id}: one chunk's text, never another project's."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from core import graph
from knowledge.dto import DocumentInput
from tests.conftest import Tenant
from tests.retrieval.helpers import ingest_now

pytestmark = pytest.mark.django_db

TEXT = "The Analytical Engine had a mill and a store. Ada Lovelace wrote its first program."


def _chunks(project_id: str) -> list[dict]:
    return graph.read(
        "MATCH (c:Chunk {project_id: $p}) RETURN c.id AS chunk_id, c.document_id AS document_id, "
        "c.index AS index, c.text AS text ORDER BY c.index",
        p=project_id,
    )


@pytest.fixture
def chunk_of_a(tenant_a: Tenant) -> dict:
    ingest_now(tenant_a.project.id, [DocumentInput(title="Engines", text=TEXT)])
    chunks = _chunks(tenant_a.project.id)
    assert len(chunks) == 1
    return chunks[0]


def _url(project_id: str, chunk_id: str) -> str:
    return f"/api/v1/projects/{project_id}/chunks/{chunk_id}"


def test_chunk_is_returned_with_its_document_name(tenant_a: Tenant, chunk_of_a: dict) -> None:
    response = tenant_a.client(tenant_a.read_key).get(_url(tenant_a.project.id, chunk_of_a["chunk_id"]))
    assert response.status_code == 200, response.content
    assert response.json() == {**chunk_of_a, "document_name": "Engines"}
    assert response.json()["text"] == TEXT


def test_staff_session_reads_any_projects_chunk(
    django_user_model, tenant_a: Tenant, chunk_of_a: dict
) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import Permission

    curator = django_user_model.objects.create_user("curator", password="pw", is_staff=True)
    client = APIClient()
    client.force_login(curator)
    assert client.get(_url(tenant_a.project.id, chunk_of_a["chunk_id"])).status_code == 403
    curator.user_permissions.add(Permission.objects.get(codename="api_read"))
    client.force_login(django_user_model.objects.get(pk=curator.pk))
    response = client.get(_url(tenant_a.project.id, chunk_of_a["chunk_id"]))
    assert response.status_code == 200
    assert response.json()["chunk_id"] == chunk_of_a["chunk_id"]


def test_unknown_chunk_is_404(tenant_a: Tenant, chunk_of_a: dict) -> None:
    response = tenant_a.client(tenant_a.read_key).get(_url(tenant_a.project.id, "no-such-chunk"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_another_projects_chunk_is_404(tenant_a: Tenant, tenant_b: Tenant, chunk_of_a: dict) -> None:
    chunk_id = chunk_of_a["chunk_id"]
    # tenant B's key on tenant A's project: the project does not exist for it
    through_a = tenant_b.client(tenant_b.read_key).get(_url(tenant_a.project.id, chunk_id))
    assert through_a.status_code == 404
    assert response_message(through_a) == "project not found"
    # tenant B's key on its own project with tenant A's chunk id: the chunk does not exist there
    through_b = tenant_b.client(tenant_b.read_key).get(_url(tenant_b.project.id, chunk_id))
    assert through_b.status_code == 404
    assert response_message(through_b) == "chunk not found"
    assert chunk_of_a["text"] not in through_a.content.decode() + through_b.content.decode()


def test_chunk_needs_a_key(tenant_a: Tenant, chunk_of_a: dict) -> None:
    response = APIClient().get(_url(tenant_a.project.id, chunk_of_a["chunk_id"]))
    assert response.status_code == 401


def response_message(response) -> str:  # type: ignore[no-untyped-def]
    return response.json()["error"]["message"]
