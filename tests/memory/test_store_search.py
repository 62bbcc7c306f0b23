"""Storing and searching memories on the real stack (seed 000's memory, seed 001's Phase 1)."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from core import graph
from memory import cypher
from memory.indexes import (
    built_vector_index_config,
    check_version,
    ensure_memory_indexes,
    forget_ready,
    version_supports_vectors,
)
from retrieval import fusion
from retrieval.dto import Candidate
from tests.conftest import make_tenant
from tests.memory.helpers import assistant, count, msearch, store, user

pytestmark = pytest.mark.django_db


def test_store_a_batch_in_order_with_conversation_and_next_chain() -> None:
    tenant = make_tenant("mem-store")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    first = store(
        client,
        pid,
        [
            user("Hi, I am planning a trip to Lisbon.", message_id="m1", author_name="Ana"),
            assistant("Lovely city!"),
        ],
        user_id="ana",
        thread_id="t1",
    )
    assert first.status_code == 201, first.json()
    body = first.json()
    assert [s["seq"] for s in body["stored"]] == [1, 2]
    assert body["skipped"] == []
    second = store(client, pid, [user("What should I pack?")], user_id="ana", thread_id="t1").json()
    assert second["conversation_id"] == body["conversation_id"]
    assert second["stored"][0]["seq"] == 3
    rows = graph.read(
        "MATCH (c:Conversation {id: $c})<-[:PART_OF]-(m:Memory) RETURN m.text AS text, m.seq AS seq, "
        "m.role AS role, m.user_id AS user_id, m.thread_id AS thread_id, m.message_id AS message_id, "
        "m.author_name AS author, size(m.embedding) AS dims, m.timestamp AS ts ORDER BY m.seq",
        c=body["conversation_id"],
    )
    assert [r["text"] for r in rows] == [
        "Hi, I am planning a trip to Lisbon.",
        "Lovely city!",
        "What should I pack?",
    ]
    assert rows[0]["message_id"] == "m1" and rows[0]["author"] == "Ana"
    assert all(r["user_id"] == "ana" and r["thread_id"] == "t1" and r["dims"] == 384 for r in rows)
    assert rows[0]["ts"].endswith("Z")
    chain = graph.read(
        "MATCH p = (a:Memory)-[:NEXT*]->(b:Memory) WHERE a.conversation_id = $c AND a.seq = 1 "
        "RETURN [n IN nodes(p) | n.seq] AS seqs ORDER BY length(p) DESC LIMIT 1",
        c=body["conversation_id"],
    )
    assert chain[0]["seqs"] == [1, 2, 3]


def test_every_framework_role_is_stored_and_another_is_refused() -> None:
    tenant = make_tenant("mem-roles")
    client = tenant.client(tenant.write_key)
    response = store(
        client,
        tenant.project.id,
        [{"role": "system", "text": "You are helpful."}, user("keep me"), {"role": "tool", "text": "{}"}],
        agent_id="a1",
    )
    assert response.status_code == 201
    body = response.json()
    assert [s["index"] for s in body["stored"]] == [0, 1, 2] and body["skipped"] == []
    refused = store(
        client, tenant.project.id, [user("not this either"), {"role": "narrator", "text": "x"}], agent_id="a1"
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["details"]["field"] == "messages[1].role"
    assert count("Memory", tenant.project.id) == 3


def test_client_supplied_embeddings_are_stored_as_their_float32_values() -> None:
    tenant = make_tenant("mem-emb")
    vector: list[float] = [0.0] * 384
    vector[7] = 1.0
    other = [(-1) ** i * i / 997 for i in range(384)]
    other[0] = 1  # an integer is stored as a float
    response = store(
        tenant.client(tenant.write_key),
        tenant.project.id,
        [user("precomputed", embedding=vector), user("another", embedding=other)],
        user_id="u",
    )
    assert response.status_code == 201
    stored = graph.read(
        "MATCH (m:Memory {project_id: $p}) RETURN m.embedding AS e ORDER BY m.seq", p=tenant.project.id
    )
    # float32, the precision of Neo4j's vector index: i / 997 is not a float32 value, so it changes
    assert [row["e"] for row in stored] == [
        vector,
        np.asarray(other, dtype=np.float32).astype(np.float64).tolist(),
    ]
    assert stored[1]["e"][1] != other[1]
    assert all(type(x) is float for x in stored[1]["e"])


def test_base64_float32_embeddings_are_stored_as_their_values_and_found() -> None:
    tenant = make_tenant("mem-emb-b64")
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(3, 384)).astype("<f4")
    response = store(
        tenant.client(tenant.write_key),
        tenant.project.id,
        [
            user(f"message {i}", embedding=base64.b64encode(vector.tobytes()).decode())
            for i, vector in enumerate(vectors)
        ],
        user_id="u",
    )
    assert response.status_code == 201, response.json()
    stored = graph.read(
        "MATCH (m:Memory {project_id: $p}) RETURN m.embedding AS e ORDER BY m.seq", p=tenant.project.id
    )
    assert [row["e"] for row in stored] == vectors.astype(np.float64).tolist()
    # and the vector index holds them: each is its own nearest neighbour
    for i, vector in enumerate(vectors):
        nearest = graph.read(
            "CALL db.index.vector.queryNodes($index, 50, $v) YIELD node, score "
            "WHERE node.project_id = $p RETURN node.text AS text LIMIT 1",
            index=cypher.VECTOR_INDEX,
            v=vector.tolist(),
            p=tenant.project.id,
        )
        assert nearest == [{"text": f"message {i}"}]


def test_a_batch_may_mix_base64_and_json_embeddings() -> None:
    tenant = make_tenant("mem-emb-mixed")
    rng = np.random.default_rng(8)
    vectors = rng.normal(size=(3, 384)).astype("<f4")
    as_ints = [int(x * 100) or 1 for x in vectors[2]]
    response = store(
        tenant.client(tenant.write_key),
        tenant.project.id,
        [
            user("json", embedding=vectors[0].tolist()),
            user("base64", embedding=base64.b64encode(vectors[1].tobytes()).decode()),
            user("integers", embedding=as_ints),
        ],
        user_id="u",
    )
    assert response.status_code == 201, response.json()
    stored = graph.read(
        "MATCH (m:Memory {project_id: $p}) RETURN m.text AS t, m.embedding AS e ORDER BY m.seq",
        p=tenant.project.id,
    )
    assert [row["t"] for row in stored] == ["json", "base64", "integers"]
    assert stored[0]["e"] == vectors[0].astype(np.float64).tolist()
    assert stored[1]["e"] == vectors[1].astype(np.float64).tolist()
    assert stored[2]["e"] == [float(x) for x in as_ints]


@pytest.mark.parametrize("mode", ["vector", "fulltext", "hybrid"])
def test_search_modes_find_the_relevant_memory(mode: str) -> None:
    tenant = make_tenant(f"mem-search-{mode}")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(
        client,
        pid,
        [
            user("My sister's wedding is in June in Porto."),
            user("I need to renew my passport before travelling."),
            user("The quarterly sales report is due on Friday."),
        ],
        user_id="u1",
    )
    response = msearch(
        client, pid, "passport renewal before travelling", {"user_id": "u1"}, mode=mode, top_k=2
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["mode"] == mode
    assert body["items"][0]["text"] == "I need to renew my passport before travelling."
    assert body["items"][0]["level"] == "message"
    assert body["items"][0]["scope"]["user_id"] == "u1"
    scores = [i["score"] for i in body["items"]]
    assert scores == sorted(scores, reverse=True)


def test_blank_query_lists_recent_memories_and_default_mode_is_hybrid() -> None:
    tenant = make_tenant("mem-recency")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(client, pid, [user("one"), user("two"), user("three")], user_id="u1")
    body = msearch(client, pid, "", {"user_id": "u1"}, top_k=2).json()
    assert body["mode"] == "recency"
    assert [i["text"] for i in body["items"]] == ["three", "two"]
    assert msearch(client, pid, "two", {"user_id": "u1"}).json()["mode"] == "hybrid"
    bad = msearch(client, pid, "  ", {"user_id": "u1"}, mode="vector")
    assert bad.status_code == 400


def test_scope_filters_are_exact() -> None:
    """A search scoped to user A never returns user B's memories, even far more similar ones; a
    user id that is a prefix or a Lucene/Cypher look-alike of another is another user."""
    tenant = make_tenant("mem-exact")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(client, pid, [user("I adore green tea with jasmine.")], user_id="alice", thread_id="ta")
    for other in ("bob", "alice-smith", 'alice" OR 1=1', "alice`})", "ALICE", "alice*", "user_id:alice"):
        store(
            client,
            pid,
            [user("green tea with jasmine, green tea with jasmine")],
            user_id=other,
            thread_id="tb",
        )
    for mode in ("vector", "fulltext", "hybrid", "recency"):
        query = "" if mode == "recency" else "green tea jasmine"
        items = msearch(client, pid, query, {"user_id": "alice"}, mode=mode, top_k=50).json()["items"]
        assert [i["scope"]["user_id"] for i in items] == ["alice"], mode
    # user A with user B's thread: empty, whatever the mode
    for mode in ("vector", "fulltext", "hybrid", "recency"):
        query = "" if mode == "recency" else "green tea"
        body = msearch(client, pid, query, {"user_id": "alice", "thread_id": "tb"}, mode=mode).json()
        assert body["items"] == [], mode
    # odd scope values are plain values, found exactly
    odd = 'alice" OR 1=1'
    items = msearch(client, pid, "green tea", {"user_id": odd}, mode="fulltext").json()["items"]
    assert [i["scope"]["user_id"] for i in items] == [odd]


def test_memory_indexes_are_created_lazily_and_idempotently() -> None:
    for name in ("memory_embeddings", "memory_fulltext", "memory_level_fulltext"):
        graph.write_autocommit(f"DROP INDEX {name} IF EXISTS")
    forget_ready()
    tenant = make_tenant("mem-idx")
    assert (
        store(tenant.client(tenant.write_key), tenant.project.id, [user("hello")], user_id="u").status_code
        == 201
    )
    names = {r["name"] for r in graph.read("SHOW INDEXES YIELD name RETURN name")}
    assert {"memory_embeddings", "memory_fulltext", "memory_level_fulltext"} <= names
    scoped = graph.read(
        "SHOW RANGE INDEXES YIELD labelsOrTypes, properties WHERE labelsOrTypes = ['Memory'] "
        "RETURN collect(properties[0]) AS props"
    )[0]["props"]
    assert {"user_id", "thread_id", "agent_id", "application_id"} <= set(scoped)
    forget_ready()
    ensure_memory_indexes()  # a second time: IF NOT EXISTS, no error
    assert {r["name"] for r in graph.read("SHOW INDEXES YIELD name RETURN name")} == names


@pytest.fixture
def default_memory_indexes():  # type: ignore[no-untyped-def]
    yield
    forget_ready()
    ensure_memory_indexes(overwrite=True)  # back to the settings' defaults for the other tests


def _vector_index_config() -> dict[str, object]:
    return built_vector_index_config()


def test_the_memory_vector_index_is_built_as_the_settings_say(
    default_memory_indexes, settings, caplog
) -> None:  # type: ignore[no-untyped-def]
    built = _vector_index_config()
    assert built["vector.hnsw.m"] == settings.MEMORY_VECTOR_INDEX_M == 16
    assert built["vector.hnsw.ef_construction"] == settings.MEMORY_VECTOR_INDEX_EF_CONSTRUCTION == 100
    assert built["vector.quantization.enabled"] is settings.MEMORY_VECTOR_INDEX_QUANTIZATION is False
    settings.MEMORY_VECTOR_INDEX_M = 8
    settings.MEMORY_VECTOR_INDEX_EF_CONSTRUCTION = 40
    settings.MEMORY_VECTOR_INDEX_QUANTIZATION = True
    # an existing index keeps its options: the next process says so, naming the differences
    forget_ready()
    with caplog.at_level("WARNING", logger="memory.indexes"):
        ensure_memory_indexes()
    assert "vector.hnsw.m: built 16, setting 8" in caplog.text
    assert "vector.hnsw.ef_construction: built 100, setting 40" in caplog.text
    assert "vector.quantization.enabled: built False, setting True" in caplog.text
    assert _vector_index_config()["vector.hnsw.m"] == 16
    # a new index is built with them, and then nothing differs
    caplog.clear()
    forget_ready()
    with caplog.at_level("WARNING", logger="memory.indexes"):
        ensure_memory_indexes(overwrite=True)
    assert caplog.text == ""
    built = _vector_index_config()
    assert (built["vector.hnsw.m"], built["vector.hnsw.ef_construction"]) == (8, 40)
    assert built["vector.quantization.enabled"] is True
    # stores and searches work on it
    tenant = make_tenant("mem-idx-options")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    assert store(client, pid, [user("the ferry leaves at noon")], user_id="u").status_code == 201
    assert msearch(client, pid, "ferry", {"user_id": "u"}, mode="vector").json()["items"][0]["text"] == (
        "the ferry leaves at noon"
    )


@pytest.mark.parametrize(("m", "ef"), [(0, 100), (16, 0), (513, 100), (16, 3201)])
def test_vector_index_options_outside_neo4j_limits_are_a_configuration_error(settings, m, ef) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_VECTOR_INDEX_M, settings.MEMORY_VECTOR_INDEX_EF_CONSTRUCTION = m, ef
    with pytest.raises(ImproperlyConfigured, match="MEMORY_VECTOR_INDEX_M"):
        cypher.index_statements()


def test_a_server_before_5_26_gets_the_index_without_build_options() -> None:
    statement = cypher.index_statements(hnsw_options=False)[0]
    assert "vector.hnsw" not in statement and "quantization" not in statement
    assert "`vector.dimensions`: 384" in statement


def test_a_neo4j_too_old_for_vector_indexes_gets_a_clear_error() -> None:
    assert version_supports_vectors("5.26.30") and version_supports_vectors("2025.01.0")
    assert version_supports_vectors("5.11.0") and not version_supports_vectors("5.10.0")
    assert not version_supports_vectors("4.4.30") and not version_supports_vectors("")
    with pytest.raises(Exception) as caught:
        check_version("4.4.30")
    assert caught.value.status_code == 503  # type: ignore[attr-defined]
    assert "5.11 or later" in str(caught.value) and "4.4.30" in str(caught.value)


def test_vector_search_of_a_large_scope_goes_through_the_index_and_matches_the_exact_top_10(settings) -> None:  # type: ignore[no-untyped-def]
    """A scope above MEMORY_EXACT_SCAN_MAX is searched through the memory vector index (over-fetched,
    filtered to the scope): its top 10 are the scope's own and, on 400 random vectors, the exact top 10
    (or nearly: the index is approximate)."""
    from core.embeddings import get_embedder

    settings.MEMORY_EXACT_SCAN_MAX = 50
    tenant = make_tenant("mem-vector-index")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    rng = np.random.default_rng(29)
    for user_id in ("ana", "bob"):
        vectors = rng.standard_normal((400, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        messages = [user(f"{user_id} note {i}", embedding=v.tolist()) for i, v in enumerate(vectors)]
        assert store(client, pid, messages, user_id=user_id).status_code == 201
    query = "where did I leave the blue notebook"
    # random vectors are all unrelated to the query: no relevance floor, the index is what is compared
    body = msearch(client, pid, query, {"user_id": "ana"}, mode="vector", top_k=10, min_score=0).json()
    assert "vector_index" in body["timings_ms"] and "vector" not in body["timings_ms"], body["timings_ms"]
    assert [item["scope"]["user_id"] for item in body["items"]] == ["ana"] * 10
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p, user_id: 'ana'}) RETURN m.id AS id, m.embedding AS e", p=pid
    )
    q = np.asarray(get_embedder().embed_one(query), dtype=np.float32)
    stored = np.asarray([r["e"] for r in rows], dtype=np.float32)
    exact = {rows[i]["id"] for i in np.argsort(-(stored @ q / np.linalg.norm(q)))[:10]}
    assert len({item["id"] for item in body["items"]} & exact) >= 9


@pytest.mark.parametrize("alpha", [0.9, 0.1])
def test_hybrid_memory_search_fuses_with_the_alpha_setting(settings, alpha: float) -> None:  # type: ignore[no-untyped-def]
    """Hybrid is the min-max scaled vector and fulltext rankings weighed MEMORY_HYBRID_ALPHA and
    1 - that (the context share off, so the fulltext side is exactly what fulltext mode returns)."""
    settings.MEMORY_HYBRID_ALPHA = alpha
    settings.MEMORY_CONTEXT_WEIGHT = 0.0
    tenant = make_tenant(f"mem-fusion-{alpha}")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    texts = [
        "The train to Lyon leaves at nine from platform four.",
        "I booked a train ticket to Lyon for my sister.",
        "Lyon has the best food markets, said my sister.",
        "Platform four was closed, so the nine o'clock train left late.",
        "My sister prefers the night bus to any train.",
        "We ate at a market stall near the station in Lyon.",
        "The bus station is next to the market.",
        "I lost my ticket on the way to the station.",
    ]
    store(client, pid, [user(t) for t in texts], user_id="u1")
    query = "which train to Lyon did my sister take"

    def ranking(mode: str) -> list[Candidate]:
        body = msearch(client, pid, query, {"user_id": "u1"}, mode=mode, top_k=50, depth="messages").json()
        return [Candidate(i["id"], i["score"]) for i in body["items"]]

    by_vector, by_text = ranking("vector"), ranking("fulltext")

    def fused(weight: float) -> list[str]:
        ranked = fusion.linear([by_vector, by_text], weights=[weight, 1 - weight], normalise="minmax")
        return [c.chunk_id for c in ranked]

    other = 0.1 if alpha == 0.9 else 0.9
    assert fused(alpha) != fused(other)  # the two weights rank these memories differently
    assert [c.chunk_id for c in ranking("hybrid")] == fused(alpha)


def test_a_reply_is_found_by_the_words_of_what_it_answers_in_hybrid_only(settings) -> None:  # type: ignore[no-untyped-def]
    """MEMORY_CONTEXT_WEIGHT: in hybrid, each fulltext hit's next message gets that share of its
    score, so an answer that repeats none of the question's words is found; fulltext mode returns only
    messages holding a query word; another thread's next message is never drawn in."""
    settings.MEMORY_MIN_SCORE_VECTOR = 0.99  # the vector side finds nothing: only fulltext and context
    tenant = make_tenant("mem-context")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    stored = store(
        client,
        pid,
        [
            user("Which bakery sells the sourdough loaves?"),
            assistant("The one on Rua Augusta, near the arch."),
        ],
        user_id="u1",
        thread_id="t1",
    ).json()["stored"]
    store(client, pid, [user("Nothing else was said here.")], user_id="u1", thread_id="t2")
    question, answer = (s["id"] for s in stored)

    def ids(mode: str) -> list[str]:
        body = msearch(client, pid, "sourdough bakery", {"user_id": "u1"}, mode=mode, depth="messages")
        return [i["id"] for i in body.json()["items"]]

    assert ids("fulltext") == [question]
    assert ids("hybrid") == [question, answer]
    settings.MEMORY_CONTEXT_WEIGHT = 0.0
    assert ids("hybrid") == [question]


