"""Bad input and tenancy for every memory endpoint: the documented error, and nothing written."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from core import graph
from tests.conftest import make_tenant
from tests.memory.helpers import forget, memory_nodes, msearch, store, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenant():  # type: ignore[no-untyped-def]
    return make_tenant("mem-bad")


def _nothing_written(pid: str) -> None:
    assert memory_nodes(pid) == 0


@pytest.mark.parametrize(
    "scope",
    [
        {},
        {"user_id": None},
        {"user_id": ""},
        {"user_id": "   "},
        {"tenant": "x"},
        {"user_id": 5},
        {"user_id": "a" * 300},
    ],
)
def test_store_without_a_valid_scope_is_400(tenant, scope) -> None:  # type: ignore[no-untyped-def]
    response = store(tenant.client(tenant.write_key), tenant.project.id, [user("hello")], **scope)
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["code"] == "invalid_input"
    _nothing_written(tenant.project.id)


def test_every_set_operation_requires_a_scope(tenant) -> None:  # type: ignore[no-untyped-def]
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(client, pid, [user("keep me")], user_id="u")
    before = memory_nodes(pid)
    assert msearch(client, pid, "keep", {}).status_code == 400
    assert client.get(f"/api/v1/projects/{pid}/memories").status_code == 400
    assert forget(client, pid).status_code == 400
    for action in ("summarize", "consolidate"):
        response = client.post(f"/api/v1/projects/{pid}/memories:{action}", {"scope": {}}, format="json")
        assert response.status_code == 400, action
    assert memory_nodes(pid) == before


def _b64(values: list[float]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [], "scope": {"user_id": "u"}},
        {"messages": "hello", "scope": {"user_id": "u"}},
        {"messages": [{"text": "no role"}], "scope": {"user_id": "u"}},
        {"messages": [{"role": "user"}], "scope": {"user_id": "u"}},
        {"messages": [{"role": "user", "text": "x", "extra": 1}], "scope": {"user_id": "u"}},
        {"messages": [{"role": "user", "text": "x", "timestamp": "yesterday"}], "scope": {"user_id": "u"}},
        {"messages": [{"role": "user", "text": "x", "embedding": [0.1, 0.2]}], "scope": {"user_id": "u"}},
        {"messages": [{"role": "user", "text": "x", "embedding": [0.0] * 384}], "scope": {"user_id": "u"}},
        # base64 embeddings: not base64, not whole float32 values, too few values, a NaN among them
        {"messages": [{"role": "user", "text": "x", "embedding": "not base64!"}], "scope": {"user_id": "u"}},
        {
            "messages": [{"role": "user", "text": "x", "embedding": "AAAA" * 383 + "AA=="}],
            "scope": {"user_id": "u"},
        },
        {
            "messages": [{"role": "user", "text": "x", "embedding": _b64([0.5, 0.5])}],
            "scope": {"user_id": "u"},
        },
        {
            "messages": [{"role": "user", "text": "x", "embedding": _b64([np.nan] + [0.1] * 383)}],
            "scope": {"user_id": "u"},
        },
        # a boolean is not a number here, though Python counts it as an int
        {
            "messages": [{"role": "user", "text": "x", "embedding": [True] + [0.1] * 383}],
            "scope": {"user_id": "u"},
        },
        {
            "messages": [{"role": "user", "text": "ok"}, {"role": "user", "text": "x", "embedding": ["a"]}],
            "scope": {"user_id": "u"},
        },
        {"messages": [{"role": "user", "text": "x"}], "scope": {"user_id": "u"}, "unknown": True},
    ],
)
def test_malformed_store_bodies_are_400_and_write_nothing(tenant, body) -> None:  # type: ignore[no-untyped-def]
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/memories", body, format="json"
    )
    assert response.status_code == 400, response.json()
    _nothing_written(tenant.project.id)


@pytest.mark.parametrize("bad", [1, 2])
def test_a_malformed_message_of_a_batch_is_named_by_its_position(tenant, bad) -> None:  # type: ignore[no-untyped-def]
    messages = [user("fine"), user("fine too"), user("and this")]
    messages[bad] = {"role": "user", "text": "x", "author_name": "a" * 300}
    response = store(tenant.client(tenant.write_key), tenant.project.id, messages, user_id="u")
    assert response.status_code == 400, response.json()
    fields = response.json()["error"]["details"]["fields"]
    assert list(fields) == [f"messages[{bad}]"] and list(fields[f"messages[{bad}]"]) == ["author_name"]
    _nothing_written(tenant.project.id)


@pytest.mark.parametrize(
    ("message", "field"),
    [
        # finite doubles that are no float32 (what is stored): 1e39 overflows, 1e-46 becomes 0
        ({"embedding": [1e39] + [0.1] * 383}, "messages[1].embedding"),
        ({"embedding": [-1e39] * 384}, "messages[1].embedding"),
        ({"embedding": [1e-46] * 384}, "messages[1].embedding"),
        ({"embedding": _b64([np.inf] + [0.1] * 383)}, "messages[1].embedding"),
        # valid ISO-8601 times outside the years 1 to 9999 once converted to UTC
        ({"timestamp": "0001-01-01T00:00:00+14:00"}, "timestamp"),
        ({"timestamp": "9999-12-31T23:59:59-14:00"}, "timestamp"),
    ],
)
def test_values_that_cannot_be_stored_are_400_and_write_nothing(tenant, message, field) -> None:  # type: ignore[no-untyped-def]
    response = store(
        tenant.client(tenant.write_key),
        tenant.project.id,
        [user("fine", embedding=[0.1] * 384), user("x", **message)],
        user_id="u",
    )
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["code"] == "invalid_input"
    assert response.json()["error"]["details"]["field"] == field
    _nothing_written(tenant.project.id)


def test_the_first_timestamps_are_stored_in_utc_and_sort_as_text(tenant) -> None:  # type: ignore[no-untyped-def]
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    early = user("early", timestamp="0001-01-02T00:00:00+14:00")
    assert (
        store(client, pid, [user("late", timestamp="2026-01-01T00:00:00Z"), early], user_id="u").status_code
        == 201
    )
    listed = client.get(f"/api/v1/projects/{pid}/memories", {"user_id": "u"}).json()["items"]
    assert [(m["text"], m["timestamp"]) for m in listed] == [
        ("late", "2026-01-01T00:00:00.000000Z"),
        ("early", "0001-01-01T10:00:00.000000Z"),
    ]


def test_ten_thousand_messages_in_one_request_is_413(tenant) -> None:  # type: ignore[no-untyped-def]
    response = store(tenant.client(tenant.write_key), tenant.project.id, [user("m")] * 10_000, user_id="u")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert response.json()["error"]["details"]["limit"] == 1000
    _nothing_written(tenant.project.id)


def test_a_one_megabyte_message_is_413(tenant) -> None:  # type: ignore[no-untyped-def]
    response = store(
        tenant.client(tenant.write_key), tenant.project.id, [user("ok"), user("x" * 1_000_000)], user_id="u"
    )
    assert response.status_code == 413
    assert response.json()["error"]["details"]["field"] == "messages[1].text"
    _nothing_written(tenant.project.id)


def test_scope_values_with_quotes_backticks_cypher_and_lucene_are_plain_values(tenant) -> None:  # type: ignore[no-untyped-def]
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    nasty = [
        "o'brien",
        'say "hi"',
        "`x` MATCH (n) DETACH DELETE n //",
        "}) RETURN 1 //",
        "text:(a OR b)~ \\",
        "*:*",
        "user_id: *",
        "🙂 ünïcode",
    ]
    for value in nasty:
        body = store(
            client, pid, [user(f"note for {len(value)}")], user_id=value, thread_id=value, agent_id=value
        )
        assert body.status_code == 201, (value, body.json())
    for value in nasty:
        for mode in ("vector", "fulltext", "hybrid", "recency"):
            query = "" if mode == "recency" else "note for"
            items = msearch(client, pid, query, {"user_id": value, "thread_id": value}, mode=mode).json()[
                "items"
            ]
            assert [i["scope"]["user_id"] for i in items] == [value], (value, mode)
        listed = client.get(f"/api/v1/projects/{pid}/memories", {"user_id": value}).json()["items"]
        assert [i["user_id"] for i in listed] == [value]
    assert graph.read("MATCH (m:Memory {project_id: $p}) RETURN count(m) AS n", p=pid)[0]["n"] == len(nasty)
    forget(client, pid, user_id="*:*")
    assert (
        graph.read("MATCH (m:Memory {project_id: $p}) RETURN count(m) AS n", p=pid)[0]["n"] == len(nasty) - 1
    )


@pytest.mark.parametrize(
    "body",
    [
        {"query": "x", "scope": {"user_id": "u"}, "top_k": 0},
        {"query": "x", "scope": {"user_id": "u"}, "top_k": 10_000},
        {"query": "x", "scope": {"user_id": "u"}, "mode": "psychic"},
        {"query": "x", "scope": {"user_id": "u"}, "depth": "everything"},
        {"query": "x" * 100_000, "scope": {"user_id": "u"}},
        {"query": "x", "scope": "u"},
    ],
)
def test_bad_search_input_is_400(tenant, body) -> None:  # type: ignore[no-untyped-def]
    response = tenant.client(tenant.read_key).post(
        f"/api/v1/projects/{tenant.project.id}/memories/search", body, format="json"
    )
    assert response.status_code == 400, response.json()


def test_list_paginates_newest_first_and_rejects_bad_parameters(tenant) -> None:  # type: ignore[no-untyped-def]
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(client, pid, [user(f"m{i}", timestamp=f"2026-05-01T10:00:{i:02d}Z") for i in range(7)], user_id="u")
    seen, cursor = [], None
    while True:
        params = {"user_id": "u", "limit": 3} | ({"cursor": cursor} if cursor else {})
        body = client.get(f"/api/v1/projects/{pid}/memories", params).json()
        seen += [i["text"] for i in body["items"]]
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert seen == [f"m{i}" for i in reversed(range(7))]
    assert client.get(f"/api/v1/projects/{pid}/memories", {"user_id": "u", "limit": 0}).status_code == 400
    assert client.get(f"/api/v1/projects/{pid}/memories", {"user_id": "u", "limit": "x"}).status_code == 400
    assert (
        client.get(f"/api/v1/projects/{pid}/memories", {"user_id": "u", "cursor": "garbage"}).status_code
        == 400
    )
    assert client.get(f"/api/v1/projects/{pid}/memories", {"user": "u"}).status_code == 400


def test_another_projects_memories_cannot_be_reached() -> None:
    a, b = make_tenant("mem-a"), make_tenant("mem-b")
    body = store(a.client(a.write_key), a.project.id, [user("tenant A secret")], user_id="shared-user").json()
    memory_id = body["stored"][0]["id"]
    other = b.client(b.write_key)
    # B's key on A's project: 404 for every endpoint
    for method, url, data in [
        (
            "post",
            f"/api/v1/projects/{a.project.id}/memories",
            {"messages": [user("x")], "scope": {"user_id": "u"}},
        ),
        ("get", f"/api/v1/projects/{a.project.id}/memories?user_id=shared-user", None),
        (
            "post",
            f"/api/v1/projects/{a.project.id}/memories/search",
            {"query": "secret", "scope": {"user_id": "shared-user"}},
        ),
        ("get", f"/api/v1/projects/{a.project.id}/memories/{memory_id}", None),
        ("delete", f"/api/v1/projects/{a.project.id}/memories/{memory_id}", None),
        ("post", f"/api/v1/projects/{a.project.id}/memories:forget", {"scope": {"user_id": "shared-user"}}),
    ]:
        response = getattr(other, method)(url, data, format="json") if data else getattr(other, method)(url)
        assert response.status_code == 404, (method, url, response.status_code)
    # B's own project with A's memory id: 404; same user id in B: nothing of A's
    assert other.get(f"/api/v1/projects/{b.project.id}/memories/{memory_id}").status_code == 404
    assert other.delete(f"/api/v1/projects/{b.project.id}/memories/{memory_id}").status_code == 404
    assert msearch(other, b.project.id, "tenant A secret", {"user_id": "shared-user"}).json()["items"] == []
    forget(other, b.project.id, user_id="shared-user")
    assert graph.read("MATCH (m:Memory {id: $id}) RETURN m.text AS t", id=memory_id) == [
        {"t": "tenant A secret"}
    ]


def test_read_keys_cannot_write_memories(tenant) -> None:  # type: ignore[no-untyped-def]
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    assert store(client, pid, [user("x")], user_id="u").status_code == 403
    assert forget(client, pid, user_id="u").status_code == 403
    assert msearch(client, pid, "x", {"user_id": "u"}).status_code == 200
    _nothing_written(pid)


def _raw_store(first_value: str) -> str:
    values = ", ".join([first_value] + ["0.1"] * 383)
    return (
        '{"messages": [{"role": "user", "text": "x", "embedding": ['
        + values
        + ']}], "scope": {"user_id": "u"}}'
    )


@pytest.mark.parametrize(
    ("raw", "charset", "code"),
    [
        (_raw_store("NaN"), None, "malformed_request"),
        (_raw_store("Infinity"), None, "malformed_request"),
        (_raw_store("1e999"), None, "malformed_request"),
        (_raw_store("1" * 400), None, "malformed_request"),
        # another charset goes through Python's json, which reads a 400-digit number as an int
        (_raw_store("1" * 400), "latin-1", "invalid_input"),
        (
            '{"messages": [{"role": "user", "text": "\\ud800"}], "scope": {"user_id": "u"}}',
            None,
            "malformed_request",
        ),
        ('{"messages": [{"role": "user", "text": "x"}', None, "malformed_request"),
    ],
)
def test_bodies_that_are_not_strict_json_of_finite_numbers_are_400(tenant, raw, charset, code) -> None:  # type: ignore[no-untyped-def]
    content_type = "application/json" + (f"; charset={charset}" if charset else "")
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/memories",
        raw.encode(charset or "utf-8"),
        content_type=content_type,
    )
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["code"] == code
    _nothing_written(tenant.project.id)
