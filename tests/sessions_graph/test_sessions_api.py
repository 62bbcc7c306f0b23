"""Sessions graph API on the real stack (seed 004): sessions, ordered events, state scopes, tool
calls, optimistic locking, cascade delete, listing, lineage; bad input and tenant boundaries."""

from __future__ import annotations

import base64
import threading
import time
from typing import Any
from urllib.parse import quote

import pytest

from core import graph
from tests.conftest import Tenant
from tests.retrieval.helpers import node_count

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]


def _base(t: Tenant, app: str = "app1", user: str = "u1") -> str:
    return f"/api/v1/projects/{t.project.id}/apps/{app}/users/{user}/sessions"


def _create(t: Tenant, **body: Any) -> dict[str, Any]:
    response = t.client(t.write_key).post(_base(t), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _event(
    author: str = "user", text: str = "hi", delta: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "author": author,
        "content": {"role": author, "parts": [{"text": text}]},
        **extra,
    }
    if delta is not None:
        event["actions"] = {"state_delta": delta}
    return event


def _append(t: Tenant, sid: str, event: dict[str, Any], expected: int | None = None, **headers: str) -> Any:
    body: dict[str, Any] = {"event": event}
    if expected is not None:
        body["expected_revision"] = expected
    return t.client(t.write_key).post(f"{_base(t)}/{sid}/events", body, format="json", **headers)


def _get(t: Tenant, sid: str, query: str = "") -> Any:
    return t.client(t.read_key).get(f"{_base(t)}/{sid}{query}")


def test_create_get_with_initial_state_and_client_id(tenant_a: Tenant) -> None:
    session = _create(
        tenant_a, session_id="s-1", state={"topic": "x", "app:theme": "dark", "user:lang": "en", "temp:t": 1}
    )
    assert session["id"] == "s-1"
    assert session["state"] == {"topic": "x", "app:theme": "dark", "user:lang": "en"}
    got = _get(tenant_a, "s-1").json()
    assert got["state"] == session["state"] and got["events"] == []
    again = tenant_a.client(tenant_a.write_key).post(_base(tenant_a), {"session_id": "s-1"}, format="json")
    assert again.status_code == 409
    generated = _create(tenant_a)
    assert generated["id"] and generated["id"] != "s-1"


def test_events_are_ordered_and_state_scopes_apply(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    for i in range(5):
        r = _append(
            tenant_a,
            sid,
            _event(text=f"m{i}", delta={"n": i, "temp:scratch": i, "app:hits": i, "user:seen": True}),
        )
        assert r.status_code == 201, r.content
    session = _get(tenant_a, sid).json()
    assert [e["content"]["parts"][0]["text"] for e in session["events"]] == [f"m{i}" for i in range(5)]
    assert session["state"] == {"n": 4, "app:hits": 4, "user:seen": True}
    assert all("temp:scratch" not in e["actions"]["state_delta"] for e in session["events"])
    # a linear NEXT chain of 5 events, no fork
    chain = graph.read(
        "MATCH (s:Session {session_id: $sid, project_id: $p})<-[:OF_SESSION]-(e:Event) "
        "RETURN count(e) AS events, sum(COUNT { (e)-[:NEXT]->() }) AS nexts, "
        "max(COUNT { (e)-[:NEXT]->() }) AS out, max(COUNT { ()-[:NEXT]->(e) }) AS inc",
        sid=sid,
        p=tenant_a.project.id,
    )[0]
    assert chain == {"events": 5, "nexts": 4, "out": 1, "inc": 1}
    # app: and user: state is shared by the user's other sessions; session state is not
    other = _create(tenant_a)
    assert other["state"] == {"app:hits": 4, "user:seen": True}


def test_get_loads_only_the_asked_events(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    for i in range(30):
        _append(tenant_a, sid, _event(text=f"m{i}", timestamp=1000.0 + i))
    recent = _get(tenant_a, sid, "?num_recent_events=3").json()["events"]
    assert [e["content"]["parts"][0]["text"] for e in recent] == ["m27", "m28", "m29"]
    after = _get(tenant_a, sid, "?after_timestamp=1025.0").json()["events"]  # inclusive, as in ADK
    assert [e["timestamp"] for e in after] == [1025.0, 1026.0, 1027.0, 1028.0, 1029.0]
    both = _get(tenant_a, sid, "?num_recent_events=10&after_timestamp=1027.5").json()["events"]
    assert [e["timestamp"] for e in both] == [1028.0, 1029.0]
    assert _get(tenant_a, sid, "?num_recent_events=0").json()["events"] == []


def test_stale_writer_gets_409_and_nothing_is_written(tenant_a: Tenant) -> None:
    session = _create(tenant_a)
    sid, seen = session["id"], session["revision"]
    first = _append(tenant_a, sid, _event(text="first", delta={"k": 1}), expected=seen)
    assert first.status_code == 201
    before = node_count()
    stale = _append(tenant_a, sid, _event(text="stale", delta={"k": 2}), expected=seen)
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "conflict"
    assert node_count() == before
    current = _get(tenant_a, sid).json()
    assert current["state"] == {"k": 1} and len(current["events"]) == 1
    # If-Match carries the same check; the fresh value succeeds
    assert first["ETag"] == f'"{first.json()["revision"]}"'
    ok = _append(tenant_a, sid, _event(text="fresh"), HTTP_IF_MATCH=first["ETag"])
    assert ok.status_code == 201
    stale_header = _append(tenant_a, sid, _event(text="x"), HTTP_IF_MATCH=str(seen))
    assert stale_header.status_code == 409


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_appends_exactly_one_wins(tenant_a: Tenant) -> None:
    session = _create(tenant_a)
    sid, seen = session["id"], session["revision"]
    results: list[int] = []
    barrier = threading.Barrier(2)

    def writer(i: int) -> None:
        barrier.wait()
        results.append(
            _append(tenant_a, sid, _event(text=f"w{i}", delta={"who": i}), expected=seen).status_code
        )

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results) == [201, 409]
    events = _get(tenant_a, sid).json()["events"]
    assert len(events) == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_without_a_check_keep_a_linear_chain(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    barrier = threading.Barrier(4)
    statuses: list[tuple[str, int]] = []  # checked here: an assert in a writer thread fails no test

    def writer(i: int) -> None:
        barrier.wait()
        for j in range(5):
            statuses.append((f"w{i}-{j}", _append(tenant_a, sid, _event(text=f"w{i}-{j}")).status_code))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(statuses) == sorted((f"w{i}-{j}", 201) for i in range(4) for j in range(5))
    rows = graph.read(
        "MATCH (s:Session {session_id: $sid, project_id: $p})<-[:OF_SESSION]-(e:Event) "
        "RETURN collect(e.seq) AS seqs, max(COUNT { (e)-[:NEXT]->() }) AS out, "
        "sum(COUNT { (e)-[:NEXT]->() }) AS nexts",
        sid=sid,
        p=tenant_a.project.id,
    )[0]
    assert sorted(rows["seqs"]) == list(range(1, 21)) and rows["out"] == 1 and rows["nexts"] == 19


def test_tool_calls_are_nodes_linked_to_their_responses(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    call = {
        "author": "agent",
        "timestamp": 100.0,
        "content": {
            "role": "model",
            "parts": [{"function_call": {"id": "c1", "name": "get_weather", "args": {"city": "Bern"}}}],
        },
    }
    answer = {
        "author": "agent",
        "timestamp": 100.25,
        "content": {
            "role": "user",
            "parts": [{"function_response": {"id": "c1", "name": "get_weather", "response": {"temp": 3}}}],
        },
    }
    failing = {
        "author": "agent",
        "timestamp": 101.0,
        "content": {
            "role": "model",
            "parts": [{"function_call": {"id": "c2", "name": "get_weather", "args": {"city": "?"}}}],
        },
    }
    failed = {
        "author": "agent",
        "timestamp": 101.5,
        "content": {
            "role": "user",
            "parts": [
                {
                    "function_response": {
                        "id": "c2",
                        "name": "get_weather",
                        "response": {"error": "unknown city"},
                    }
                }
            ],
        },
    }
    for e in (call, answer, failing, failed):
        assert _append(tenant_a, sid, e).status_code == 201
    stats = tenant_a.client(tenant_a.read_key).get(f"{_base(tenant_a)}/{sid}/tool-calls").json()["tools"]
    assert stats == [
        {
            "name": "get_weather",
            "calls": 2,
            "responded": 2,
            "errors": 1,
            "avg_latency_ms": 375.0,
            "max_latency_ms": 500,
        }
    ]
    timeline = tenant_a.client(tenant_a.read_key).get(f"{_base(tenant_a)}/{sid}/timeline").json()["events"]
    assert timeline[0]["tool_calls"][0]["args"] == {"city": "Bern"}
    assert timeline[1]["responded_to"] == ["c1"]
    # seed 004's error_msg: the failed call's error, on its ToolCall; a call that succeeded has none
    assert [c["error_msg"] for e in timeline for c in e["tool_calls"]] == [None, "unknown city"]


def test_state_history_answers_who_changed_a_key(tenant_a: Tenant) -> None:
    sid = _create(tenant_a, state={"stage": "new"})["id"]
    _append(tenant_a, sid, _event(author="planner", delta={"stage": "planned"}, timestamp=10.0))
    _append(tenant_a, sid, _event(author="other", delta={"unrelated": 1}, timestamp=11.0))
    _append(tenant_a, sid, _event(author="executor", delta={"stage": "done"}, timestamp=12.0))
    history = (
        tenant_a.client(tenant_a.read_key)
        .get(f"{_base(tenant_a)}/{sid}/state-history?key=stage")
        .json()["changes"]
    )
    assert [(h["author"], h["from"], h["to"], h["timestamp"]) for h in history] == [
        ("planner", "new", "planned", 10.0),
        ("executor", "planned", "done", 12.0),
    ]


def test_one_burst_chains_its_events_and_records_each_state_change(tenant_a: Tenant) -> None:
    """A burst is one statement: each event links to the one before it (also the one written
    earlier in the same burst) and each state change records the value the event before left."""
    sid = _create(tenant_a, state={"stage": "new"})["id"]
    _append(tenant_a, sid, _event(delta={"stage": "first"}, timestamp=5.0))
    burst = [_event(author=f"a{i}", delta={"stage": f"s{i}"}, timestamp=10.0 + i) for i in range(4)]
    url = f"{_base(tenant_a)}/{sid}/events"
    written = tenant_a.client(tenant_a.write_key).post(url, {"events": burst}, format="json")
    assert written.status_code == 201, written.content
    history = (
        tenant_a.client(tenant_a.read_key)
        .get(f"{_base(tenant_a)}/{sid}/state-history?key=stage")
        .json()["changes"]
    )
    assert [(h["author"], h["from"], h["to"]) for h in history] == [
        ("user", "new", "first"),
        ("a0", "first", "s0"),
        ("a1", "s0", "s1"),
        ("a2", "s1", "s2"),
        ("a3", "s2", "s3"),
    ]
    chain = graph.read(
        "MATCH (s:Session {session_id: $sid, project_id: $p})<-[:OF_SESSION]-(e:Event) "
        "OPTIONAL MATCH (e)-[:NEXT]->(n:Event) "
        "WITH e, n ORDER BY e.seq RETURN collect([e.seq, n.seq]) AS links",
        sid=sid,
        p=tenant_a.project.id,
    )[0]["links"]
    assert chain == [[1, 2], [2, 3], [3, 4], [4, 5], [5, None]]
    assert _get(tenant_a, sid).json()["state"] == {"stage": "s3"}


def test_delete_cascades_but_keeps_shadow_state(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    _append(tenant_a, sid, _event(delta={"k": 1, "app:a": 1, "user:u": 1}))
    _append(
        tenant_a,
        sid,
        {"author": "agent", "content": {"parts": [{"function_call": {"id": "c", "name": "t", "args": {}}}]}},
    )
    response = tenant_a.client(tenant_a.write_key).delete(f"{_base(tenant_a)}/{sid}")
    assert response.status_code == 204
    left = graph.read(
        "MATCH (n {project_id: $p}) RETURN labels(n)[0] AS label, count(n) AS n ORDER BY label",
        p=tenant_a.project.id,
    )
    counts = {r["label"]: r["n"] for r in left}
    assert "Event" not in counts and "ToolCall" not in counts and "Session" not in counts
    assert counts.get("AppState") == 1 and counts.get("UserState") == 1
    assert _get(tenant_a, sid).status_code == 404
    assert _append(tenant_a, sid, _event()).status_code == 404
    assert tenant_a.client(tenant_a.write_key).delete(f"{_base(tenant_a)}/{sid}").status_code == 404


def test_list_pages_by_last_update(tenant_a: Tenant) -> None:
    ids = [_create(tenant_a, session_id=f"s{i:02d}")["id"] for i in range(7)]
    _append(tenant_a, "s00", _event())  # s00 becomes the most recently updated
    client = tenant_a.client(tenant_a.read_key)
    seen: list[str] = []
    cursor = None
    while True:
        url = f"{_base(tenant_a)}?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = client.get(url).json()
        seen += [s["id"] for s in page["sessions"]]
        assert all("events" not in s for s in page["sessions"])
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen[0] == "s00" and sorted(seen) == sorted(ids) and len(seen) == 7


def test_app_listing_spans_users_and_pages(tenant_a: Tenant, tenant_b: Tenant) -> None:
    client = tenant_a.client(tenant_a.write_key)
    made = []
    for user in ("ana", "bob", "cy"):
        for i in range(3):
            r = client.post(_base(tenant_a, user=user), {"session_id": f"{user}-{i}"}, format="json")
            assert r.status_code == 201
            made.append((user, f"{user}-{i}"))
    client.post(_base(tenant_a, app="other", user="ana"), {"session_id": "elsewhere"}, format="json")
    client.post(
        f"{_base(tenant_a, user='bob')}/bob-0/events",
        {"event": _event(delta={"user:tier": "gold"})},
        format="json",
    )
    tenant_b.client(tenant_b.write_key).post(
        _base(tenant_b, user="ana"), {"session_id": "b-side"}, format="json"
    )
    url = f"/api/v1/projects/{tenant_a.project.id}/apps/app1/sessions"
    seen: list[tuple[str, str]] = []
    cursor = None
    while True:
        page = tenant_a.client(tenant_a.read_key).get(
            f"{url}?limit=4" + (f"&cursor={cursor}" if cursor else "")
        )
        assert page.status_code == 200, page.content
        body = page.json()
        seen += [(s["user_id"], s["id"]) for s in body["sessions"]]
        for s in body["sessions"]:  # each session carries its own user's shared state
            assert s["state"] == ({"user:tier": "gold"} if s["user_id"] == "bob" else {})
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert seen[0] == ("bob", "bob-0") and sorted(seen) == sorted(made)
    # another project's key cannot list this project's app
    assert tenant_b.client(tenant_b.read_key).get(url).status_code == 404
    assert tenant_a.client(tenant_a.read_key).get(f"{url}?cursor=W1swXV0=").status_code == 400


def test_user_state_reads_without_a_session(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    _append(tenant_a, sid, _event(delta={"user:lang": "pt", "app:v": 2, "n": 1}))
    client = tenant_a.client(tenant_a.read_key)
    base = f"/api/v1/projects/{tenant_a.project.id}/apps/app1/users"
    assert client.get(f"{base}/u1/state").json() == {"state": {"lang": "pt"}}
    assert client.get(f"{base}/nobody/state").json() == {"state": {}}


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ('{"event": {"author": "u", "actions": {"state_delta": {"x": NaN}}}}', 400),
        ('{"event": {"author": "u", "actions": {"state_delta": {"x": Infinity}}}}', 400),
        ({"event": {"author": ""}}, 400),
        ({"event": {"content": {"parts": []}}}, 400),
        ({"event": {"author": "u", "actions": "nope"}}, 400),
        ({"event": {"author": "u", "timestamp": "yesterday"}}, 400),
        ({"event": "text"}, 400),
        ({"event": {"author": "u"}, "extra": 1}, 400),
        ({"event": {"author": "u", "content": {"parts": [{"text": "x" * (5 * 1024 * 1024)}]}}}, 413),
    ],
)
def test_bad_events_are_refused_and_write_nothing(
    tenant_a: Tenant, body: dict[str, Any], status: int
) -> None:
    sid = _create(tenant_a)["id"]
    before = node_count()
    response = tenant_a.client(tenant_a.write_key).post(
        f"{_base(tenant_a)}/{sid}/events", body, format="json"
    )
    assert response.status_code == status, response.content[:300]
    assert node_count() == before
    assert _get(tenant_a, sid).json()["event_count"] == 0


def _call_part(kind: str, **call: Any) -> dict[str, Any]:
    return {"content": {"parts": [{kind: {"name": "lookup", **call}}]}}


@pytest.mark.parametrize(
    "event",
    [
        # values that become node properties must be strings: Neo4j cannot store an object there
        {"invocation_id": {"a": 1}},
        {"invocation_id": ["x"]},
        {"id": None},
        _call_part("function_call", id={"x": 1}),
        _call_part("functionCall", id=[1, 2]),
        _call_part("function_response", id={"x": 1}, response={}),
        {"content": {"parts": [{"function_call": "lookup"}]}},
        # parts that are not a list of objects
        {"content": {"parts": 5}},
        {"content": {"parts": ["text"]}},
        # a number of seconds no date has (memory turns event times into ISO-8601 dates)
        {"timestamp": 1e20},
        {"timestamp": -1e15},
    ],
)
def test_event_values_the_graph_cannot_hold_are_400(tenant_a: Tenant, event: dict[str, Any]) -> None:
    sid = _create(tenant_a)["id"]
    before = node_count()
    response = _append(tenant_a, sid, {"author": "agent", **event})
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["code"] == "invalid_input"
    assert node_count() == before
    assert _get(tenant_a, sid).json()["event_count"] == 0


def _cursor(*parts: Any) -> str:
    import base64
    import json

    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode()


@pytest.mark.parametrize(
    ("path", "cursor"),
    [
        ("", _cursor(2**64, "s")),
        ("", _cursor(-(2**63) - 1, "s")),
        ("", _cursor(True, "s")),
        ("app", _cursor(2**64, "u", "s")),
        ("app", _cursor(10**30, "u", "s")),
    ],
)
def test_a_cursor_beyond_64_bits_is_400(tenant_a: Tenant, path: str, cursor: str) -> None:
    _create(tenant_a)
    url = f"/api/v1/projects/{tenant_a.project.id}/apps/app1/sessions" if path == "app" else _base(tenant_a)
    response = tenant_a.client(tenant_a.read_key).get(url, {"cursor": cursor})
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["code"] == "invalid_input"
    assert response.json()["error"]["details"] == {"field": "cursor"}


def test_names_with_query_syntax_are_plain_values(tenant_a: Tenant) -> None:
    app, user = "a'}) DETACH DELETE n;", 'u" OR 1=1 AND text:*'
    client = tenant_a.client(tenant_a.write_key)
    base = f"/api/v1/projects/{tenant_a.project.id}/apps/{quote(app)}/users/{quote(user)}/sessions"
    created = client.post(base, {"session_id": "(s)*"}, format="json")
    assert created.status_code == 201, created.content
    got = client.get(f"{base}/{quote('(s)*')}").json()
    assert (got["app_name"], got["user_id"], got["id"]) == (app, user, "(s)*")
    assert (
        client.get(f"/api/v1/projects/{tenant_a.project.id}/apps/a/users/u/sessions").json()["sessions"] == []
    )


def _path_id(value: str) -> str:
    """The id rule's path form (docs/sessions.md, Ids), written out here independently of the client."""
    if "/" in value or value in ("", ".", "..") or value.startswith("~"):
        return "~" + base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")
    return quote(value, safe="")


@pytest.mark.parametrize(
    "name", ["s/C", "..", ".", "~x", "a%2Fb", "with space", "ünï/路径", "?q=1#f", "a\\b"]
)
def test_every_id_round_trips_through_the_path_rule(tenant_a: Tenant, name: str) -> None:
    client = tenant_a.client(tenant_a.write_key)
    user_base = f"/api/v1/projects/{tenant_a.project.id}/apps/{_path_id(name)}/users/{_path_id(name)}"
    created = client.post(
        f"{user_base}/sessions", {"session_id": name, "state": {"user:k": 1}}, format="json"
    )
    assert created.status_code == 201, created.content
    assert (created.json()["app_name"], created.json()["user_id"], created.json()["id"]) == (name, name, name)
    appended = client.post(
        f"{user_base}/sessions/{_path_id(name)}/events", {"event": _event()}, format="json"
    )
    assert appended.status_code == 201, appended.content
    got = client.get(f"{user_base}/sessions/{_path_id(name)}").json()
    assert (got["app_name"], got["user_id"], got["id"], got["event_count"]) == (name, name, name, 1)
    assert [s["id"] for s in client.get(f"{user_base}/sessions").json()["sessions"]] == [name]
    app_list = f"/api/v1/projects/{tenant_a.project.id}/apps/{_path_id(name)}/sessions"
    assert [(s["user_id"], s["id"]) for s in client.get(app_list).json()["sessions"]] == [(name, name)]
    assert client.get(f"{user_base}/state").json() == {"state": {"k": 1}}
    assert client.delete(f"{user_base}/sessions/{_path_id(name)}").status_code == 204
    assert client.get(f"{user_base}/sessions/{_path_id(name)}").status_code == 404


def test_a_bad_id_in_a_path_is_400_naming_the_rule(tenant_a: Tenant) -> None:
    client = tenant_a.client(tenant_a.write_key)
    before = node_count()
    for bad in ("~not*base64", "~" + base64.urlsafe_b64encode(b"\xff\xfe").decode(), "~", "%00"):
        response = client.get(f"/api/v1/projects/{tenant_a.project.id}/apps/{bad}/users/u/sessions")
        assert response.status_code == 400, (bad, response.content)
        assert "docs/sessions.md" in response.json()["error"]["message"]
        assert response.json()["error"]["details"] == {"field": "app_name"}
    assert (
        tenant_a.client(None)
        .get(f"/api/v1/projects/{tenant_a.project.id}/apps/~/users/u/sessions")
        .status_code
        == 401
    )
    assert client.post(_base(tenant_a), {"session_id": "a\x00b"}, format="json").status_code == 400
    assert client.post(_base(tenant_a), {"session_id": "x" * 257}, format="json").status_code == 400
    assert node_count() == before


def test_session_ids_are_trimmed_everywhere_and_blank_is_generated(tenant_a: Tenant) -> None:
    assert _create(tenant_a, session_id="order-42\n")["id"] == "order-42"
    for given in ("order-42", "order-42\n", " order-42\t"):
        assert _get(tenant_a, quote(given, safe="")).json()["id"] == "order-42", repr(given)
        assert _append(tenant_a, quote(given, safe=""), _event()).status_code == 201
    again = tenant_a.client(tenant_a.write_key).post(
        _base(tenant_a), {"session_id": " order-42"}, format="json"
    )
    assert again.status_code == 409
    for blank in ("", "   ", "\n", None):
        generated = _create(tenant_a, session_id=blank)["id"]
        assert generated.strip() == generated and len(generated) == 36, repr(blank)
    assert tenant_a.client(tenant_a.write_key).delete(f"{_base(tenant_a)}/%20order-42").status_code == 204


def test_last_update_time_is_the_latest_events_time_and_events_follow_time(tenant_a: Tenant) -> None:
    session = _create(tenant_a)
    sid, created = session["id"], session["last_update_time"]
    assert isinstance(created, float) and abs(created - time.time()) < 60 and session["revision"] == 0
    for ts in (2000.5, 1000.25, 3000.0, 1000.25):  # out of order, with a tie
        written = _append(tenant_a, sid, _event(text=str(ts), timestamp=ts)).json()
        assert written["last_update_time"] == ts
    got = _get(tenant_a, sid).json()
    assert got["last_update_time"] == 1000.25 and got["revision"] == 4  # the latest event's, as ADK
    assert [e["content"]["parts"][0]["text"] for e in got["events"]] == [
        "1000.25",
        "1000.25",
        "2000.5",
        "3000.0",
    ]
    assert [e["timestamp"] for e in _get(tenant_a, sid, "?num_recent_events=3").json()["events"]] == [
        1000.25,
        2000.5,
        3000.0,
    ]
    # appended out of time order: the latest events are found by time, not by append order
    flag = "MATCH (s:Session {project_id: $p, session_id: $sid}) RETURN s.in_time_order AS ordered"
    assert graph.read(flag, p=tenant_a.project.id, sid=sid) == [{"ordered": False}]
    in_order = _create(tenant_a)["id"]
    for ts in (5.0, 5.0, 6.0):
        _append(tenant_a, in_order, _event(text=str(ts), timestamp=ts))
    assert graph.read(flag, p=tenant_a.project.id, sid=in_order) == [{"ordered": True}]
    recent = _get(tenant_a, in_order, "?num_recent_events=2&after_timestamp=5.5").json()["events"]
    assert [e["timestamp"] for e in recent] == [6.0]
    # pages follow the same order, through ties
    seen, cursor = [], None
    while True:
        page = _get(tenant_a, sid, "?events_limit=1" + (f"&events_cursor={cursor}" if cursor else "")).json()
        seen += [e["id"] for e in page["events"]]
        cursor = page["next_events_cursor"]
        if cursor is None:
            break
    assert seen == [e["id"] for e in got["events"]]
    assert _get(tenant_a, sid, "?events_cursor=garbage").status_code == 400


def test_events_sent_without_a_time_are_stamped_in_the_order_they_are_appended(tenant_a: Tenant) -> None:
    """Stamped under the session lock: concurrent writers leave the session in time order (so the
    latest events are read by seq), and a stamped event never sorts before one already stored."""
    sid = _create(tenant_a)["id"]
    future = time.time() + 3600
    burst = [_event(text="ahead", timestamp=future), _event(text="after it")]
    written = tenant_a.client(tenant_a.write_key).post(
        f"{_base(tenant_a)}/{sid}/events", {"events": burst}, format="json"
    )
    assert written.status_code == 201, written.content
    assert [e["timestamp"] for e in written.json()["events"]] == [future, future]

    def writer(n: int) -> None:
        for i in range(5):
            events = [_event(text=f"w{n}-{i}-{j}") for j in range(3)]
            response = tenant_a.client(tenant_a.write_key).post(
                f"{_base(tenant_a)}/{sid}/events", {"events": events}, format="json"
            )
            assert response.status_code == 201, response.content

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    flag = "MATCH (s:Session {project_id: $p, session_id: $sid}) RETURN s.in_time_order AS ordered"
    assert graph.read(flag, p=tenant_a.project.id, sid=sid) == [{"ordered": True}]
    uid = graph.read(
        "MATCH (s:Session {project_id: $p, session_id: $sid}) RETURN s.id AS uid",
        p=tenant_a.project.id,
        sid=sid,
    )[0]["uid"]
    rows = graph.read(
        "MATCH (e:Event) WHERE e.session_uid = $uid RETURN e.seq AS seq, e.timestamp AS ts ORDER BY seq",
        uid=uid,
    )
    assert len(rows) == 2 + 4 * 5 * 3
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows) and rows[2]["ts"] >= future
    got = _get(tenant_a, sid).json()
    texts = [e["content"]["parts"][0]["text"] for e in got["events"]]
    assert texts[:2] == ["ahead", "after it"]
    for n in range(4):  # each writer's events in its own order
        mine = [t for t in texts if t.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}-{j}" for i in range(5) for j in range(3)]
    recent = _get(tenant_a, sid, "?num_recent_events=3").json()["events"]
    assert [e["id"] for e in recent] == [e["id"] for e in got["events"][-3:]]


def test_a_writer_that_knows_only_the_time_it_read_is_checked_against_it(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    first = _append(tenant_a, sid, _event(timestamp=5000.0)).json()
    client = tenant_a.client(tenant_a.write_key)

    def append(expected: float) -> int:
        body = {"event": _event(timestamp=expected + 1), "expected_last_update_time": expected}
        return client.post(f"{_base(tenant_a)}/{sid}/events", body, format="json").status_code

    assert append(4999.0) == 409  # read before the session was last updated: stale
    assert append(first["last_update_time"]) == 201
    assert _get(tenant_a, sid).json()["event_count"] == 2


def test_bad_query_parameters(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    for query in (
        "?num_recent_events=-1",
        "?num_recent_events=x",
        "?after_timestamp=soon",
        "?after_timestamp=nan",
    ):
        assert _get(tenant_a, sid, query).status_code == 400, query
    client = tenant_a.client(tenant_a.read_key)
    assert client.get(f"{_base(tenant_a)}?cursor=garbage").status_code == 400
    assert client.get(f"{_base(tenant_a)}?limit=0").status_code == 400
    assert _get(tenant_a, "no-such-session").status_code == 404


def test_another_projects_sessions_are_not_found(tenant_a: Tenant, tenant_b: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    _append(tenant_a, sid, _event(delta={"app:x": 1}))
    b = tenant_b.client(tenant_b.write_key)
    # B's key on A's project: 404 for everything
    assert b.get(f"{_base(tenant_a)}/{sid}").status_code == 404
    assert b.post(f"{_base(tenant_a)}/{sid}/events", {"event": _event()}, format="json").status_code == 404
    assert b.delete(f"{_base(tenant_a)}/{sid}").status_code == 404
    # the same app/user/session names inside B's own project are B's own (nothing of A's)
    assert b.get(f"{_base(tenant_b)}/{sid}").status_code == 404
    own = b.post(_base(tenant_b), {"session_id": sid}, format="json")
    assert own.status_code == 201 and own.json()["state"] == {}
    assert _get(tenant_a, sid).json()["event_count"] == 1


def test_read_key_cannot_write(tenant_a: Tenant) -> None:
    response = tenant_a.client(tenant_a.read_key).post(_base(tenant_a), {}, format="json")
    assert response.status_code == 403


def test_sessions_stored_in_milliseconds_are_converted_once(tenant_a: Tenant) -> None:
    from core.graph.schema import apply_schema

    sid = _create(tenant_a)["id"]
    _append(tenant_a, sid, _event(timestamp=1_700_000_000.5))
    graph.write(
        "MATCH (s:Session {project_id: $pid, session_id: $sid}) "
        "SET s.last_update_time = 1700000000123, s.created_at = 1700000000000 REMOVE s.revision",
        pid=tenant_a.project.id,
        sid=sid,
    )
    apply_schema()
    apply_schema()  # a second start changes nothing
    got = _get(tenant_a, sid).json()
    assert (got["last_update_time"], got["created_at"], got["revision"]) == (
        1_700_000_000.123,
        1_700_000_000.0,
        1,
    )


def test_a_burst_of_events_is_appended_in_one_transaction_or_not_at_all(tenant_a: Tenant) -> None:
    sid = _create(tenant_a)["id"]
    client = tenant_a.client(tenant_a.write_key)
    url = f"{_base(tenant_a)}/{sid}/events"
    call = _event(
        "agent",
        "",
        timestamp=10.0,
        content={"role": "model", "parts": [{"function_call": {"id": "c1", "name": "f"}}]},
    )
    answer = _event(
        "agent",
        "",
        timestamp=10.25,
        content={"role": "user", "parts": [{"function_response": {"id": "c1", "name": "f", "response": {}}}]},
    )
    burst = [_event(text="one", delta={"k": 1, "user:u": 1}, timestamp=9.0), call, answer]
    written = client.post(url, {"events": burst, "expected_revision": 0}, format="json")
    assert written.status_code == 201, written.content
    body = written.json()
    assert (body["revision"], body["seq"], body["last_update_time"], len(body["events"])) == (3, 3, 10.25, 3)
    assert written["ETag"] == '"3"'
    got = _get(tenant_a, sid).json()
    assert got["state"] == {"k": 1, "user:u": 1} and [e["timestamp"] for e in got["events"]] == [
        9.0,
        10.0,
        10.25,
    ]
    tools = client.get(f"{_base(tenant_a)}/{sid}/tool-calls").json()["tools"]
    assert tools[0]["responded"] == 1 and tools[0]["max_latency_ms"] == 250  # answered inside the burst
    before = node_count()
    stale = client.post(url, {"events": [_event(text="late")], "expected_revision": 0}, format="json")
    assert stale.status_code == 409
    bad = client.post(url, {"events": [_event(text="fine"), {"author": ""}]}, format="json")
    assert bad.status_code == 400 and "events" in str(bad.json()["error"]), bad.json()
    both = client.post(url, {"event": _event(), "events": [_event()]}, format="json")
    assert both.status_code == 400
    assert client.post(url, {"events": []}, format="json").status_code == 400
    assert node_count() == before and _get(tenant_a, sid).json()["event_count"] == 3