def test_possessives_and_speakers_are_words_of_a_message(settings) -> None:  # type: ignore[no-untyped-def]
    """One tokenizer for what is indexed and what is asked (memory.text): "McGee" finds "McGee's"
    (typographic apostrophe too) and "McGee's" finds "McGee"; a message is found by its author's
    name and its day, which its text does not hold."""
    tenant = make_tenant("mem-words")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client,
        pid,
        [
            {
                "role": "user",
                "text": "We ate at McGee’s pub last night.",
                "author_name": "Jon",
                "timestamp": "2023-05-08T20:00:00Z",
            },
            {
                "role": "assistant",
                "text": "Did McGee himself serve you?",
                "author_name": "Gina",
                "timestamp": "2023-06-01T09:00:00Z",
            },
        ],
        user_id="u1",
    ).json()
    pub, serve = (s["id"] for s in body["stored"])

    def ids(query: str) -> set[str]:
        found = msearch(client, pid, query, {"user_id": "u1"}, mode="fulltext", depth="messages").json()
        return {i["id"] for i in found["items"]}

    assert ids("McGee") == {pub, serve}
    assert ids("McGee's") == {pub, serve}
    assert ids("Jon") == {pub}
    assert ids("Gina") == {serve}
    assert ids("June") == {serve}


