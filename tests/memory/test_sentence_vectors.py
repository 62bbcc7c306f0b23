"""Sentence vectors (memory.vectors): a message of several sentences is embedded sentence by sentence,
its own vector their normalised mean, and vector ranking scores its candidates by their best sentence
too (MessageSearch.sentence_rescored). Every path that writes a message's vector writes both: a store,
the worker's embedding, a chat-less store with processing off, anonymisation; a supplied embedding
comes without. On the real stack, with the local model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.test import override_settings

from core import graph
from core.embeddings import get_embedder
from memory import services
from memory.retention import MessageRewrite, messages_anonymised_write
from memory.text import line, sentences
from memory.vectors import folded, pieces
from tests.conftest import make_tenant
from tests.memory.helpers import msearch, store, user

DAY = "2023-05-08T13:56:00Z"
LONG = (
    "Thanks for asking! The weather was lovely all week. My sister Lena moved to Stockholm to study "
    "architecture. We ate far too much ice cream."
)
SHORT = "I repainted the kitchen a pale green colour."
QUERY = "Which city did Lena move to for her architecture studies?"


def _row(text: str) -> dict[str, Any]:
    return {"text": text, "role": "user", "author_name": "Mia", "timestamp": DAY}


@pytest.mark.unit
def test_a_message_is_embedded_as_its_line_or_as_one_line_per_sentence(settings) -> None:  # type: ignore[no-untyped-def]
    assert sentences(LONG) == [
        "Thanks for asking!",
        "The weather was lovely all week.",
        "My sister Lena moved to Stockholm to study architecture.",
        "We ate far too much ice cream.",
    ]
    assert sentences("  ") == [] and sentences("No break.Here") == ["No break.Here"]
    assert sentences("你好。今天很好！ 谢谢") == ["你好。今天很好！", "谢谢"]
    assert pieces(_row(SHORT)) == [line(**_row(SHORT))]
    # a sentence of fewer than MEMORY_SENTENCE_MIN_WORDS (5) words joins the one after it
    thanks, *rest = sentences(LONG)
    assert pieces(_row(LONG)) == [
        line(**{**_row(LONG), "text": s}) for s in [f"{thanks} {rest[0]}", *rest[1:]]
    ]
    settings.MEMORY_SENTENCE_MIN_WORDS = 1
    assert pieces(_row(LONG)) == [line(**{**_row(LONG), "text": s}) for s in sentences(LONG)]
    settings.MEMORY_SENTENCE_MIN_WORDS = 5
    # past the most vectors a message may have, its sentences go in runs, in order, none lost
    settings.MEMORY_SENTENCE_VECTORS_MAX = 3
    many = " ".join(f"Here is the sentence number {i}." for i in range(8))
    runs = pieces(_row(many))
    assert len(runs) == 3
    prefix = line(**{**_row(many), "text": ""})
    assert " ".join(r[len(prefix) :] for r in runs) == many
    assert [r.count("sentence number") for r in runs] == [3, 3, 2]
    settings.MEMORY_SENTENCE_VECTORS = False
    assert pieces(_row(LONG)) == [line(**_row(LONG))]


@pytest.mark.unit
def test_short_sentences_join_a_neighbour_and_a_message_of_short_ones_is_one_line() -> None:
    assert folded(["Wow!", "You went to Paris in May?"], 5) == ["Wow! You went to Paris in May?"]
    assert folded(["I went to Paris in May.", "So fun!"], 5) == ["I went to Paris in May. So fun!"]
    assert folded(["Oh.", "Wow.", "You went to Paris in May?", "Nice."], 5) == [
        "Oh. Wow. You went to Paris in May? Nice."
    ]
    long_one, other = "I went to Paris in May.", "My sister Lena moved to Stockholm."
    assert folded([long_one, "Yes!", other], 5) == [long_one, f"Yes! {other}"]
    assert folded([long_one, other], 5) == [long_one, other]
    assert folded(["Hi."], 5) == ["Hi."] and folded([], 5) == []
    assert folded(["Hi.", "Yo."], 1) == ["Hi.", "Yo."]
    chatter = "Hi! Thanks so much. See you soon!"  # every sentence short: one line, one vector
    assert pieces(_row(chatter)) == [line(**_row(chatter))]


def _vectors(project_id: str) -> dict[str, dict[str, Any]]:
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p}) RETURN m.text AS text, m.embedding AS embedding, "
        "m.sentence_embeddings AS sentences",
        p=project_id,
    )
    return {r["text"]: r for r in rows}


def _expected(text: str) -> tuple[np.ndarray, np.ndarray | None]:
    lines = pieces(_row(text))
    vectors = np.asarray(get_embedder().embed(lines), dtype=np.float32)
    if len(lines) == 1:
        return vectors[0], None
    mean = vectors.mean(axis=0)
    return mean / np.linalg.norm(mean), vectors


def _neo4j_cosine(vector: np.ndarray, query: list[float]) -> float:
    """Neo4j's vector.similarity.cosine of the two, (1 + cos) / 2, computed here in float64."""
    v, q = vector.astype(np.float64), np.asarray(query, dtype=np.float64)
    return float((1 + v @ q / (np.linalg.norm(v) * np.linalg.norm(q))) / 2)


