"""The cached project size (retrieval.retrievers.scope_size) steers exact scan against index only: a
project searched while empty finds its first chunks at once, not after the cache lapses."""

from __future__ import annotations

import pytest

from knowledge.dto import DocumentInput
from retrieval.retrievers import forget_scope_sizes
from tests.conftest import Tenant
from tests.retrieval.helpers import ingest_now, search

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_a_project_searched_while_empty_finds_its_first_chunks_at_once(tenant_a: Tenant, mode: str) -> None:
    forget_scope_sizes()
    client = tenant_a.client(tenant_a.read_key)
    empty = search(client, tenant_a.project.id, query="glacier valleys", mode=mode)
    assert empty.status_code == 200 and empty.json()["items"] == []
    ingest_now(tenant_a.project.id, [DocumentInput(title="Ice", text="Glaciers carve deep valleys.")])
    found = search(client, tenant_a.project.id, query="glacier valleys", mode=mode)
    assert found.status_code == 200
    assert [item["document_name"] for item in found.json()["items"]][:1] == ["Ice"], found.json()
