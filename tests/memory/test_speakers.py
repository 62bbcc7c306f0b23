"""Memory search tells speakers apart: a query naming one of the scope's authors ranks that author's
messages among themselves, ahead of the others' (MEMORY_SPEAKER_OTHER_WEIGHT), in every ranking mode,
on the real stack (issue 34, "speaker-aware")."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.conftest import make_tenant
from tests.memory.helpers import msearch, store

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _questions_weigh_as_statements(settings: Any) -> None:
    """Ana's first message asks, which alone would put it below Ben's (tests/memory/test_asking.py):
    these tests look at the speakers only."""
    settings.MEMORY_ASKING_WEIGHT = 1.0


# Ana asks about Ben's hiking in the query's own words; Ben tells of his hike in others. Without telling
# the speakers apart, a question about Ben's hiking finds Ana's message first, in every mode.
MESSAGES = [
    ("Ana", "Did Ben go hiking? I went to the Alps."),
    ("Ben", "Spent Saturday hiking a trail in the Pyrenees."),
    ("Ana", "Next summer I want to go hiking in the Dolomites."),
    ("Ben", "Work has been busy lately."),
]


def _setup(name: str) -> tuple[Any, str, dict[str, str]]:
    tenant = make_tenant(name)
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client, pid, [{"role": "user", "author_name": a, "text": t} for a, t in MESSAGES], user_id="u1"
    ).json()
    ids = [s["id"] for s in body["stored"]]
    # another user of the project has a speaker called Cleo, who talks about hiking too
    store(client, pid, [{"role": "user", "author_name": "Cleo", "text": "Cleo loves hiking."}], user_id="u2")
    return client, pid, dict(zip(["ana_asks", "ben_trek", "ana_dolomites", "ben_work"], ids, strict=True))


def _ranked(client: Any, pid: str, query: str, mode: str, **body: Any) -> list[str]:
    response = msearch(client, pid, query, {"user_id": "u1"}, mode=mode, min_score=0, **body)
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["items"]]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_the_named_speakers_messages_come_first(mode: str) -> None:
    client, pid, ids = _setup(f"mem-speakers-{mode}")
    ranked = _ranked(client, pid, "Where did Ben go hiking?", mode)
    assert ranked[0] == ids["ben_trek"], (ranked, ids)
    with override_settings(MEMORY_SPEAKER_OTHER_WEIGHT=1.0):  # speakers not told apart: Ana's first
        assert _ranked(client, pid, "Where did Ben go hiking?", mode)[0] != ids["ben_trek"]


@pytest.mark.parametrize("mode", ["vector", "fulltext"])
def test_the_other_speakers_scores_are_scaled(mode: str) -> None:
    """Vector and fulltext scores are not rescaled: the named speaker's keep their score, the others'
    are multiplied by MEMORY_SPEAKER_OTHER_WEIGHT."""
    client, pid, ids = _setup(f"mem-speakers-scores-{mode}")
    query = "Where did Ben go hiking?"
    with override_settings(MEMORY_SPEAKER_OTHER_WEIGHT=1.0):
        plain = _scores(client, pid, query, mode)
    with override_settings(MEMORY_SPEAKER_OTHER_WEIGHT=0.25):
        scaled = _scores(client, pid, query, mode)
    assert scaled.keys() == plain.keys() and ids["ben_trek"] in plain and ids["ana_asks"] in plain
    for name, memory_id in ids.items():
        if memory_id in plain:
            factor = 1.0 if name.startswith("ben") else 0.25
            assert scaled[memory_id] == pytest.approx(plain[memory_id] * factor, abs=2e-6), name


def _scores(client: Any, pid: str, query: str, mode: str) -> dict[str, float]:
    response = msearch(client, pid, query, {"user_id": "u1"}, mode=mode, min_score=0)
    assert response.status_code == 200, response.content
    return {item["id"]: item["score"] for item in response.json()["items"]}


def test_speakers_are_the_scopes_own_and_a_filter_or_two_names_leave_the_ranking_alone() -> None:
    client, pid, ids = _setup("mem-speakers-rules")
    # two speakers named: neither is preferred, the ranking is the plain one
    assert _ranked(client, pid, "Where did Ana and Ben go hiking?", "hybrid")[0] != ids["ben_trek"]
    # a speaker of another user's memory is not one of this scope's: nothing changes, nothing of u2 leaks
    cleo = _ranked(client, pid, "Where did Cleo go hiking?", "hybrid")
    with override_settings(MEMORY_SPEAKER_OTHER_WEIGHT=1.0):
        assert cleo == _ranked(client, pid, "Where did Cleo go hiking?", "hybrid")
    assert set(cleo) <= set(ids.values())
    # the request's own author filter wins: only Ana's messages, whoever the query names
    only_ana = _ranked(client, pid, "Where did Ben go hiking?", "hybrid", author="Ana")
    assert sorted(only_ana) == sorted([ids["ana_asks"], ids["ana_dolomites"]])
    response = msearch(client, pid, "Where did Ben go hiking?", {"user_id": "u1"}, mode="hybrid")
    assert "speakers" in response.json()["timings_ms"]


def test_messages_without_author_names_are_ranked_as_before() -> None:
    tenant = make_tenant("mem-speakers-roles")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(
        client,
        pid,
        [
            {"role": "user", "text": "I went hiking in the Alps, hiking is great."},
            {"role": "assistant", "text": "The assistant suggests a trek."},
        ],
        user_id="u1",
    )
    query = "What did the assistant suggest about hiking?"
    with override_settings(MEMORY_SPEAKER_OTHER_WEIGHT=1.0):
        plain = _ranked(client, pid, query, "hybrid")
    assert _ranked(client, pid, query, "hybrid") == plain and len(plain) == 2