def _check_stored(project_id: str, texts: list[str]) -> None:
    stored = _vectors(project_id)
    assert set(stored) == set(texts)
    for text in texts:
        embedding, per_sentence = _expected(text)
        assert np.allclose(stored[text]["embedding"], embedding, atol=1e-5), text
        if per_sentence is None:
            assert stored[text]["sentences"] is None, text
        else:
            got = np.asarray(stored[text]["sentences"], dtype=np.float32).reshape(per_sentence.shape)
            assert np.allclose(got, per_sentence, atol=1e-5), text


def _messages(*texts: str) -> list[dict[str, Any]]:
    return [user(t, author_name="Mia", timestamp=DAY) for t in texts]


@pytest.mark.django_db
def test_a_store_writes_the_mean_and_each_sentences_vector_and_a_supplied_embedding_has_none() -> None:
    tenant = make_tenant("mem-sentences-store")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    assert store(client, pid, _messages(LONG, SHORT), user_id="u1").status_code == 201
    _check_stored(pid, [LONG, SHORT])

    supplied = [0.5] * 384
    other = "Hello there. This one comes with its vector."
    body = store(client, pid, [user(other, embedding=supplied)], user_id="u2")
    assert body.status_code == 201, body.content
    row = _vectors(pid)[other]
    assert row["sentences"] is None and np.allclose(row["embedding"], supplied)


@pytest.mark.django_db
def test_vector_ranking_scores_a_long_message_by_its_best_sentence_too() -> None:
    tenant = make_tenant("mem-sentences-rank")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    fillers = [
        "The train to work was late again this morning.",
        "We should try the new ramen place near the office.",
        "My laptop battery barely lasts two hours now.",
    ]
    body = store(client, pid, _messages(LONG, SHORT, *fillers), user_id="u1").json()
    ids = dict(zip([LONG, SHORT, *fillers], [s["id"] for s in body["stored"]], strict=True))

    def scores(weight: float) -> tuple[dict[str, float], dict[str, Any]]:
        with override_settings(MEMORY_SENTENCE_WEIGHT=weight):
            response = msearch(client, pid, QUERY, {"user_id": "u1"}, mode="vector", min_score=0, top_k=10)
        assert response.status_code == 200, response.content
        out = response.json()
        return {item["id"]: item["score"] for item in out["items"]}, out["timings_ms"]

    plain, timings = scores(0.0)
    assert "sentences" not in timings
    rescored, timings = scores(0.5)
    assert "sentences" in timings
    assert rescored.keys() == plain.keys() == set(ids.values())

    query = get_embedder().embed_one(QUERY)

    mean, per_sentence = _expected(LONG)
    assert per_sentence is not None
    best = max(_neo4j_cosine(v, query) for v in per_sentence)
    assert plain[ids[LONG]] == pytest.approx(_neo4j_cosine(mean, query), abs=1e-4)
    assert best > plain[ids[LONG]]  # the sentence about Lena is nearer than the whole turn
    expected = plain[ids[LONG]] + 0.5 * (best - plain[ids[LONG]])
    assert rescored[ids[LONG]] == pytest.approx(expected, abs=1e-4)
    for text in (SHORT, *fillers):  # one sentence each: nothing to rescore
        assert rescored[ids[text]] == pytest.approx(plain[ids[text]], abs=1e-6), text
    assert max(rescored, key=rescored.__getitem__) == ids[LONG]

    # another user's search never reads this user's sentences
    other = msearch(client, pid, QUERY, {"user_id": "u2"}, mode="vector", min_score=0).json()
    assert other["items"] == []


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["hybrid", "graph"])
def test_hybrid_and_graph_rank_with_the_rescored_vector_side(mode: str) -> None:
    tenant = make_tenant(f"mem-sentences-{mode}")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(client, pid, _messages(LONG, SHORT), user_id="u1")
    response = msearch(client, pid, QUERY, {"user_id": "u1"}, mode=mode, min_score=0)
    assert response.status_code == 200, response.content
    body = response.json()
    assert "sentences" in body["timings_ms"]
    assert body["items"][0]["text"] == LONG


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker_process")
def test_the_workers_embedding_writes_sentence_vectors_too(held) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("mem-sentences-worker")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    response = client.post(
        f"/api/v1/projects/{pid}/memories",
        {"messages": _messages(LONG, SHORT), "scope": {"user_id": "u1"}, "embed_in_worker": True},
        format="json",
    )
    assert response.status_code == 202, response.content
    ids = [s["id"] for s in response.json()["stored"]]
    assert all(r["embedding"] is None and r["sentences"] is None for r in _vectors(pid).values())
    assert services.memories_embed_pending(project_id=pid, memory_ids=ids) == 2
    _check_stored(pid, [LONG, SHORT])


