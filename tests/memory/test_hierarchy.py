"""The memory hierarchy: facts, preferences, profile, mentions, summaries, consolidation, and a
search that walks it (seed 001 Phase 2, seed 003)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from core import graph
from core.models import Job
from knowledge.dto import DocumentInput, EntityInput
from memory import extraction, services
from memory.extraction import Message
from memory.scope import Scope
from memory.tasks import memory_process
from tests.conftest import make_tenant
from tests.memory.helpers import assistant, count, msearch, store, user
from tests.retrieval.helpers import ingest_now
from tests.support.openai_server import Step

pytestmark = pytest.mark.django_db


def _process(body: dict) -> Job:
    """Run the job a store queued (the test transaction never commits, so nothing was sent)."""
    memory_process.apply(args=(body["job_id"],))  # in this process, as the worker runs it
    return Job.objects.get(pk=body["job_id"])


# --- pure extraction -------------------------------------------------------------------------------


def test_extractive_facts_and_preferences_come_from_user_statements() -> None:
    derived = extraction.derive_extractive(
        [
            Message("1", "user", "Hi! My name is Ana Lima and I live in Lisbon.", "t"),
            Message("2", "user", "I really love hiking in the mountains, but I hate crowded beaches.", "t"),
            Message("3", "user", "My favourite food is grilled sardines. I work at Acme Robotics.", "t"),
            Message("4", "assistant", "I love that you like hiking! My name is Bot.", "t"),
            Message("5", "user", "I'm 34 years old.", "t"),
        ]
    )
    facts = {(f.predicate, f.object, tuple(f.source_ids)) for f in derived.facts}
    assert ("name", "Ana Lima", ("1",)) in facts
    assert ("lives_in", "Lisbon", ("1",)) in facts
    assert ("works_at", "Acme Robotics", ("3",)) in facts
    assert ("age", "34", ("5",)) in facts
    assert not any(f.source_ids == ["4"] for f in derived.facts)  # the assistant says nothing about the user
    prefs = {(p.value, p.sentiment) for p in derived.preferences}
    assert ("hiking in the mountains", "like") in prefs
    assert ("crowded beaches", "dislike") in prefs
    assert ("grilled sardines", "like") in prefs
    assert derived.mode == "extractive"


def test_extractive_summary_keeps_central_sentences_in_order() -> None:
    messages = [
        Message("1", "user", "I want to plan a trip to Japan in April. Cherry blossoms matter to me.", "t"),
        Message("2", "assistant", "April is the cherry blossom season in Japan. Kyoto is busy then.", "t"),
        Message("3", "user", "Ok. Also, what is the weather like?", "t"),
    ]
    summary = extraction.summarize_extractive(messages)
    assert "Japan" in summary and summary.startswith(("user:", "assistant:"))
    assert len(summary) <= extraction.SUMMARY_MAX_CHARS


def test_mention_grams_match_entity_key_forms() -> None:
    grams = extraction.mention_grams("We met Ada Lovelace at the Analytical Engine exhibit.")
    assert "ada lovelace" in grams and "analytical engine" in grams
    assert "the" not in grams and "at" not in grams


# --- derived nodes on the real stack -------------------------------------------------------------------


def test_every_named_speaker_gets_facts_and_only_the_user_gets_preferences() -> None:
    """Derivation reads every speaker (issue 34): the user's first-person statements are about
    "user", another role's named speaker's about that speaker (a second person, as in LoCoMo);
    an unnamed assistant speaks of itself and gets none; preferences stay the user's."""
    tenant = make_tenant("mem-speakers")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client,
        pid,
        [
            user("I live in Lisbon."),
            assistant("I live in Boston and I love sailing.", author_name="Melanie"),
            assistant("I live in the cloud."),
        ],
        user_id="ana",
    ).json()
    job = _process(body)
    assert job.status == "succeeded"
    facts = graph.read(
        "MATCH (f:Fact {project_id: $p}) RETURN f.subject AS subject, f.predicate AS predicate, f.object AS object",
        p=pid,
    )
    assert {(f["subject"], f["predicate"], f["object"]) for f in facts} == {
        ("user", "lives_in", "Lisbon"),
        ("Melanie", "lives_in", "Boston"),
    }
    assert count("Preference", pid) == 0  # Melanie's "I love sailing" is not the user's preference


