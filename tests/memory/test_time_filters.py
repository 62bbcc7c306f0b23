"""Memory search narrowed by time (`since`, `until`, `when`, relative expressions against
`reference_time`), role and author, in every mode, on the real stack (issue 34)."""

from __future__ import annotations

from typing import Any

import pytest

from core.models import Job
from memory.tasks import memory_process
from tests.conftest import make_tenant
from tests.memory.helpers import msearch, store, user

pytestmark = pytest.mark.django_db

MESSAGES = [
    ("user", "Ana", "2022-11-20T10:00:00Z", "We hiked the harbour trail in the rain."),
    ("assistant", "Bot", "2023-05-08T13:56:00Z", "The harbour trail was closed for repairs in May."),
    ("user", "Ana", "2023-05-20T09:00:00Z", "Back on the harbour trail, sunny this time."),
    ("user", "Rui", "2023-07-01T18:30:00Z", "Rui says the harbour trail ferry now runs hourly."),
]


def _setup(name: str) -> tuple[Any, str, list[str]]:
    tenant = make_tenant(name)
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client,
        pid,
        [{"role": r, "author_name": a, "timestamp": t, "text": x} for r, a, t, x in MESSAGES],
        user_id="ana",
    ).json()
    # another user's message in every window: never returned to ana's searches
    store(
        client,
        pid,
        [{"role": "user", "text": "The harbour trail in May 2023.", "timestamp": "2023-05-10T00:00:00Z"}],
        user_id="eve",
    )
    return client, pid, [s["id"] for s in body["stored"]]


def _ids(client: Any, pid: str, mode: str, **filters: Any) -> list[str]:
    query = "" if mode == "recency" else "harbour trail"
    response = msearch(client, pid, query, {"user_id": "ana"}, mode=mode, min_score=0, **filters)
    assert response.status_code == 200, response.content
    return sorted(item["id"] for item in response.json()["items"])


@pytest.mark.parametrize("mode", ["vector", "fulltext", "hybrid", "recency"])
def test_time_role_and_author_filters_in_every_mode(mode: str) -> None:
    client, pid, (old, may8, may20, july) = _setup(f"mem-filters-{mode}")
    assert _ids(client, pid, mode) == sorted([old, may8, may20, july])
    assert _ids(client, pid, mode, since="2023-05-08T13:56:00Z") == sorted([may8, may20, july])
    assert _ids(client, pid, mode, until="2023-05-08T13:56:00Z") == [old]  # exclusive
    assert _ids(client, pid, mode, since="2023-01-01", until="2023-06-01") == sorted([may8, may20])
    assert _ids(client, pid, mode, when="May 2023") == sorted([may8, may20])
    assert _ids(client, pid, mode, when="8 May 2023") == [may8]
    assert _ids(client, pid, mode, roles=["assistant"]) == [may8]
    assert _ids(client, pid, mode, author="Ana") == sorted([old, may20])
    assert _ids(client, pid, mode, author="Ana", when="2023") == [may20]


def test_relative_times_count_from_the_reference_time() -> None:
    client, pid, (old, may8, may20, july) = _setup("mem-filters-relative")
    ref = {"reference_time": "2023-07-15T12:00:00Z"}
    assert _ids(client, pid, "hybrid", when="last year", **ref) == [old]
    assert _ids(client, pid, "hybrid", when="in May", **ref) == sorted([may8, may20])
    assert _ids(client, pid, "hybrid", when="2 months ago", **ref) == sorted([may8, may20])
    assert _ids(client, pid, "hybrid", when="this month", **ref) == [july]
    assert _ids(client, pid, "hybrid", since="last 30 days", **ref) == [july]
    # without a reference time they count from now: nothing of 2022-2023 is "this month"
    assert _ids(client, pid, "hybrid", when="this month") == []


def test_results_carry_their_time() -> None:
    client, pid, ids = _setup("mem-filters-time")
    items = msearch(client, pid, "harbour trail", {"user_id": "ana"}, mode="fulltext").json()["items"]
    stamps = {item["id"]: item["timestamp"] for item in items}
    assert stamps[ids[1]] == "2023-05-08T13:56:00.000000Z"


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"when": "sometime soon"}, "when"),
        ({"since": "2023-13-45"}, "since"),
        ({"since": "2023-06-01", "until": "2023-05-01"}, "until"),
        ({"when": "May 2023", "since": "2023-06-01"}, "until"),
        ({"roles": ["robot"]}, "roles"),
        ({"roles": []}, "roles"),
        ({"reference_time": "not a time", "when": "last year"}, "timestamp"),
        ({"author": "x" * 257}, "author"),
        ({"as_of": "whenever"}, "as_of"),
    ],
)
def test_bad_filters_answer_400_naming_the_field(filters: dict[str, Any], field: str) -> None:
    tenant = make_tenant("mem-filters-bad")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    response = msearch(client, pid, "harbour", {"user_id": "ana"}, **filters)
    assert response.status_code == 400, response.content
    assert field in response.content.decode()


def _processed(body: dict[str, Any]) -> None:
    memory_process.apply(args=(body["job_id"],))  # in this process, as the worker runs it
    assert Job.objects.get(pk=body["job_id"]).status == "succeeded"


def test_as_of_answers_with_memory_as_it_stood_then() -> None:
    """Validity windows: a newer contradicting statement closes the older one's window; `as_of`
    returns the facts and preferences valid then and only the messages said by then; without it, the
    current ones."""
    tenant = make_tenant("mem-as-of")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    porto = store(
        client, pid, [user("I live in Porto.", timestamp="2023-01-10T10:00:00Z")], user_id="u"
    ).json()
    _processed(porto)
    berlin = store(
        client,
        pid,
        [user("I live in Berlin now.", timestamp="2024-03-01T10:00:00Z")],
        user_id="u",
        thread_id="t2",
    ).json()
    _processed(berlin)
    store(client, pid, [user("I live in Porto.", timestamp="2023-01-10T10:00:00Z")], user_id="other")

    def facts_and_messages(**filters: Any) -> tuple[list[str], list[str]]:
        response = msearch(
            client, pid, "where do I live", {"user_id": "u"}, depth="facts", min_score=0, **filters
        )
        assert response.status_code == 200, response.content
        items = response.json()["items"]
        facts = [i["metadata"]["object"] for i in items if i["level"] == "fact"]
        messages = sorted(i["id"] for i in items if i["level"] == "message")
        return facts, messages

    porto_id, berlin_id = porto["stored"][0]["id"], berlin["stored"][0]["id"]
    assert facts_and_messages() == (["Berlin"], sorted([berlin_id, porto_id]))
    assert facts_and_messages(as_of="2023-06-01T00:00:00Z") == (["Porto"], [porto_id])
    assert facts_and_messages(as_of="2023") == (["Porto"], [porto_id])  # the end of 2023
    assert facts_and_messages(as_of="March 2024") == (["Berlin"], sorted([berlin_id, porto_id]))
    assert facts_and_messages(as_of="2022-12-31") == ([], [])  # nothing was said yet
    # relative to the reference time: a year before 2024-06-01 is 2023
    assert facts_and_messages(as_of="last year", reference_time="2024-06-01T00:00:00Z") == (
        ["Porto"],
        [porto_id],
    )