def test_a_vector_index_without_the_filter_properties_is_rebuilt_with_them(
    default_memory_indexes, caplog
) -> None:  # type: ignore[no-untyped-def]
    """An index built before searches filtered by user inside it (or on an older server) lacks the
    filter properties: the next process rebuilds it with them, says so, and searches go on."""
    graph.write(f"DROP INDEX {cypher.VECTOR_INDEX} IF EXISTS")
    graph.write(
        f"CREATE VECTOR INDEX {cypher.VECTOR_INDEX} FOR (m:Memory) ON (m.embedding) "
        "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}"
    )

    def properties() -> list[str]:
        return graph.read(
            "SHOW VECTOR INDEXES YIELD name, properties WHERE name = $n RETURN properties",
            n=cypher.VECTOR_INDEX,
        )[0]["properties"]

    assert properties() == ["embedding"]
    forget_ready()
    with caplog.at_level("WARNING", logger="memory.indexes"):
        ensure_memory_indexes()
    assert "rebuilt with its filter properties (project_id, user_id)" in caplog.text
    assert properties() == ["embedding", "project_id", "user_id"]
    caplog.clear()
    forget_ready()
    with caplog.at_level("WARNING", logger="memory.indexes"):
        ensure_memory_indexes()  # built right: left alone
    assert caplog.text == ""