def test_store_then_process_writes_facts_preferences_and_profile() -> None:
    tenant = make_tenant("mem-facts")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client,
        pid,
        [user("My name is Ana and I live in Lisbon."), user("I love jazz."), assistant("Noted!")],
        user_id="ana",
        thread_id="t1",
    ).json()
    job = _process(body)
    assert job.status == "succeeded" and job.counts["facts"] == 2 and job.counts["preferences"] == 1
    rows = graph.read(
        "MATCH (f:Fact {project_id: $p})-[:EXTRACTED_FROM]->(m:Memory) "
        "RETURN f.predicate AS predicate, f.object AS object, f.user_id AS user, m.text AS source",
        p=pid,
    )
    assert {(r["predicate"], r["object"], r["user"]) for r in rows} == {
        ("name", "Ana", "ana"),
        ("lives_in", "Lisbon", "ana"),
    }
    assert all(r["source"] == "My name is Ana and I live in Lisbon." for r in rows)
    profile = graph.read(
        "MATCH (u:UserProfile {project_id: $p})-[:HAS_PREFERENCE]->(pr:Preference) "
        "RETURN u.user_id AS user, pr.value AS value, pr.sentiment AS sentiment",
        p=pid,
    )
    assert profile == [{"user": "ana", "value": "jazz", "sentiment": "like"}]
    # re-running the job is a no-op (finished jobs are skipped; facts would merge anyway)
    services.memories_derive(project_id=pid, memory_ids=[s["id"] for s in body["stored"]])
    assert count("Fact", pid) == 2 and count("Preference", pid) == 1


def test_a_newer_contradicting_fact_supersedes_the_older_keeping_history() -> None:
    tenant = make_tenant("mem-supersede")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    old = store(client, pid, [user("I live in Porto.", timestamp="2026-01-01T10:00:00Z")], user_id="u").json()
    _process(old)
    # another thread of the same user: facts belong to the user, not the thread
    new = store(client, pid, [user("I moved to Berlin.")], user_id="u", thread_id="t2").json()
    _process(new)
    again = store(client, pid, [user("Yes, I live in Berlin now.")], user_id="u", thread_id="t3").json()
    _process(again)
    rows = graph.read(
        "MATCH (f:Fact {project_id: $p, predicate: 'lives_in'}) "
        "RETURN f.object AS object, f.valid_until AS until, f.superseded_by AS by, f.id AS id, "
        "size(f.source_message_ids) AS sources ORDER BY f.valid_from",
        p=pid,
    )
    assert [r["object"] for r in rows] == ["Porto", "Berlin"]
    assert rows[0]["until"] is not None and rows[0]["by"] == rows[1]["id"]
    assert rows[1]["until"] is None and rows[1]["sources"] == 2  # the repeat added a source
    assert (
        graph.read(
            "MATCH (n:Fact {id: $a})-[:SUPERSEDES]->(o:Fact {id: $b}) RETURN count(*) AS n",
            a=rows[1]["id"],
            b=rows[0]["id"],
        )[0]["n"]
        == 1
    )
    # an older statement processed late does not override the newer one
    late = store(
        client, pid, [user("I live in Madrid.", timestamp="2025-06-01T00:00:00Z")], user_id="u"
    ).json()
    _process(late)
    current = graph.read(
        "MATCH (f:Fact {project_id: $p, predicate: 'lives_in'}) WHERE f.valid_until IS NULL RETURN f.object AS o",
        p=pid,
    )
    assert current == [{"o": "Berlin"}]
    # preferences too: a later dislike supersedes a like
    _process(store(client, pid, [user("I like coffee.")], user_id="u").json())
    _process(store(client, pid, [user("I don't like coffee anymore.")], user_id="u").json())
    prefs = graph.read(
        "MATCH (p:Preference {project_id: $p}) RETURN p.sentiment AS s, p.valid_until IS NULL AS current "
        "ORDER BY p.valid_from",
        p=pid,
    )
    assert prefs == [{"s": "like", "current": False}, {"s": "dislike", "current": True}]


