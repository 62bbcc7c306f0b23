"""Conversation-aware search (seed 003): documents, the user's other conversations, the documents
those referenced and the current conversation, fused into one ranking; real stack."""

from __future__ import annotations

from typing import Any

import pytest

from core import graph
from knowledge.dto import DocumentInput
from tests.conftest import Tenant, make_tenant
from tests.memory.helpers import assistant, store, user
from tests.retrieval.helpers import ingest_now, search

pytestmark = pytest.mark.django_db

TRAM = "Which tram goes up to the castle in Lisbon?"


def _world(tenant: Tenant) -> dict[str, str]:
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    lisbon, porto = ingest_now(
        pid,
        [
            DocumentInput(title="Lisbon trams", text="Tram 28 climbs from Baixa to the castle of São Jorge."),
            DocumentInput(title="Porto tides", text="High tide on the Douro river mouth is at noon."),
        ],
    )

    def conversation(messages: list[dict[str, Any]], **scope: str) -> str:
        response = store(client, pid, messages, **scope)
        assert response.status_code == 201, response.json()
        return response.json()["conversation_id"]

    ids = {
        "lisbon": lisbon,
        "porto": porto,
        "past": conversation(
            [user("Which tram climbs to the castle in Lisbon?"), assistant("Tram 28.", references=[lisbon])],
            user_id="ana",
            thread_id="t1",
        ),
        "private": conversation(
            [user("Which tram goes to the castle in Lisbon, privately?")], user_id="ana", thread_id="t2"
        ),
        "other_user": conversation(
            [user("Which tram goes up to the castle in Lisbon?")], user_id="bo", thread_id="t9"
        ),
        "current": conversation([user("Hello again"), assistant("Hi Ana")], user_id="ana", thread_id="t3"),
    }
    graph.write("MATCH (c:Conversation {id: $c}) SET c.accessibility = 'private'", c=ids["private"])
    graph.write("MATCH (m:Memory {conversation_id: $c}) SET m.accessibility = 'private'", c=ids["private"])
    return ids


def _body(ids: dict[str, str], **conversation: Any) -> dict[str, Any]:
    return {
        "query": TRAM,
        "mode": "hybrid",
        "top_k": 3,
        "conversation": {"conversation_id": ids["current"], "user_id": "ana", **conversation},
    }


def test_sources_are_fused_and_labelled_and_privacy_holds() -> None:
    tenant = make_tenant("conv-search")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    ids = _world(tenant)
    response = search(client, pid, **_body(ids, min_similarity=0.0))
    assert response.status_code == 200, response.json()
    body = response.json()
    by_source: dict[str, list[dict[str, Any]]] = {}
    for item in body["items"]:
        for source in item["sources"]:
            by_source.setdefault(source, []).append(item)
    past_conversations = {i["conversation_id"] for i in by_source["past_conversation"]}
    assert past_conversations == {ids["past"]}  # not the private one, not bo's, not the current one
    assert {i["document_id"] for i in by_source["referenced_document"]} == {ids["lisbon"]}
    assert {i["conversation_id"] for i in by_source["recent_conversation"]} == {ids["current"]}
    assert [i["text"] for i in by_source["recent_conversation"]] == ["Hi Ana", "Hello again"]
    assert {i["document_id"] for i in by_source["document"]} == {ids["lisbon"], ids["porto"]}
    # the Lisbon chunk was found as a document and through the past conversation's reference
    lisbon = next(i for i in body["items"] if i.get("document_id") == ids["lisbon"])
    assert set(lisbon["sources"]) == {"document", "referenced_document"}
    assert body["items"][0] is not None and body["items"][0]["document_id"] == ids["lisbon"]
    scores = [i["score"] for i in body["items"]]
    assert scores == sorted(scores, reverse=True)
    assert body["conversation"]["counts"]["past_conversation"] >= 1
    texts = " ".join(i["text"] for i in body["items"])
    assert "privately" not in texts