def test_a_store_whose_write_fails_leaves_no_processing_job(settings) -> None:  # type: ignore[no-untyped-def]
    """A store that queues a job writes on a worker thread while the job's row is created: when the
    write fails, the row is rolled back with it and nothing is stored."""
    from core.models import Job
    from memory.dto import MessageInput
    from memory.scope import Scope
    from memory.services import _store_and_queue, memories_store_plan

    settings.MEMORY_PROCESS_ON_STORE = True
    tenant = make_tenant("mem-write-fails")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    taken = store(client, pid, [user("the first note")], user_id="u").json()["stored"][0]["id"]
    jobs = Job.objects.filter(project_id=pid).count()
    plan = memories_store_plan(
        project_id=pid, scope=Scope(user_id="u"), messages=[MessageInput("user", "a second note")]
    )
    assert plan.queues
    plan.rows[0]["id"] = taken  # the write breaks the uniqueness of Memory.id
    with pytest.raises(Exception, match="already exists"):
        _store_and_queue(plan)
    assert Job.objects.filter(project_id=pid).count() == jobs
    assert graph.read("MATCH (m:Memory {project_id: $p}) RETURN collect(m.text) AS t", p=pid)[0]["t"] == [
        "the first note"
    ]


COOKING = [
    "Knead the bread dough for ten minutes, then let it rise for an hour.",
    "Bake the sourdough loaf at 230 degrees with steam for the first twenty minutes.",
    "Simmer the tomato sauce slowly with garlic and basil.",
]