@pytest.mark.django_db
def test_with_processing_off_a_store_embeds_its_sentences_itself(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_PROCESS_ON_STORE = False
    tenant = make_tenant("mem-sentences-noprocess")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    assert store(client, pid, _messages(LONG, SHORT), user_id="u1").status_code == 201
    _check_stored(pid, [LONG, SHORT])


@pytest.mark.django_db
def test_anonymising_replaces_the_sentence_vectors_of_the_original() -> None:
    tenant = make_tenant("mem-sentences-anonymise")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    greeting = "Good morning to you all! I adopted a cat named Pixel from the shelter on Elm Street."
    body = store(client, pid, _messages(LONG, greeting), user_id="u1").json()
    long_id, greeting_id = (s["id"] for s in body["stored"])
    assert all(r["sentences"] is not None for r in _vectors(pid).values())
    anonymised_long = LONG.replace("Lena", "[PERSON]").replace("Stockholm", "[LOCATION]")
    anonymised_greeting = "[PERSON] adopted a cat."  # one sentence now: no sentence vectors left
    messages_anonymised_write(
        project_id=pid,
        rewrites=[
            MessageRewrite(long_id, anonymised_long, "[PERSON]", role="user", timestamp=DAY),
            MessageRewrite(greeting_id, anonymised_greeting, "[PERSON]", role="user", timestamp=DAY),
        ],
    )
    stored = _vectors(pid)
    assert set(stored) == {anonymised_long, anonymised_greeting}
    lines = pieces({"text": anonymised_long, "role": "user", "author_name": "[PERSON]", "timestamp": DAY})
    assert len(lines) == 3
    expected = np.asarray(get_embedder().embed(lines), dtype=np.float32)
    got = np.asarray(stored[anonymised_long]["sentences"], dtype=np.float32).reshape(expected.shape)
    assert np.allclose(got, expected, atol=1e-5)
    assert stored[anonymised_greeting]["sentences"] is None


@pytest.mark.django_db
def test_conversation_aware_search_scores_past_messages_by_their_best_sentence_too() -> None:
    """The `past_conversation` source (memory.conversation_search) judges its threshold on a message's
    own vector, then rescores as memory search does; another user's past never comes back."""
    from memory.conversation_search import _limits, _past
    from retrieval.conversation import ConversationQuery

    tenant = make_tenant("mem-sentences-conversation")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    own = set()
    near = "Lena sent me photos of her new flat in Stockholm near the architecture school."  # one sentence
    for text, thread in ((LONG, "t1"), (near, "t2")):
        response = store(client, pid, _messages(text), user_id="u1", thread_id=thread)
        assert response.status_code == 201, response.content
        own.add(response.json()["conversation_id"])
    assert store(client, pid, _messages(LONG), user_id="u2", thread_id="t1").status_code == 201
    current = store(client, pid, _messages("Where was I?"), user_id="u1", thread_id="t3").json()
    query = ConversationQuery(
        conversation_id=current["conversation_id"], user_id="u1", min_similarity=0.0, past=5
    )
    vector = get_embedder().embed_one(QUERY)

    def past(weight: float) -> dict[str, float]:
        with override_settings(MEMORY_SENTENCE_WEIGHT=weight):
            items = _past(pid, QUERY, vector, query, _limits(query))
        assert {item.conversation_id for item in items} == own  # not u2's, not the current one
        return {item.text: item.score for item in items}

    plain, rescored = past(0.0), past(0.5)
    assert set(plain) == set(rescored) == {LONG, near}
    mean, per_sentence = _expected(LONG)
    assert per_sentence is not None
    best = max(_neo4j_cosine(v, vector) for v in per_sentence)
    assert plain[LONG] == pytest.approx(_neo4j_cosine(mean, vector), abs=1e-4)
    assert best > plain[LONG] + 0.01  # the sentence about Lena is nearer than the whole turn
    assert rescored[LONG] == pytest.approx(plain[LONG] + 0.5 * (best - plain[LONG]), abs=1e-4)
    assert rescored[near] == pytest.approx(plain[near], abs=1e-6)
    # the threshold is judged on the message's own vector: a rise past it does not let a message in
    strict = ConversationQuery(
        conversation_id=current["conversation_id"], user_id="u1", min_similarity=plain[LONG] + 1e-4, past=5
    )
    assert LONG not in {item.text for item in _past(pid, QUERY, vector, strict, _limits(strict))}