def test_facts_from_the_llm_are_validated_and_cite_real_messages(fake_openai) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("mem-llm")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client, pid, [user("I'm allergic to peanuts."), assistant("I'll remember.")], user_id="u"
    ).json()
    real = body["stored"][0]["id"]
    fake_openai.queue(
        Step(content="not json"),
        Step(
            content=json.dumps(
                {
                    "facts": [
                        {
                            "subject": "user",
                            "predicate": "allergic to",
                            "object": "peanuts",
                            "statement": "The user is allergic to peanuts.",
                            "message_ids": [real],
                            "confidence": 0.9,
                        },
                        {
                            "subject": "user",
                            "predicate": "owns",
                            "object": "a yacht",
                            "statement": "The user owns a yacht.",
                            "message_ids": ["hallucinated-id"],
                        },
                    ],
                    "preferences": [],
                }
            )
        ),
    )
    job = _process(body)
    assert job.counts["facts"] == 1
    rows = graph.read(
        "MATCH (f:Fact {project_id: $p}) RETURN f.predicate AS p, f.mode AS mode, f.object AS o", p=pid
    )
    assert rows == [{"p": "allergic_to", "mode": "llm", "o": "peanuts"}]


def test_memories_link_to_known_entities() -> None:
    tenant = make_tenant("mem-mentions")
    pid = tenant.project.id
    ingest_now(
        pid,
        [
            DocumentInput(
                title="Lovelace",
                text="Ada Lovelace wrote the first algorithm for the Analytical Engine designed by Charles Babbage.",
                entities=[EntityInput("Ada Lovelace", "PERSON"), EntityInput("Analytical Engine", "MACHINE")],
                relations=[],
            )
        ],
    )
    client = tenant.client(tenant.write_key)
    body = store(client, pid, [user("Tell me more about ada lovelace and her notes.")], user_id="u").json()
    job = _process(body)
    assert job.counts["mentions"] == 1
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p})-[:MENTIONS]->(e:Entity) RETURN e.name AS name", p=pid
    )
    assert rows == [{"name": "Ada Lovelace"}]


