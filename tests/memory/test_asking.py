"""Memory search moves a message that mostly asks below what was said (MEMORY_ASKING_WEIGHT), in every
ranking mode, on the real stack; and which messages mostly ask (memory.text.asks)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from memory.text import asks
from tests.conftest import make_tenant
from tests.memory.helpers import msearch, store, user


@pytest.mark.unit
def test_a_message_asks_when_a_sentence_is_a_question_and_little_else_is_said() -> None:
    assert asks("Cool! What did it look like?")
    assert asks("Wow, what a fun moment! What's the band?")
    assert asks("What?") and asks("你好吗？") and asks("Did you see the band?” ")
    # a question beside a statement of twelve words or more is a statement
    assert not asks("I went to a support group yesterday and it was so powerful for me. How was yours?")
    assert not asks("They were stoked for the dinosaur exhibit.")
    assert not asks("") and not asks("   ")
    # eleven stated words beside the question still ask; twelve do not
    eleven = "one two three four five six seven eight nine ten eleven."
    assert asks(f"{eleven} Right?") and not asks(f"{eleven[:-1]} twelve. Right?")


MESSAGES = [
    "Did you go hiking in the Alps with your sister?",  # asks, in the query's own words
    "I spent Saturday hiking a trail in the Alps.",
    "Work has been busy lately, lots of meetings about the budget.",
]


def _setup(name: str) -> tuple[Any, str, dict[str, str]]:
    tenant = make_tenant(name)
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(client, pid, [user(text) for text in MESSAGES], user_id="u1").json()
    ids = [s["id"] for s in body["stored"]]
    return client, pid, dict(zip(["asks", "hike", "work"], ids, strict=True))


QUERY = "Who went hiking in the Alps with their sister?"


def _scores(client: Any, pid: str, mode: str) -> tuple[dict[str, float], dict[str, Any]]:
    response = msearch(client, pid, QUERY, {"user_id": "u1"}, mode=mode, min_score=0)
    assert response.status_code == 200, response.content
    body = response.json()
    return {item["id"]: item["score"] for item in body["items"]}, body


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["vector", "fulltext", "hybrid", "graph"])
def test_the_score_of_a_message_that_asks_is_scaled_and_it_gives_way(mode: str) -> None:
    client, pid, ids = _setup(f"mem-asking-{mode}")
    with override_settings(MEMORY_ASKING_WEIGHT=1.0):
        plain, body = _scores(client, pid, mode)
    assert "asking" not in body["timings_ms"]  # at 1 nothing is read
    assert max(plain, key=plain.__getitem__) == ids["asks"], (plain, ids)  # the question's words win
    with override_settings(MEMORY_ASKING_WEIGHT=0.25):
        scaled, body = _scores(client, pid, mode)
    assert "asking" in body["timings_ms"]
    assert scaled.keys() == plain.keys()
    for name, memory_id in ids.items():
        if memory_id in plain:
            factor = 0.25 if name == "asks" else 1.0
            assert scaled[memory_id] == pytest.approx(plain[memory_id] * factor, abs=2e-6), name
    ranked = sorted(scaled, key=lambda i: -scaled[i])
    assert ranked.index(ids["hike"]) < ranked.index(ids["asks"]), (scaled, ids)
    assert [item["id"] for item in body["items"]] == ranked  # items come in the scaled order


@pytest.mark.django_db
def test_asking_weight_keeps_top_k_and_the_scope() -> None:
    client, pid, ids = _setup("mem-asking-scope")
    # another user of the project asks the same thing: never part of u1's answer
    other = make_tenant("mem-asking-scope-other")
    store(client, pid, [user("Who went hiking in the Alps with their sister?")], user_id="u2")
    with override_settings(MEMORY_ASKING_WEIGHT=0.25):
        first = msearch(client, pid, QUERY, {"user_id": "u1"}, mode="hybrid", top_k=1, min_score=0)
        every = msearch(client, pid, QUERY, {"user_id": "u1"}, mode="hybrid", top_k=10, min_score=0)
    assert first.status_code == every.status_code == 200, (first.content, every.content)
    assert [item["id"] for item in first.json()["items"]] == [ids["hike"]]
    assert {item["id"] for item in every.json()["items"]} == set(ids.values())
    # and another project's key cannot reach this project's memories at all
    foreign = other.client(other.write_key)
    assert msearch(foreign, pid, QUERY, {"user_id": "u1"}).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["hybrid", "graph"])
def test_results_read_while_ranking_are_the_results_a_separate_read_gives(mode: str) -> None:
    """With the weight below 1 the ranking reads the candidates whole and the results come from that
    read; with it at 1 they are read after ranking. Every field but the score is the same."""
    tenant = make_tenant(f"mem-asking-fields-{mode}")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    messages = [
        user(MESSAGES[0], author_name="Ana", message_id="m-1", metadata={"topic": "travel", "n": 3}),
        user(MESSAGES[1], author_name="Ben", timestamp="2023-05-08T13:56:00Z", metadata={"topic": "travel"}),
        user(MESSAGES[2], message_id="m-3"),
    ]
    assert store(client, pid, messages, user_id="u1", thread_id="t1").status_code == 201

    def items(weight: float) -> list[dict[str, Any]]:
        with override_settings(MEMORY_ASKING_WEIGHT=weight):
            response = msearch(client, pid, QUERY, {"user_id": "u1"}, mode=mode, min_score=0)
        assert response.status_code == 200, response.content
        return [{k: v for k, v in item.items() if k != "score"} for item in response.json()["items"]]

    plain, folded = items(1.0), items(0.25)
    assert len(plain) == 3 and any(item["fields"] for item in plain), plain
    assert sorted(folded, key=lambda i: i["id"]) == sorted(plain, key=lambda i: i["id"])
