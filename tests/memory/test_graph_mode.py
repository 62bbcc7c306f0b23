"""Graph-mode memory search: hybrid spread through the mentions messages share (issue 34, "multi-hop
memory"), on the real stack; and the mention keys a message keeps (memory.text.mention_keys)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from core import graph
from memory.indexes import _backfill_indexed_forms
from memory.text import MENTION_KEYS_MAX, mention_keys
from tests.conftest import make_tenant
from tests.curation.helpers import carriers
from tests.memory.helpers import msearch, store, user


@pytest.mark.unit
def test_mention_keys_are_names_and_pairs_of_content_words() -> None:
    keys = mention_keys("Thanks! This necklace is from my grandma in my home country, Sweden.")
    assert "sweden" in keys and "home country" in keys and "grandma home" in keys
    assert "thanks" not in keys and "this" not in keys  # sentence starts are not names
    assert all(" my " not in f" {k} " for k in keys)  # function words link nothing
    assert mention_keys("We met Zoë in Zürich.") == ["zoë", "zürich", "met zoë", "zoë zürich"]
    assert "mcgee" in mention_keys("I read it at McGee's place.")  # one tokenizer with fulltext
    assert mention_keys("") == [] and mention_keys("I am so. It is.") == []
    assert len(mention_keys(" ".join(f"word{i}" for i in range(500)))) == MENTION_KEYS_MAX


FILLER = [
    "We moved the couch into the living room yesterday.",
    "Moving furniture is tiring, my back hurts.",
    "The weather was lovely for a walk by the river.",
    "I baked bread this morning, it came out well.",
    "Work was busy, lots of meetings about the budget.",
]


def _setup(name: str) -> tuple[Any, str, dict[str, str]]:
    tenant = make_tenant(name)
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    moved = store(
        client,
        pid,
        [user("I moved here from my home country four years ago."), *(user(t) for t in FILLER)],
        user_id="u1",
        thread_id="s1",
    ).json()["stored"]
    necklace = store(
        client,
        pid,
        [
            user(
                "My grandma gave me this necklace in my home country, Sweden.",
                timestamp="2024-03-01T10:00:00Z",
            ),
            user("The garden needs watering again."),
        ],
        user_id="u1",
        thread_id="s2",
    ).json()["stored"]
    # another user's message holds the same mention: never reached from u1's searches
    other = store(client, pid, [user("Back in my home country we moved often.")], user_id="u2").json()[
        "stored"
    ]
    return client, pid, {"moved": moved[0]["id"], "necklace": necklace[0]["id"], "other": other[0]["id"]}


def _scores(client: Any, pid: str, mode: str, **body: Any) -> dict[str, float]:
    response = msearch(client, pid, "Where did I move from?", {"user_id": "u1"}, mode=mode, top_k=20, **body)
    assert response.status_code == 200, response.content
    assert response.json()["mode"] == mode
    return {item["id"]: item["score"] for item in response.json()["items"] if item["level"] == "message"}


@pytest.mark.django_db
def test_graph_mode_lifts_the_turns_that_share_a_mention_with_the_best_hits() -> None:
    client, pid, ids = _setup("mem-graph-spread")
    hybrid = _scores(client, pid, "hybrid")
    graph_mode = _scores(client, pid, "graph")
    assert ids["moved"] in hybrid and next(iter(hybrid)) == ids["moved"]
    # the necklace turn shares "home country" with the best hit, and only it does: it gets the whole
    # weighted spread on top of its hybrid score
    assert graph_mode[ids["necklace"]] == pytest.approx(hybrid.get(ids["necklace"], 0.0) + 0.2, abs=2e-6)
    assert list(graph_mode).index(ids["necklace"]) < (
        list(hybrid).index(ids["necklace"]) if ids["necklace"] in hybrid else len(hybrid)
    )
    for memory_id, score in hybrid.items():  # what shares nothing keeps its hybrid score
        if memory_id != ids["necklace"]:
            assert graph_mode[memory_id] == pytest.approx(score, abs=2e-6)
    assert ids["other"] not in graph_mode  # another user's memory is never reached
    with override_settings(MEMORY_GRAPH_WEIGHT=0.5):
        assert _scores(client, pid, "graph")[ids["necklace"]] == pytest.approx(
            hybrid.get(ids["necklace"], 0.0) + 0.5, abs=2e-6
        )
    # filters hold for what is spread to: the necklace turn is of 2024
    assert ids["necklace"] not in _scores(client, pid, "graph", until="2024-01-01")


@pytest.mark.django_db
def test_mention_keys_are_stored_backfilled_and_anonymised() -> None:
    from curation.services import conversation_anonymise_now

    client, pid, ids = _setup("mem-graph-keys")
    (row,) = graph.read("MATCH (m:Memory {id: $id}) RETURN m.mention_keys AS keys", id=ids["necklace"])
    assert "home country" in row["keys"] and "sweden" in row["keys"]
    # a message stored before mention keys existed gets them when memory is first used
    graph.write("MATCH (m:Memory {project_id: $p}) REMOVE m.mention_keys", p=pid)
    assert _backfill_indexed_forms() >= 8
    (row,) = graph.read("MATCH (m:Memory {id: $id}) RETURN m.mention_keys AS keys", id=ids["necklace"])
    assert "sweden" in row["keys"]
    assert _scores(client, pid, "graph")[ids["necklace"]] > 0
    # anonymising rewrites them from the anonymised text: no copy of a name is left
    body = store(
        client, pid, [user("I am called Rita Moreno, the harbour ferry was late.")], user_id="u3"
    ).json()
    assert carriers(pid, "rita moreno")  # the indexed form and the mention keys are lower-cased
    conversation_anonymise_now(project_id=pid, conversation_id=body["conversation_id"], actor="test")
    assert carriers(pid, "rita") == [] and carriers(pid, "moreno") == []