def test_a_query_about_nothing_stored_returns_nothing_in_every_mode() -> None:
    tenant = make_tenant("mem-floor")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    assert store(client, pid, [user(t) for t in COOKING], user_id="cook").status_code == 201
    for mode in ("vector", "hybrid", "fulltext"):
        off = msearch(client, pid, "quantum chromodynamics on a lattice", {"user_id": "cook"}, mode=mode)
        assert off.status_code == 200 and off.json()["items"] == [], mode
        on = msearch(client, pid, "how long should the bread dough rise", {"user_id": "cook"}, mode=mode)
        assert "Knead the bread dough" in on.json()["items"][0]["text"], mode
    # a request's min_score replaces the mode's floor: 0 lets the nearest through, 1 keeps everything out
    nearest = msearch(client, pid, "quantum chromodynamics", {"user_id": "cook"}, mode="vector", min_score=0)
    assert len(nearest.json()["items"]) == 3
    strict = msearch(client, pid, "bread dough rise", {"user_id": "cook"}, mode="vector", min_score=1)
    assert strict.json()["items"] == []
    assert msearch(client, pid, "bread", {"user_id": "cook"}, min_score=-1).status_code == 400


def test_text_is_stored_nfc_and_fulltext_folds_case_and_accents() -> None:
    tenant = make_tenant("mem-unicode")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    texts = ["cafe\u0301 au lait every morning", "the house on Straße am Meer"]
    assert store(client, pid, [user(t) for t in texts], user_id="u").status_code == 201
    stored = {r["t"] for r in graph.read("MATCH (m:Memory {project_id: $p}) RETURN m.text AS t", p=pid)}
    assert "caf\u00e9 au lait every morning" in stored  # composed (NFC), as a query is
    for query, expected in (("caf\u00e9", 0), ("cafe\u0301", 0), ("CAFE", 0), ("STRASSE", 1), ("strasse", 1)):
        for mode in ("fulltext", "hybrid"):
            items = msearch(client, pid, query, {"user_id": "u"}, mode=mode).json()["items"]
            assert items and items[0]["text"].startswith(("caf", "the house")[expected]), (query, mode, items)


