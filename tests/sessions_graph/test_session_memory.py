"""Memory from sessions (seed 004's memory service) on the memory app's search, scoped to app and user."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Tenant
from tests.retrieval.helpers import node_count

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]


def _user(t: Tenant, app: str = "shop", user: str = "ana") -> str:
    return f"/api/v1/projects/{t.project.id}/apps/{app}/users/{user}"


def _session_with_events(t: Tenant, app: str, user: str, texts: list[tuple[str, str]]) -> str:
    client = t.client(t.write_key)
    sid = client.post(f"{_user(t, app, user)}/sessions", {}, format="json").json()["id"]
    for i, (author, text) in enumerate(texts):
        event = {
            "id": f"{sid}-e{i}",
            "author": author,
            "timestamp": 1_700_000_000.0 + i,
            "content": {"role": "user" if author == "user" else "model", "parts": [{"text": text}]},
        }
        assert (
            client.post(
                f"{_user(t, app, user)}/sessions/{sid}/events", {"event": event}, format="json"
            ).status_code
            == 201
        )
    call = {"author": "shop_agent", "content": {"parts": [{"function_call": {"name": "lookup", "args": {}}}]}}
    client.post(f"{_user(t, app, user)}/sessions/{sid}/events", {"event": call}, format="json")
    return sid


def _search(
    t: Tenant, query: str, app: str = "shop", user: str = "ana", **extra: Any
) -> list[dict[str, Any]]:
    response = t.client(t.read_key).post(
        f"{_user(t, app, user)}/memory/search", {"query": query, **extra}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()["memories"]


def test_add_session_then_search_and_readding_is_idempotent(tenant_a: Tenant) -> None:
    sid = _session_with_events(
        tenant_a,
        "shop",
        "ana",
        [
            ("user", "I am looking for red running shoes in size 39."),
            ("shop_agent", "We have the Trail Runner in red, size 39."),
        ],
    )
    client = tenant_a.client(tenant_a.write_key)
    added = client.post(f"{_user(tenant_a)}/memory", {"session_id": sid}, format="json")
    assert added.status_code == 201 and added.json() == {"stored": 2, "skipped": 1}
    again = client.post(f"{_user(tenant_a)}/memory", {"session_id": sid}, format="json")
    assert again.json() == {"stored": 0, "skipped": 3}
    found = _search(tenant_a, "running shoes size", mode="hybrid")
    assert found[0]["session_id"] == sid
    assert {m["event_id"] for m in found} == {f"{sid}-e0", f"{sid}-e1"}
    first = next(m for m in found if m["event_id"] == f"{sid}-e0")
    assert first["author"] == "user" and first["timestamp"].startswith("2023-11-14T22:13:20")
    assert {m["author"] for m in found} == {"user", "shop_agent"}
    # graph mode (hybrid spread through shared mentions) answers the same turns here
    graph_found = _search(tenant_a, "running shoes size", mode="graph")
    assert {m["event_id"] for m in graph_found} == {f"{sid}-e0", f"{sid}-e1"}


def test_memory_is_scoped_to_app_and_user(tenant_a: Tenant, tenant_b: Tenant) -> None:
    mine = _session_with_events(tenant_a, "shop", "ana", [("user", "My parcel to Lisbon is late.")])
    other_user = _session_with_events(tenant_a, "shop", "bob", [("user", "My parcel to Lisbon is late too.")])
    other_app = _session_with_events(tenant_a, "bank", "ana", [("user", "A parcel to Lisbon with cards.")])
    client = tenant_a.client(tenant_a.write_key)
    client.post(f"{_user(tenant_a, 'shop', 'ana')}/memory", {"session_id": mine}, format="json")
    client.post(f"{_user(tenant_a, 'shop', 'bob')}/memory", {"session_id": other_user}, format="json")
    client.post(f"{_user(tenant_a, 'bank', 'ana')}/memory", {"session_id": other_app}, format="json")
    found = _search(tenant_a, "parcel Lisbon", mode="fulltext")
    assert [m["session_id"] for m in found] == [mine]
    # another project cannot reach it, and its own space is empty
    b = tenant_b.client(tenant_b.read_key)
    assert b.post(f"{_user(tenant_a)}/memory/search", {"query": "parcel"}, format="json").status_code == 404
    assert _search(tenant_b, "parcel Lisbon", mode="fulltext") == []


def test_add_events_and_free_memories_then_delete(tenant_a: Tenant) -> None:
    client = tenant_a.client(tenant_a.write_key)
    events = [
        {"id": "x1", "author": "user", "content": {"parts": [{"text": "I prefer window seats on trains."}]}}
    ]
    assert client.post(
        f"{_user(tenant_a)}/memory", {"events": events, "session_id": "s9"}, format="json"
    ).json() == {
        "stored": 1,
        "skipped": 0,
    }
    free = client.post(
        f"{_user(tenant_a)}/memory", {"memories": [{"text": "Ana's loyalty number is 4411."}]}, format="json"
    )
    assert free.status_code == 201 and free.json()["stored"] == 1
    assert len(_search(tenant_a, "window seats loyalty", mode="fulltext")) == 2
    one = client.delete(f"{_user(tenant_a)}/memory?session_id=s9")
    assert one.status_code == 200 and one.json()["erased"]["memories"] == 1
    assert [m["text"] for m in _search(tenant_a, "window seats loyalty", mode="fulltext")] == [
        "Ana's loyalty number is 4411."
    ]
    everything = client.delete(f"{_user(tenant_a)}/memory")
    assert everything.json()["erased"]["memories"] == 1
    assert _search(tenant_a, "window seats loyalty", mode="fulltext") == []


def test_delete_one_memory_by_id_only_in_its_scope(tenant_a: Tenant, tenant_b: Tenant) -> None:
    client = tenant_a.client(tenant_a.write_key)
    client.post(f"{_user(tenant_a)}/memory", {"memories": [{"text": "Ana likes oat milk."}]}, format="json")
    client.post(
        f"{_user(tenant_a, user='bob')}/memory",
        {"memories": [{"text": "Bob likes oat milk."}]},
        format="json",
    )
    [mine] = _search(tenant_a, "oat milk", mode="fulltext")
    [bobs] = _search(tenant_a, "oat milk", user="bob", mode="fulltext")
    # bob's id under ana's path, or under another app, or from another project: not found, nothing erased
    assert client.delete(f"{_user(tenant_a)}/memory/{bobs['id']}").status_code == 404
    assert client.delete(f"{_user(tenant_a, app='bank')}/memory/{mine['id']}").status_code == 404
    b = tenant_b.client(tenant_b.write_key)
    assert b.delete(f"{_user(tenant_a)}/memory/{mine['id']}").status_code == 404
    assert b.delete(f"{_user(tenant_b)}/memory/{mine['id']}").status_code == 404
    assert len(_search(tenant_a, "oat milk", user="bob", mode="fulltext")) == 1
    gone = client.delete(f"{_user(tenant_a)}/memory/{mine['id']}")
    assert gone.status_code == 200 and gone.json()["erased"]["memories"] == 1
    assert _search(tenant_a, "oat milk", mode="fulltext") == []
    assert len(_search(tenant_a, "oat milk", user="bob", mode="fulltext")) == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"events": [], "memories": []},
        {"memories": [{"text": "x"}], "session_id": "s"},
        {"memories": [{"text": ""}]},
        {"events": [{"author": "u", "timestamp": "noon", "content": {"parts": [{"text": "x"}]}}]},
        {"session_id": "no-such-session"},
    ],
)
def test_bad_memory_requests_write_nothing(tenant_a: Tenant, body: dict[str, Any]) -> None:
    before = node_count()
    response = tenant_a.client(tenant_a.write_key).post(f"{_user(tenant_a)}/memory", body, format="json")
    assert response.status_code in (400, 404), response.content
    assert node_count() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # ADK's MemoryEntry: author and timestamp are strings, the text has no NUL (nothing coerced)
        ({"memories": [{"text": "x", "author": {"name": "ana"}}]}, "memories"),
        ({"memories": [{"text": "x", "author": 7}]}, "memories"),
        ({"memories": [{"text": "x", "timestamp": 1_700_000_000}]}, "memories"),
        ({"memories": [{"text": "x", "timestamp": "0001-01-01T00:00:00+14:00"}]}, "memories"),
        ({"memories": [{"text": "x", "timestamp": "9999-12-31T23:59:59-14:00"}]}, "memories"),
        ({"memories": [{"text": "ok"}, {"text": "bad\x00text"}]}, "memories"),
        ({"memories": [{"text": "x", "extra": 1}]}, "memories"),
        ({"memories": ["just text"]}, "memories"),
        # events given for memory: the same rules as appended events, and no NUL in their text
        ({"events": [{"author": {"a": 1}, "content": {"parts": [{"text": "x"}]}}]}, "events"),
        ({"events": [{"author": "u", "timestamp": 1e20, "content": {"parts": [{"text": "x"}]}}]}, "events"),
        ({"events": [{"author": "u", "content": {"parts": [{"text": "a\x00b"}]}}]}, "events"),
        ({"events": [{"author": "u", "content": {"parts": 3}}]}, "events"),
    ],
)
def test_memory_items_with_wrong_types_or_nul_are_400(
    tenant_a: Tenant, body: dict[str, Any], field: str
) -> None:
    before = node_count()
    response = tenant_a.client(tenant_a.write_key).post(f"{_user(tenant_a)}/memory", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert field in error["details"]["fields"]
    assert node_count() == before


def test_memory_item_timestamps_are_stored_in_utc(tenant_a: Tenant) -> None:
    client = tenant_a.client(tenant_a.write_key)
    item = {"text": "Ana flew to Porto.", "author": "user", "timestamp": "0001-01-02T00:00:00+14:00"}
    assert client.post(f"{_user(tenant_a)}/memory", {"memories": [item]}, format="json").status_code == 201
    [found] = _search(tenant_a, "Porto", mode="fulltext")
    assert found["timestamp"] == "0001-01-01T10:00:00.000000Z"


@pytest.mark.parametrize(
    "query",
    ["", "   ", "x" * 10_001, " " * 6_000 + "parcel" + " " * 6_000, "a\x00b"],
)
def test_bad_memory_search_queries_are_400(tenant_a: Tenant, query: str) -> None:
    """Blank, too long (blanks around a short query count toward the limit), or with NUL."""
    response = tenant_a.client(tenant_a.read_key).post(
        f"{_user(tenant_a)}/memory/search", {"query": query}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "query" in response.json()["error"]["details"]["fields"]