def test_summaries_are_written_past_the_threshold_and_on_demand(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_SUMMARY_MESSAGES = 4
    tenant = make_tenant("mem-summary")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    first = store(
        client,
        pid,
        [user("We are planning the Lisbon offsite."), assistant("Great, when?")],
        user_id="u",
        thread_id="t",
    ).json()
    assert _process(first).counts["summaries"] == 0  # 2 messages: under the threshold
    second = store(
        client,
        pid,
        [user("In May, for twelve people."), assistant("I will look for venues in Lisbon.")],
        user_id="u",
        thread_id="t",
    ).json()
    assert _process(second).counts["summaries"] == 1
    rows = graph.read(
        "MATCH (s:ConversationSummary {project_id: $p})-[:SUMMARIZES]->(c:Conversation) "
        "RETURN s.first_seq AS a, s.last_seq AS b, s.mode AS mode, c.summarized_seq AS done, c.summary AS cs, "
        "s.text AS text, size(s.embedding) AS dims",
        p=pid,
    )
    assert len(rows) == 1 and rows[0]["a"] == 1 and rows[0]["b"] == 4 and rows[0]["done"] == 4
    assert (
        rows[0]["mode"] == "extractive" and "Lisbon" in rows[0]["text"] and rows[0]["cs"] == rows[0]["text"]
    )
    assert rows[0]["dims"] == 384
    # on demand: one more message is summarised even though it is under the threshold
    store(client, pid, [user("Budget is 5000 euros.")], user_id="u", thread_id="t")
    assert services.conversation_summarize(project_id=pid, conversation_id=first["conversation_id"]) is None
    assert services.conversation_summarize(
        project_id=pid, conversation_id=first["conversation_id"], force=True
    )
    assert count("ConversationSummary", pid) == 2


def test_summary_with_the_llm(fake_openai) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("mem-summary-llm")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(client, pid, [user("Book a table for two."), assistant("Done, 8pm.")], user_id="u").json()
    fake_openai.queue(Step(content="The user booked a table for two at 8pm."))
    summary_id = services.conversation_summarize(
        project_id=pid, conversation_id=body["conversation_id"], force=True
    )
    rows = graph.read(
        "MATCH (s:ConversationSummary {id: $id}) RETURN s.text AS t, s.mode AS m", id=summary_id
    )
    assert rows == [{"t": "The user booked a table for two at 8pm.", "m": "llm"}]


def test_consolidation_folds_old_messages_into_a_summary_and_keeps_what_they_supported() -> None:
    tenant = make_tenant("mem-consolidate")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    old = (datetime.now(UTC) - timedelta(days=120)).isoformat()
    body = store(
        client,
        pid,
        [
            user("My name is Rui and I work at Tideway Labs.", timestamp=old),
            assistant("Hello Rui.", timestamp=old),
        ],
        user_id="rui",
        thread_id="t",
    ).json()
    recent = store(
        client, pid, [user("Any news on my visa application?")], user_id="rui", thread_id="t"
    ).json()
    totals = services.memories_consolidate(project_id=pid, scope=Scope(user_id="rui"), older_than_days=90)
    assert totals["folded"] == 2 and totals["summaries"] == 1
    assert graph.read("MATCH (m:Memory {project_id: $p}) RETURN m.text AS t", p=pid) == [
        {"t": "Any news on my visa application?"}
    ]
    # the facts were derived first (the messages had not been processed) and now hang off the summary
    facts = graph.read(
        "MATCH (f:Fact {project_id: $p})-[:EXTRACTED_FROM]->(s:ConversationSummary {consolidated: true}) "
        "RETURN f.predicate AS p, f.object AS o, f.source_message_ids AS src",
        p=pid,
    )
    assert {(f["p"], f["o"]) for f in facts} == {("name", "Rui"), ("works_at", "Tideway Labs")}
    assert all(f["src"] == [body["stored"][0]["id"]] for f in facts)
    conv = graph.read(
        "MATCH (c:Conversation {id: $c}) RETURN c.consolidated_count AS n, c.message_count AS m",
        c=recent["conversation_id"],
    )
    assert conv == [{"n": 2, "m": 1}]
    # and a facts-depth search still finds them
    items = msearch(client, pid, "where does Rui work", {"user_id": "rui"}, depth="facts").json()["items"]
    assert any(i["level"] == "fact" and i["metadata"]["object"] == "Tideway Labs" for i in items)
    assert any(i["level"] == "summary" for i in items)


def test_search_walks_the_hierarchy_by_depth(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_SUMMARY_MESSAGES = 2
    tenant = make_tenant("mem-depth")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client,
        pid,
        [user("I love sailing. My boat is called Maré."), assistant("A lovely name for a boat.")],
        user_id="u",
        thread_id="t",
    ).json()
    _process(body)
    levels = {}
    for depth in ("messages", "summaries", "facts"):
        items = msearch(client, pid, "sailing boat", {"user_id": "u"}, depth=depth).json()["items"]
        levels[depth] = [i["level"] for i in items]
    assert set(levels["messages"]) == {"message"}
    assert set(levels["summaries"]) == {"message", "summary"}
    assert {"message", "summary", "fact", "preference", "profile"} == set(levels["facts"])
    order = levels["facts"]
    assert order.index("summary") > max(i for i, level in enumerate(order) if level == "message")
    profile = msearch(client, pid, "sailing", {"user_id": "u"}, depth="facts").json()["items"][-1]
    assert (
        profile["level"] == "profile"
        and "likes: sailing" in profile["text"]
        and "boat: Maré" in profile["text"]
    )