def test_a_memory_fulltext_index_of_another_analyzer_is_rebuilt() -> None:
    from memory.indexes import ensure_memory_indexes, forget_ready

    ensure_memory_indexes()
    graph.write(f"DROP INDEX {cypher.FULLTEXT_INDEX} IF EXISTS")
    graph.write(
        f"CREATE FULLTEXT INDEX {cypher.FULLTEXT_INDEX} FOR (m:Memory) ON EACH [m.text, m.scope_tokens]"
    )
    forget_ready()
    ensure_memory_indexes()
    rows = graph.read(
        "SHOW FULLTEXT INDEXES YIELD name, options WHERE name = $n "
        "RETURN options.indexConfig['fulltext.analyzer'] AS analyzer",
        n=cypher.FULLTEXT_INDEX,
    )
    assert rows == [{"analyzer": "standard-folding"}]


def test_a_retried_batch_changes_nothing() -> None:
    """Stores are idempotent on `message_id` within a conversation: a retried batch answers the
    stored messages (marked duplicate) and writes nothing; new ids in a partly retried batch are
    stored after the others; the same id in another thread is another message."""
    tenant = make_tenant("mem-idempotent")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    batch = [user("I moved to Porto.", message_id="m1"), assistant("Noted: Porto.", message_id="m2")]
    first = store(client, pid, batch, user_id="ana", thread_id="t1").json()
    before = count("Memory", pid)
    again = store(client, pid, batch, user_id="ana", thread_id="t1")
    assert again.status_code == 201
    body = again.json()
    assert [(s["id"], s["seq"], s["index"]) for s in body["stored"]] == [
        (s["id"], s["seq"], s["index"]) for s in first["stored"]
    ]
    assert all(s["duplicate"] for s in body["stored"])
    assert body["conversation_id"] == first["conversation_id"] and body["job_id"] is None
    assert count("Memory", pid) == before
    mixed = store(
        client,
        pid,
        [assistant("Noted: Porto.", message_id="m2"), user("And I cycle.", message_id="m3")],
        user_id="ana",
        thread_id="t1",
    ).json()
    assert [s.get("duplicate", False) for s in mixed["stored"]] == [True, False]
    assert mixed["stored"][1]["seq"] == 3 and count("Memory", pid) == before + 1
    other = store(client, pid, [user("Hi.", message_id="m1")], user_id="ana", thread_id="t2").json()
    assert "duplicate" not in other["stored"][0] and count("Memory", pid) == before + 2
    twice = store(client, pid, [user("a", message_id="m9"), user("b", message_id="m9")], user_id="ana")
    assert twice.status_code == 400 and "messages[1].message_id" in twice.content.decode()
    assert count("Memory", pid) == before + 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_of_one_batch_store_it_once() -> None:
    """Two stores of the same message ids racing: the constraint on (conversation, message id)
    refuses the later write, which answers the earlier one's messages as duplicates."""
    from concurrent.futures import ThreadPoolExecutor

    from memory.dto import MessageInput
    from memory.scope import Scope
    from memory.services import memories_store

    tenant = make_tenant("mem-idempotent-race")
    pid = tenant.project.id
    messages = [MessageInput("user", f"Turn {i} of the race.", message_id=f"r{i}") for i in range(20)]

    def one(_: int) -> list[str]:
        result = memories_store(project_id=pid, scope=Scope(user_id="ana", thread_id="t"), messages=messages)
        return [s["id"] for s in result.stored]

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(one, range(4)))
    assert count("Memory", pid) == 20
    assert all(answer == answers[0] for answer in answers)


