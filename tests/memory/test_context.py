"""The memory context endpoint (issue 34): one token-budgeted block of hits, their neighbouring turns,
their conversations' summaries and the user's facts, deduplicated and in time order, on the real
stack (Neo4j, Redis, the local embedder)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from knowledge_platform_client import AsyncPlatformClient, BadRequestError, MemoryClient

from knowledge.pipeline.chunking import count_tokens
from memory.tasks import memory_process
from tests.clients.conftest import Platform, _web
from tests.conftest import Tenant, make_tenant
from tests.memory.helpers import msearch, store

pytestmark = pytest.mark.django_db

# (role, author, time, text): a trip thread in May 2023 and an older one in April
TRIP = [
    ("user", "Ana", "2023-05-01T09:00:00Z", "Hi, I want to plan a holiday this summer."),
    ("assistant", None, "2023-05-01T09:01:00Z", "Happy to help. Where would you like to go?"),
    ("user", "Ana", "2023-05-02T10:00:00Z", "To Madeira, to walk the levada trails."),
    ("assistant", None, "2023-05-02T10:01:00Z", "The levada trails of Madeira are best in spring."),
    ("user", "Ana", "2023-05-03T11:00:00Z", "Also, my cat Tobias needs a sitter while I am away."),
    ("assistant", None, "2023-05-03T11:01:00Z", "I will look for a cat sitter near you."),
    ("user", "Ana", "2023-05-04T12:00:00Z", "Thanks, that is everything for today."),
]
EARLIER = [
    ("user", "Ana", "2023-04-10T08:00:00Z", "Last year we walked a levada on Madeira in the fog."),
    ("assistant", None, "2023-04-10T08:01:00Z", "Fog is common on the high levadas."),
]


def _messages(rows: list[tuple[str, str | None, str, str]]) -> list[dict[str, Any]]:
    return [
        {"role": r, "timestamp": t, "text": x, **({"author_name": a} if a else {})} for r, a, t, x in rows
    ]


def _setup(name: str) -> tuple[Tenant, list[str], list[str]]:
    tenant = make_tenant(name)
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    trip = store(client, pid, _messages(TRIP), user_id="ana", thread_id="trip").json()
    earlier = store(client, pid, _messages(EARLIER), user_id="ana", thread_id="earlier").json()
    # another user of the project says the same: never in ana's context
    store(client, pid, _messages(TRIP[2:4]), user_id="eve", thread_id="trip")
    return tenant, [s["id"] for s in trip["stored"]], [s["id"] for s in earlier["stored"]]


def _context(client: Any, pid: str, query: str, scope: dict[str, Any], **body: Any) -> Any:
    return client.post(
        f"/api/v1/projects/{pid}/memories/context", {"query": query, "scope": scope, **body}, format="json"
    )


def _ok(client: Any, pid: str, query: str, **body: Any) -> dict[str, Any]:
    response = _context(client, pid, query, {"user_id": "ana"}, **body)
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["tokens"] == (count_tokens(data["context"]) if data["context"] else 0)
    return data


def _process(body: dict[str, Any]) -> None:
    memory_process.apply(args=(body["job_id"],))  # the job a store queued, run here as the worker runs it


def test_hits_come_with_their_neighbouring_turns_once_and_in_time_order() -> None:
    tenant, trip, earlier = _setup("mem-context-neighbours")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    data = _ok(client, pid, "levada Madeira", mode="fulltext", neighbours=1)
    reasons = {item["id"]: item["reason"] for item in data["items"]}
    # hits: trip turns 3 and 4, earlier turns 1 and 2 (each other's neighbours: hits, once)
    assert reasons == {
        trip[1]: "neighbour",
        trip[2]: "hit",
        trip[3]: "hit",
        trip[4]: "neighbour",
        earlier[0]: "hit",
        earlier[1]: "neighbour",  # "levadas" is not "levada": no hit
    }
    assert len(data["items"]) == len(reasons)  # nothing twice
    # time order: the April conversation first, then May's turns in order
    stamps = [item["timestamp"] for item in data["items"]]
    assert stamps == sorted(stamps)
    text = data["context"]
    lines = [
        "Ana (10 April 2023): Last year we walked a levada on Madeira in the fog.",
        "assistant (1 May 2023): Happy to help. Where would you like to go?",
        "Ana (2 May 2023): To Madeira, to walk the levada trails.",
        "assistant (2 May 2023): The levada trails of Madeira are best in spring.",
        "Ana (3 May 2023): Also, my cat Tobias needs a sitter while I am away.",
    ]
    positions = [text.index(line) for line in lines]
    assert positions == sorted(positions)
    assert text.index("Conversation earlier (10 April 2023):") < text.index(
        "Conversation trip (1 May 2023 – 3 May 2023):"
    )
    assert "holiday this summer" not in text and "cat sitter near you" not in text and "…" not in text

    wider = _ok(client, pid, "levada Madeira", mode="fulltext", neighbours=2)
    assert {i["id"] for i in wider["items"]} >= set(trip[:6]) and trip[6] not in reasons
    alone = _ok(client, pid, "levada Madeira", mode="fulltext", neighbours=0)
    assert {i["reason"] for i in alone["items"]} == {"hit"}


def test_turns_left_out_between_two_hits_are_marked() -> None:
    tenant, trip, _earlier = _setup("mem-context-gap")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    data = _ok(client, pid, "holiday Tobias", mode="fulltext", neighbours=0)
    assert [i["id"] for i in data["items"]] == [trip[0], trip[4]]
    assert data["context"] == (
        "Conversation trip (1 May 2023 – 3 May 2023):\n"
        "Ana (1 May 2023): Hi, I want to plan a holiday this summer.\n"
        "…\n"
        "Ana (3 May 2023): Also, my cat Tobias needs a sitter while I am away."
    )


def test_the_budget_is_never_exceeded_and_a_small_one_keeps_the_best_hit() -> None:
    tenant, trip, _earlier = _setup("mem-context-budget")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    long_text = "The levada walk notes: " + " ".join(f"section {i} of the path was muddy." for i in range(80))
    store(client, pid, [{"role": "user", "text": long_text}], user_id="ana", thread_id="notes")
    best = msearch(client, pid, "levada trails of Madeira", {"user_id": "ana"}).json()["items"][0]["id"]
    sizes = []
    for budget in (50, 60, 100, 200, 400, 1000, 8000):
        data = _ok(client, pid, "levada trails of Madeira", max_tokens=budget, neighbours=2)
        assert 0 < data["tokens"] <= budget
        assert best in [i["id"] for i in data["items"] if i["reason"] == "hit"]
        sizes.append(len(data["items"]))
    assert sizes[0] < sizes[-1]  # a larger budget holds more
    # a hit longer than the budget is cut to it
    data = _ok(client, pid, "muddy", mode="fulltext", max_tokens=50)
    (cut,) = [i for i in data["items"] if i["reason"] == "hit"]
    assert cut["text"].endswith("…") and long_text.startswith(cut["text"][:-1].rstrip())
    assert data["tokens"] <= 50


def test_summaries_facts_and_preferences_are_included_after_the_turns(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_SUMMARY_MESSAGES = 2
    tenant = make_tenant("mem-context-facts")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client,
        pid,
        [
            {"role": "user", "text": "I love sailing. My boat is called Maré.", "author_name": "Ana"},
            {"role": "assistant", "text": "A lovely name for a sailing boat."},
        ],
        user_id="ana",
        thread_id="t",
    ).json()
    _process(body)
    data = _ok(client, pid, "sailing boat")
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for item in data["items"]:
        by_reason.setdefault(item["reason"], []).append(item)
    assert {"hit", "summary", "fact", "preference"} <= set(by_reason)
    assert by_reason["fact"][0]["level"] == "fact" and by_reason["preference"][0]["level"] == "preference"
    # facts and preferences point at the turn they were drawn from, a summary at the turns it covers,
    # turns at nothing
    said, reply = (s["id"] for s in body["stored"])
    assert by_reason["fact"][0]["sources"] == [said] and by_reason["preference"][0]["sources"] == [said]
    assert by_reason["summary"][0]["sources"] == [said, reply]
    assert by_reason["hit"][0]["sources"] == []
    text = data["context"]
    heading = text.index("Facts and preferences:")
    assert text.index("Summary: ") < text.index("Ana (") < heading
    assert "- user boat: Maré" in text[heading:] and "- user likes: sailing" in text[heading:]


def test_filters_narrow_the_turns_hits_and_neighbours_alike() -> None:
    tenant, trip, earlier = _setup("mem-context-filters")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    may = _ok(client, pid, "levada Madeira", mode="fulltext", when="May 2023", neighbours=5)
    turns = [i for i in may["items"] if i["level"] == "message"]
    assert turns and all(i["timestamp"].startswith("2023-05") for i in turns)
    assert earlier[0] not in [i["id"] for i in turns] and "10 April 2023" not in may["context"]
    spoken = _ok(client, pid, "levada Madeira", mode="fulltext", roles=["assistant"], neighbours=2)
    # the hit (trip turn 4) and the assistant's turns around it; the user's turns between are not
    assert [i["id"] for i in spoken["items"]] == [trip[1], trip[3], trip[5]]
    assert "…" in spoken["context"] and "Ana (" not in spoken["context"]
    assert _ok(client, pid, "levada Madeira", mode="fulltext", author="Rui")["items"] == []


def test_a_query_about_nothing_stored_gets_an_empty_context(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_SUMMARY_MESSAGES = 2
    tenant = make_tenant("mem-context-empty")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client,
        pid,
        [
            {"role": "user", "text": "My name is Ana and I live in Lisbon. I love jazz."},
            {"role": "assistant", "text": "Noted, Ana."},
        ],
        user_id="ana",
    ).json()
    _process(body)
    assert _ok(client, pid, "where does Ana live")["items"]  # facts and turns are there to be found
    off_topic = _ok(client, pid, "Which quark flavour has the largest mass in lattice chromodynamics?")
    assert off_topic == {**off_topic, "context": "", "tokens": 0, "items": []}
    assert _ok(client, pid, "quark", mode="fulltext")["context"] == ""


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"depth": "facts"}, "depth"),
        ({"max_tokens": 49}, "max_tokens"),
        ({"max_tokens": 8001}, "max_tokens"),
        ({"max_tokens": "lots"}, "max_tokens"),
        ({"neighbours": 6}, "neighbours"),
        ({"neighbours": -1}, "neighbours"),
        ({"when": "sometime soon"}, "when"),
        ({"roles": ["robot"]}, "roles"),
        ({"mode": "telepathy"}, "mode"),
        ({"scope": {}}, "scope"),
    ],
)
def test_bad_input_answers_400_naming_the_field(body: dict[str, Any], field: str) -> None:
    tenant = make_tenant("mem-context-bad")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    request = {"query": "levada", "scope": {"user_id": "ana"}, **body}
    response = client.post(f"/api/v1/projects/{pid}/memories/context", request, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input" and field in response.content.decode()


def test_another_project_or_user_never_appears() -> None:
    tenant, trip, earlier = _setup("mem-context-tenant")
    other = make_tenant("mem-context-other")
    other_client, other_pid = other.client(other.write_key), other.project.id
    theirs = store(other_client, other_pid, _messages(TRIP), user_id="ana", thread_id="trip").json()
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    mine = _ok(client, pid, "levada Madeira", mode="fulltext", neighbours=5)
    ids = {i["id"] for i in mine["items"]}
    assert ids == set(trip) | set(earlier)  # every turn of ana's, nothing of eve's or the other project's
    assert not ids & {s["id"] for s in theirs["stored"]}
    eve = _context(client, pid, "levada Madeira", {"user_id": "eve"}, mode="fulltext", neighbours=5).json()
    assert {i["id"] for i in eve["items"]}.isdisjoint(ids) and len(eve["items"]) == 2
    # the other project's key on this project's URL: 404, as for a project that does not exist
    assert _context(other.client(other.read_key), pid, "levada", {"user_id": "ana"}).status_code == 404


# --- the platform client ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def context_web(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Platform]:  # type: ignore[no-untyped-def]
    yield from _web(tmp_path_factory, "context-web", API_THROTTLE_RATE="100000/min")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def committed_tenant(transactional_db) -> Tenant:  # type: ignore[no-untyped-def]
    """A tenant the web process sees (committed), with a unique name."""
    return make_tenant(f"mem-context-client {uuid.uuid4().hex[:8]}")


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_the_platform_client_asks_for_a_context(
    context_web: Platform, committed_tenant: Tenant
) -> None:
    tenant = committed_tenant
    scope = {"user_id": "ana", "thread_id": "trip"}
    async with AsyncPlatformClient(context_web.settings(tenant)) as client:
        memory = MemoryClient(client)
        await memory.store(_messages(TRIP), scope)
        found = await memory.context("levada Madeira", {"user_id": "ana"}, mode="fulltext", max_tokens=80)
        assert 0 < found.tokens <= 80 and "levada" in found.context
        assert found.items[0].reason in ("hit", "neighbour") and found.items[0].conversation_id
        narrowed = await memory.context(
            "levada Madeira", {"user_id": "ana"}, mode="fulltext", neighbours=0, roles=["assistant"]
        )
        assert [i.text for i in narrowed.items] == ["The levada trails of Madeira are best in spring."]
        with pytest.raises(BadRequestError):
            await memory.context("levada", {"user_id": "ana"}, max_tokens=10)