def test_the_threshold_and_per_source_limits_apply() -> None:
    tenant = make_tenant("conv-search-limits")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    ids = _world(tenant)
    strict = search(client, pid, **_body(ids, min_similarity=1.0)).json()
    assert strict["conversation"]["counts"]["past_conversation"] == 0
    assert strict["conversation"]["counts"]["referenced_document"] == 0
    none = search(client, pid, **_body(ids, past=0, recent=0, min_similarity=0.0)).json()
    assert {i["source"] for i in none["items"]} == {"document"}
    one = search(client, pid, **_body(ids, recent=1)).json()
    assert [i["text"] for i in one["items"] if i["source"] == "recent_conversation"] == ["Hi Ana"]


def test_another_users_or_projects_conversation_is_not_found_and_bad_input_is_refused() -> None:
    tenant, other = make_tenant("conv-search-bad"), make_tenant("conv-search-bad-other")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    ids = _world(tenant)
    theirs = _body(ids)
    theirs["conversation"]["conversation_id"] = ids["other_user"]
    assert search(client, pid, **theirs).status_code == 404
    outsider = other.client(other.read_key)
    assert search(outsider, other.project.id, **_body(ids)).status_code == 404
    for conversation in (
        {"conversation_id": ids["current"]},
        {"conversation_id": ids["current"], "user_id": "ana", "past": 51},
        {"conversation_id": ids["current"], "user_id": "ana", "min_similarity": 1.5},
        {"conversation_id": ids["current"], "user_id": "ana", "colour": "red"},
    ):
        assert search(client, pid, query=TRAM, conversation=conversation).status_code == 400, conversation
    assert search(client, pid, **_body(ids), profile="default").status_code == 400


def test_past_messages_come_through_the_user_filtered_index_and_match_the_exact_scan(settings) -> None:  # type: ignore[no-untyped-def]
    """The past-conversation source asks the vector index for the user's messages only (Neo4j 2026.01+
    filters inside the index): on 600 random vectors of one user among 1,200, its top 5 for 10 queries
    are the exact top 5 of the user's messages outside the current conversation (or nearly: the
    index is approximate), and the current conversation, other users and private messages never
    appear."""
    import numpy as np

    from memory import cypher
    from memory.indexes import filtered_vector_index
    from memory.scope import Scope
    from memory.selectors import MessageSearch

    tenant = make_tenant("conv-past-index")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    rng = np.random.default_rng(7)

    def unit(n: int) -> np.ndarray:
        vectors = rng.standard_normal((n, 384)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    for user_id, threads in (("ana", 6), ("bo", 6)):
        for t in range(threads):
            messages = [
                user(f"{user_id} {t} note {i}", embedding=v.tolist()) for i, v in enumerate(unit(100))
            ]
            assert store(client, pid, messages, user_id=user_id, thread_id=f"t{t}").status_code == 201
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p, user_id: 'ana'}) "
        "RETURN m.id AS id, m.embedding AS e, m.conversation_id AS c, m.thread_id AS t",
        p=pid,
    )
    current = next(r["c"] for r in rows if r["t"] == "t0")
    private = next(r["c"] for r in rows if r["t"] == "t1")
    graph.write("MATCH (m:Memory {conversation_id: $c}) SET m.accessibility = 'private'", c=private)
    eligible = [r for r in rows if r["c"] not in (current, private)]
    stored = np.asarray([r["e"] for r in eligible], dtype=np.float32)
    assert filtered_vector_index()  # the suite's Neo4j is 2026.01 or later
    found = 0
    for q in unit(10):
        # random vectors are unrelated (score about 0.5): no floor, the index is what is compared
        search = MessageSearch(
            project_id=pid, scope=Scope(user_id="ana"), query="", vector=q.tolist(), vector_floor=0.0
        )
        hits = search.user_vector_memories(5, where=cypher.PAST_MESSAGES_WHERE, current_conversation=current)
        assert "vector_index" in search.timings_ms and "vector" not in search.timings_ms
        exact = {eligible[i]["id"] for i in np.argsort(-(stored @ q))[:5]}
        assert {h.chunk_id for h in hits} <= {r["id"] for r in eligible}
        found += len({h.chunk_id for h in hits} & exact)
    assert found >= 48  # of 50