def test_a_query_about_nothing_stored_returns_nothing_unless_a_message_holds_all_its_words() -> None:
    """The relevance gate (MEMORY_MIN_SCORE_QUERY): vector and hybrid return nothing when even the
    nearest message is far from the query; hybrid answers when a message holds every query word;
    fulltext has no gate; a request's min_score replaces the gate."""
    tenant = make_tenant("mem-gate")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(
        client,
        pid,
        [user("The night train to Lyon was late again."), user("My parcel is order 4711, due Friday.")],
        user_id="ana",
    )

    def found(query: str, mode: str, **extra: Any) -> int:
        body = msearch(client, pid, query, {"user_id": "ana"}, mode=mode, **extra).json()
        return len(body["items"])

    off_topic = "Which quark flavour has the largest mass in lattice chromodynamics?"
    assert found(off_topic, "vector") == 0 and found(off_topic, "hybrid") == 0
    assert found(off_topic, "vector", min_score=0) == 2
    assert found("train Lyon late", "hybrid") >= 1
    assert found("Where is the quark?", "hybrid") == 0  # "where", "is", "the": no content word of it held
    assert found("4711", "hybrid") >= 1  # a number alone embeds far from anything; the word is there
    assert found("train the quark", "fulltext") == 1  # lexical: any message holding a query word


