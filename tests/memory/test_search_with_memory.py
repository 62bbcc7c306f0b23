"""`POST …/search:with-memory`: the knowledge search and the memory search of one query in one
request, on the real stack; bad input and the tenant boundary."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.dto import DocumentInput
from tests.conftest import Tenant
from tests.memory.helpers import assistant, msearch, store, user
from tests.retrieval.helpers import ingest_now, search

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]


def _both(client: Any, project_id: str, **body: Any) -> Any:
    return client.post(f"/api/v1/projects/{project_id}/search:with-memory", body, format="json")


def _stocked(t: Tenant) -> None:
    ingest_now(
        t.project.id,
        [
            DocumentInput(
                title="Lisbon trams", text="Tram 28 climbs through Alfama to the castle in Lisbon."
            ),
            DocumentInput(title="Porto wine", text="Port wine cellars line the river in Vila Nova de Gaia."),
        ],
    )
    stored = store(
        t.client(t.write_key),
        t.project.id,
        [user("I loved the tram ride to the castle in Lisbon."), assistant("Tram 28 is a classic.")],
        user_id="ana",
        thread_id="trip",
    )
    assert stored.status_code == 201, stored.content
    other = store(
        t.client(t.write_key),
        t.project.id,
        [user("Bob's tram notes about Lisbon")],
        user_id="bob",
        thread_id="b",
    )
    assert other.status_code == 201, other.content


@pytest.mark.parametrize(
    ("mode", "memory_mode"), [("hybrid", None), ("fulltext", "vector"), ("vector", "fulltext")]
)
def test_one_request_answers_as_the_two_searches_do(
    tenant_a: Tenant, mode: str, memory_mode: str | None
) -> None:
    _stocked(tenant_a)
    client, pid = tenant_a.client(tenant_a.read_key), tenant_a.project.id
    query = "tram to the castle in Lisbon"
    memory_part: dict[str, Any] = {"scope": {"user_id": "ana"}, "top_k": 3, "depth": "messages"}
    if memory_mode:
        memory_part["mode"] = memory_mode
    response = _both(client, pid, query=query, mode=mode, top_k=2, memory=memory_part)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"knowledge", "memory", "took_ms"} and body["took_ms"] > 0
    alone = search(client, pid, query=query, mode=mode, top_k=2).json()
    assert [i["chunk_id"] for i in body["knowledge"]["items"]] == [i["chunk_id"] for i in alone["items"]]
    assert body["knowledge"]["items"][0]["document_name"] == "Lisbon trams"
    scores = [round(i["score"], 6) for i in body["knowledge"]["items"]]
    assert scores == [round(i["score"], 6) for i in alone["items"]]
    extra = {"mode": memory_mode} if memory_mode else {}
    memories = msearch(client, pid, query, {"user_id": "ana"}, top_k=3, **extra).json()
    assert [i["id"] for i in body["memory"]["items"]] == [i["id"] for i in memories["items"]]
    assert body["memory"]["items"] and all(i["scope"]["user_id"] == "ana" for i in body["memory"]["items"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "tram", "memory": {"scope": {}}}, "scope"),  # an empty scope
        ({"query": "tram", "memory": {"scope": {"user_id": "ana"}, "query": "other"}}, "query"),
        ({"query": "tram", "memory": {"scope": {"user_id": "ana"}, "top_k": 0}}, "top_k"),
        ({"query": "tram", "memory": {"scope": {"user_id": "ana"}, "since": "not a time"}}, "since"),
        ({"query": "tram", "mode": "nope", "memory": {"scope": {"user_id": "ana"}}}, "mode"),
        ({"query": "", "memory": {"scope": {"user_id": "ana"}}}, "query"),
        ({"query": "tram"}, "memory"),
        ({"query": "tram", "memory": "ana"}, "memory"),
    ],
)
def test_bad_input_is_400_naming_the_field(tenant_a: Tenant, body: dict[str, Any], field: str) -> None:
    response = _both(tenant_a.client(tenant_a.read_key), tenant_a.project.id, **body)
    assert response.status_code == 400, response.content
    assert field in response.content.decode()


def test_another_projects_id_is_404_and_a_key_without_read_is_refused(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    _stocked(tenant_a)
    body = {"query": "tram", "memory": {"scope": {"user_id": "ana"}}}
    crossed = _both(tenant_b.client(tenant_b.read_key), tenant_a.project.id, **body)
    assert crossed.status_code == 404
    assert "Lisbon" not in crossed.content.decode()
    assert _both(tenant_a.client(), tenant_a.project.id, **body).status_code == 401
