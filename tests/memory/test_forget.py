"""Erasure: forget a scope, delete one memory. Nothing derived survives; other users are untouched;
the audit record holds no erased text."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from core import graph
from core.embeddings import get_embedder
from memory import services
from memory.models import MemoryErasure
from memory.tasks import memory_process
from tests.conftest import make_tenant
from tests.memory.helpers import assistant, count, forget, memory_nodes, msearch, store, user

pytestmark = pytest.mark.django_db

# a node whose text properties (or lists of text) contain $c
CARRIES = (
    "any(k IN keys(n) WHERE (n[k] IS :: STRING AND n[k] CONTAINS $c) "
    "OR (n[k] IS :: LIST<STRING NOT NULL> AND any(x IN n[k] WHERE x CONTAINS $c)))"
)


def _process(body: dict) -> None:
    memory_process.apply(args=(body["job_id"],))  # in this process, as the worker runs it


def _seed_user(client, pid: str, user_id: str, words: str) -> None:  # type: ignore[no-untyped-def]
    for thread in ("t1", "t2"):
        body = store(
            client,
            pid,
            [
                user(f"My name is {user_id.title()} and I live in {words}."),
                user(f"I love {words} food."),
                assistant(f"Noted, {words}."),
            ],
            user_id=user_id,
            thread_id=f"{user_id}-{thread}",
        ).json()
        _process(body)
        services.conversation_summarize(project_id=pid, conversation_id=body["conversation_id"], force=True)


def test_forget_a_user_erases_everything_derived_and_leaves_others_intact() -> None:
    tenant = make_tenant("mem-forget")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _seed_user(client, pid, "anna", "Oslo")
    _seed_user(client, pid, "bert", "Rome")
    bert_before = graph.read(
        "MATCH (n {project_id: $p, user_id: 'bert'}) RETURN labels(n)[0] AS label, count(*) AS n ORDER BY label",
        p=pid,
    )
    assert {r["label"] for r in bert_before} >= {
        "Memory",
        "Conversation",
        "ConversationSummary",
        "Fact",
        "Preference",
    }
    response = forget(client, pid, user_id="anna")
    assert response.status_code == 200, response.json()
    erased = response.json()["erased"]
    assert erased["memories"] == 6 and erased["conversations"] == 2 and erased["summaries"] == 2
    assert erased["profiles"] == 1 and erased["facts"] + erased["derived"] >= 2
    leftovers = graph.read(
        f"MATCH (n {{project_id: $p}}) WHERE n.user_id = 'anna' OR {CARRIES} RETURN labels(n) AS labels",
        p=pid,
        c="Oslo",
    )
    assert leftovers == []
    bert_after = graph.read(
        "MATCH (n {project_id: $p, user_id: 'bert'}) RETURN labels(n)[0] AS label, count(*) AS n ORDER BY label",
        p=pid,
    )
    assert bert_after == bert_before
    assert graph.read("MATCH (u:UserProfile {project_id: $p}) RETURN u.user_id AS u", p=pid) == [
        {"u": "bert"}
    ]
    audit = MemoryErasure.objects.get(pk=response.json()["audit_id"])
    assert audit.kind == "forget" and audit.scope == {"user_id": "anna"} and audit.counts["memories"] == 6
    assert "Oslo" not in str(audit.__dict__)
    # search for the forgotten user now finds nothing at any depth
    assert msearch(client, pid, "Oslo", {"user_id": "anna"}, depth="facts").json()["items"] == []


def test_forget_a_thread_keeps_the_users_other_threads() -> None:
    tenant = make_tenant("mem-forget-thread")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _seed_user(client, pid, "cara", "Lima")
    forget(client, pid, thread_id="cara-t1")
    threads = graph.read("MATCH (m:Memory {project_id: $p}) RETURN DISTINCT m.thread_id AS t", p=pid)
    assert threads == [{"t": "cara-t2"}]
    assert count("Conversation", pid) == 1 and count("ConversationSummary", pid) == 1


def test_delete_one_memory_removes_what_holds_its_words_and_closes_the_chain() -> None:
    tenant = make_tenant("mem-delete")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    body = store(
        client,
        pid,
        [user("I live in Quito."), user("What time is it?"), user("Thanks!")],
        user_id="d",
        thread_id="t",
    ).json()
    _process(body)
    services.conversation_summarize(project_id=pid, conversation_id=body["conversation_id"], force=True)
    target = body["stored"][0]["id"]
    detail = client.get(f"/api/v1/projects/{pid}/memories/{target}")
    assert detail.status_code == 200 and len(detail.json()["derived_ids"]) == 1
    response = client.delete(f"/api/v1/projects/{pid}/memories/{target}")
    assert response.status_code == 200, response.json()
    assert response.json()["erased"] == {"memories": 1, "derived": 1, "summaries": 1}
    assert count("Fact", pid) == 0 and count("ConversationSummary", pid) == 0
    chain = graph.read(
        "MATCH (a:Memory {project_id: $p})-[:NEXT]->(b:Memory) RETURN a.seq AS a, b.seq AS b ORDER BY a",
        p=pid,
    )
    assert chain == [{"a": 2, "b": 3}]
    conv = graph.read(
        "MATCH (c:Conversation {project_id: $p}) RETURN c.summarized_seq AS s, c.message_count AS n", p=pid
    )
    assert conv == [{"s": 0, "n": 2}]  # the span is open for summarising again
    assert client.get(f"/api/v1/projects/{pid}/memories/{target}").status_code == 404
    assert client.delete(f"/api/v1/projects/{pid}/memories/{target}").status_code == 404
    assert MemoryErasure.objects.filter(project_id=pid, kind="delete").count() == 1


@pytest.mark.slow
def test_after_forgetting_1000_canary_memories_no_trace_remains(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_SUMMARY_MESSAGES = 50
    canary = "zebracanary7731"
    tenant = make_tenant("mem-canary")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    for batch in range(4):
        body = store(
            client,
            pid,
            [
                user(f"My secret word is {canary} number {batch * 250 + i}. I love {canary} soup.")
                for i in range(250)
            ],
            user_id="victim",
            thread_id=f"t{batch % 2}",
        ).json()
        _process(body)
    store(client, pid, [user("An unrelated note about gardening.")], user_id="bystander")
    assert (
        count("Memory", pid) == 1001
        and count("ConversationSummary", pid) >= 2
        and count("Preference", pid) >= 1
    )
    response = forget(client, pid, user_id="victim")
    assert response.status_code == 200 and response.json()["erased"]["memories"] == 1000
    # no node or property anywhere in the database carries it
    assert graph.read(f"MATCH (n) WHERE {CARRIES} RETURN count(n) AS n", c=canary)[0]["n"] == 0
    # no fulltext hit in any index
    shown = graph.read("SHOW FULLTEXT INDEXES YIELD name, state WHERE state = 'ONLINE' RETURN name")
    indexes = [r["name"] for r in shown]
    assert {"memory_fulltext", "memory_level_fulltext"} <= set(indexes)
    for index in indexes:
        hits = graph.read(
            "CALL db.index.fulltext.queryNodes($i, $q, {limit: 5}) YIELD node RETURN count(node) AS n",
            i=index,
            q=canary,
        )
        assert hits[0]["n"] == 0, index
    # no vector neighbour: the nearest memories to the canary text are the bystander's only
    vector = get_embedder().embed_one(f"My secret word is {canary}. I love {canary} soup.")
    near = graph.read(
        "CALL db.index.vector.queryNodes('memory_embeddings', 50, $v) YIELD node "
        "WHERE node.project_id = $p RETURN node.user_id AS u",
        v=vector,
        p=pid,
    )
    assert {r["u"] for r in near} <= {"bystander"}
    assert count("Memory", pid) == 1 and memory_nodes(pid) == 2  # the bystander's memory and conversation
    assert canary not in str(MemoryErasure.objects.get(pk=response.json()["audit_id"]).__dict__)


@pytest.mark.django_db(transaction=True)
def test_forget_while_storing_concurrently_leaves_nothing_written_before_it() -> None:
    """Stores of user A run in a thread while A is forgotten: every memory of A whose store returned
    before the forget started is gone, stores racing the forget leave whole conversations (never
    orphans), and user B is never touched."""
    tenant = make_tenant("mem-race")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(
        client, pid, [user("bystander memory one"), user("bystander memory two")], user_id="B", thread_id="b"
    )
    done_before: list[str] = []
    stop = threading.Event()
    started = threading.Event()

    failures: list[Any] = []

    def writer() -> None:
        own = tenant.client(tenant.write_key)
        i = 0
        try:
            while not stop.is_set():
                body = store(
                    own, pid, [user(f"A says {i}"), assistant(f"ok {i}")], user_id="A", thread_id=f"a{i % 3}"
                )
                if body.status_code != 201:  # a store racing the forget must still succeed
                    failures.append((body.status_code, body.json()))
                    return
                done_before.extend(s["id"] for s in body.json()["stored"])
                i += 1
                started.set()
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    started.wait(60)
    snapshot = list(done_before)
    response = forget(client, pid, user_id="A")
    stop.set()
    thread.join(60)
    assert failures == []
    assert response.status_code == 200
    survivors = {
        r["id"]
        for r in graph.read("MATCH (m:Memory {project_id: $p, user_id: 'A'}) RETURN m.id AS id", p=pid)
    }
    assert not survivors & set(snapshot)
    orphans = graph.read(
        "MATCH (m:Memory {project_id: $p}) WHERE NOT (m)-[:PART_OF]->(:Conversation) RETURN count(m) AS n",
        p=pid,
    )
    assert orphans[0]["n"] == 0
    assert (
        graph.read("MATCH (m:Memory {project_id: $p, user_id: 'B'}) RETURN count(m) AS n", p=pid)[0]["n"] == 2
    )
    graph.write("MATCH (n {project_id: $p}) DETACH DELETE n", p=pid)


def test_curators_read_the_erasure_audit_in_the_admin(admin_client) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("mem-admin")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(client, pid, [user("My password hint is bluebird.")], user_id="x")
    audit_id = forget(client, pid, user_id="x").json()["audit_id"]
    listing = admin_client.get("/admin/memory/memoryerasure/")
    assert listing.status_code == 200 and b"forget" in listing.content
    detail = admin_client.get(f"/admin/memory/memoryerasure/{audit_id}/change/")
    assert detail.status_code == 200 and b"bluebird" not in detail.content
    assert admin_client.get("/admin/memory/memoryerasure/add/").status_code == 403


def test_forgetting_an_application_counts_what_it_erased_and_removes_its_profiles() -> None:
    """Facts and preferences erased because their messages went count as facts and preferences
    (not as 0); forgetting an application removes its users' profiles and leaves another
    application's user alone."""
    tenant = make_tenant("mem-forget-app")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    for app, user_id in (("shop", "ana"), ("shop", "bo"), ("bank", "ana")):
        body = store(
            client,
            pid,
            [user(f"My name is {user_id.title()} and I live in Porto."), user("I love green tea.")],
            application_id=app,
            user_id=user_id,
        ).json()
        _process(body)
    profiles = "MATCH (p:UserProfile {project_id: $p}) RETURN p.application_id AS app, p.user_id AS user"
    assert len(graph.read(profiles, p=pid)) == 3
    erased = forget(client, pid, application_id="shop").json()["erased"]
    assert erased["memories"] == 4 and erased["profiles"] == 2
    assert erased["facts"] >= 2 and erased["preferences"] >= 2
    assert graph.read(profiles, p=pid) == [{"app": "bank", "user": "ana"}]
    assert count("Fact", pid) >= 1 and count("Preference", pid) >= 1  # the bank's user keeps hers