def _store_body(client: Any, pid: str, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return client.post(
        f"/api/v1/projects/{pid}/memories",
        {"messages": messages, "scope": {"user_id": "u1"}, **extra},
        format="json",
    )


def test_a_store_can_leave_embedding_to_the_worker(settings) -> None:  # type: ignore[no-untyped-def]
    """`embed_in_worker` (or MEMORY_EMBED_IN_WORKER): the store answers 202 with `embedding_pending`
    and embeds nothing; fulltext finds the message at once, vector search once the processing job has
    embedded its line. Supplied embeddings, or no processing job, keep the 201 path."""
    from memory.tasks import memory_process

    tenant = make_tenant("mem-embed-worker")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    response = _store_body(
        client, pid, [user("The lighthouse keeper feeds seven cats.")], embed_in_worker=True
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["embedding_pending"] is True and body["job_id"]
    memory_id = body["stored"][0]["id"]
    rows = graph.read("MATCH (m:Memory {id: $id}) RETURN m.embedding IS NULL AS pending", id=memory_id)
    assert rows == [{"pending": True}]

    def found(mode: str) -> list[str]:
        items = msearch(client, pid, "lighthouse keeper cats", {"user_id": "u1"}, mode=mode, min_score=0)
        return [i["id"] for i in items.json()["items"]]

    assert found("fulltext") == [memory_id]
    assert found("vector") == []
    memory_process.apply(args=(body["job_id"],))  # the job the store queued, as the worker runs it
    assert found("vector") == [memory_id]

    # the setting is the default of a request that does not say
    settings.MEMORY_EMBED_IN_WORKER = True
    deferred = _store_body(client, pid, [user("A second keeper feeds the dogs.")])
    assert deferred.status_code == 202 and deferred.json()["embedding_pending"] is True
    now = _store_body(client, pid, [user("A third keeper feeds nobody.")], embed_in_worker=False)
    assert now.status_code == 201 and now.json()["embedding_pending"] is False
    supplied = [user("Supplied vector.", embedding=[0.1] * 384)]
    assert _store_body(client, pid, supplied).status_code == 201
    settings.MEMORY_PROCESS_ON_STORE = False  # no job to embed them: the request embeds
    unqueued = _store_body(client, pid, [user("A fourth keeper.")])
    assert unqueued.status_code == 201 and unqueued.json()["embedding_pending"] is False
    assert _store_body(client, pid, [user("x")], embed_in_worker="maybe").status_code == 400
