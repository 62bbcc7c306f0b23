"""A chat turn (seed 003's agent loop) on the real stack: Neo4j, Redis and an OpenAI-compatible
HTTP server; extractive answers need no LLM."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import numpy as np
import pytest

from core import graph
from core.models import Job
from core.runtime.redis_client import get_redis
from knowledge.dto import DocumentInput
from memory.tasks import memory_process
from memory.vectors import message_vectors
from tests.conftest import Tenant, make_tenant
from tests.memory.helpers import count, msearch, store, user
from tests.retrieval.helpers import ingest_now
from tests.support.openai_server import Step

pytestmark = pytest.mark.django_db


def _docs(tenant: Tenant, settings: Any = None) -> dict[str, str]:
    """Two documents, ingested without an LLM (extractive entities) whatever the test configures."""
    provider = settings.LLM_PROVIDER if settings is not None else None
    if settings is not None:
        settings.LLM_PROVIDER = "none"
    lisbon, porto = ingest_now(
        tenant.project.id,
        [
            DocumentInput(
                title="Lisbon trams",
                text="Tram 28 climbs from Baixa to the castle of São Jorge. It runs every ten minutes.",
                source_path="guides/lisbon.md",
                author="Rita",
            ),
            DocumentInput(title="Porto tides", text="High tide on the Douro river mouth is at noon."),
        ],
    )
    if settings is not None:
        settings.LLM_PROVIDER = provider
    return {"lisbon": lisbon, "porto": porto}


def chat(client: Any, project_id: str, **body: Any) -> Any:
    return client.post(f"/api/v1/projects/{project_id}/conversations:chat", body, format="json")


def _messages(conversation_id: str) -> list[dict[str, Any]]:
    return graph.read(
        "MATCH (m:Memory {conversation_id: $c}) OPTIONAL MATCH (m)-[:REFERENCES]->(d:Document) "
        "RETURN m.seq AS seq, m.role AS role, m.text AS text, m.status AS status, collect(d.id) AS refs "
        "ORDER BY m.seq",
        c=conversation_id,
    )


def _ids(conversation_id: str) -> list[str]:
    rows = graph.read(
        "MATCH (m:Memory {conversation_id: $c}) RETURN m.id AS id ORDER BY m.seq", c=conversation_id
    )
    return [r["id"] for r in rows]


def test_an_extractive_turn_stores_both_messages_with_references_and_continues(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    tenant = make_tenant("chat-extractive")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    docs = _docs(tenant)
    first = chat(client, pid, message="Which tram climbs to the castle?", user_id="ana")
    assert first.status_code == 200, first.json()
    body = first.json()
    assert body["mode"] == "extractive"
    assert "Tram 28 climbs from Baixa to the castle" in body["answer"] and "[1]" in body["answer"]
    assert body["references"][0] == {
        "n": 1,
        "document_id": docs["lisbon"],
        "title": "Lisbon trams",
        "author": "Rita",
        "updated_at": body["references"][0]["updated_at"],
        "source_path": "guides/lisbon.md",
    }
    assert body["answer_with_references"].startswith(
        body["answer"] + "\n\nReferences:\n[1] Lisbon trams (Rita, "
    )
    assert "Path: guides/lisbon.md" in body["answer_with_references"]
    stored = _messages(body["conversation_id"])
    assert [(m["seq"], m["role"]) for m in stored] == [(1, "user"), (2, "assistant")]
    assert stored[0]["refs"] == [] and docs["lisbon"] in stored[1]["refs"]
    assert _ids(body["conversation_id"]) == [body["message_id"], body["reply_id"]]

    second = chat(
        client, pid, message="How often does it run?", user_id="ana", conversation_id=body["conversation_id"]
    ).json()
    assert second["conversation_id"] == body["conversation_id"]
    assert "every ten minutes" in second["answer"]
    assert [m["seq"] for m in _messages(body["conversation_id"])] == [1, 2, 3, 4]


def _embedded(conversation_id: str) -> dict[str, bool]:
    rows = graph.read(
        "MATCH (m:Memory {conversation_id: $c}) RETURN m.id AS id, m.embedding IS NOT NULL AS embedded",
        c=conversation_id,
    )
    return {r["id"]: r["embedded"] for r in rows}


def test_with_processing_off_the_turn_embeds_both_messages(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    settings.MEMORY_PROCESS_ON_STORE = False
    tenant = make_tenant("chat-no-job")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _docs(tenant)
    body = chat(client, pid, message="Which tram climbs to the castle?", user_id="ana").json()
    assert body["job_id"] is None
    assert _embedded(body["conversation_id"]) == {body["message_id"]: True, body["reply_id"]: True}


def test_one_job_processes_both_messages_and_embeds_the_reply(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    tenant = make_tenant("chat-job")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _docs(tenant)
    body = chat(client, pid, message="Which tram climbs to the castle?", user_id="ana").json()
    question, reply = body["message_id"], body["reply_id"]
    jobs = list(Job.objects.filter(project_id=pid, kind="memory_process"))
    assert [job.inputs["memory_ids"] for job in jobs] == [[question, reply]]
    assert body["job_id"] == jobs[0].id  # the client can follow it
    # nothing in the turn searches its own messages: the job embeds both, from their lines
    assert _embedded(body["conversation_id"]) == {question: False, reply: False}
    memory_process.apply(args=(jobs[0].id,))
    assert _embedded(body["conversation_id"]) == {question: True, reply: True}
    found = msearch(client, pid, body["answer"], {"user_id": "ana"}, mode="vector", top_k=1).json()
    assert [item["id"] for item in found["items"]] == [reply]
    # the embedding of the reply's line (its speaker, day and text: memory.text), or of its sentences'
    # lines (memory.vectors)
    stored = graph.read(
        "MATCH (m:Memory {id: $id}) RETURN m {.text, .role, .author_name, .timestamp} AS m, m.embedding AS v",
        id=reply,
    )[0]
    expected = np.asarray(message_vectors([stored["m"]])[0].embedding)
    assert stored["m"]["role"] == "assistant"
    assert (
        float(np.dot(stored["v"], expected) / np.linalg.norm(stored["v"]) / np.linalg.norm(expected)) > 0.999
    )
    assert Job.objects.get(pk=jobs[0].id).counts["embedded"] == 2


def test_an_llm_turn_sends_sources_history_and_summary(fake_openai, settings) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("chat-llm")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _docs(tenant, settings)
    fake_openai.responder = lambda body: Step(content="Tram 28 does [1].")
    first = chat(client, pid, message="Which tram climbs to the castle?", user_id="ana", mode="llm").json()
    assert first["answer"] == "Tram 28 does [1]." and first["mode"] == "llm"
    graph.write(
        "MATCH (c:Conversation {id: $c}) SET c.summary = 'Ana asks about Lisbon trams.'",
        c=first["conversation_id"],
    )
    chat(
        client,
        pid,
        message="And the tides in Porto?",
        user_id="ana",
        conversation_id=first["conversation_id"],
    )
    sent = fake_openai.requests_to("/chat/completions")[-1].body["messages"]
    assert sent[0]["role"] == "system"
    assert any("Ana asks about Lisbon trams." in m["content"] for m in sent if m["role"] == "system")
    history = [(m["role"], m["content"]) for m in sent[1:-1] if m["role"] != "system"]
    assert history == [("user", "Which tram climbs to the castle?"), ("assistant", "Tram 28 does [1].")]
    assert "Sources:" in sent[-1]["content"] and "Porto tides" in sent[-1]["content"]
    assert sent[-1]["content"].endswith("Question: And the tides in Porto?")


def test_an_llm_failure_keeps_the_message_and_stores_the_reply_as_failed(fake_openai, settings) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("chat-llm-fails")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _docs(tenant, settings)
    fake_openai.responder = lambda body: Step(status=500)
    response = chat(client, pid, message="Which tram climbs to the castle?", user_id="ana", mode="llm")
    assert response.status_code == 503, response.json()
    error = response.json()["error"]
    assert error["details"]["dependency"] == "llm"
    conversation_id = error["details"]["conversation_id"]
    stored = _messages(conversation_id)
    assert [(m["role"], m["status"]) for m in stored] == [("user", None), ("assistant", "failed")]
    assert _ids(conversation_id) == [error["details"]["message_id"], error["details"]["reply_id"]]
    queued = [job.inputs["memory_ids"] for job in Job.objects.filter(project_id=pid, kind="memory_process")]
    assert queued == [[error["details"]["message_id"], error["details"]["reply_id"]]]
    # the failed reply is not history for the next turn
    fake_openai.responder = lambda body: Step(content="Tram 28.")
    chat(client, pid, message="Try again?", user_id="ana", conversation_id=conversation_id, mode="llm")
    sent = fake_openai.requests_to("/chat/completions")[-1].body["messages"]
    assert not any("no answer" in str(m["content"]) for m in sent)


def test_persist_false_stores_nothing_and_rag_false_uses_no_documents(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    tenant = make_tenant("chat-flags")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _docs(tenant)
    reader = tenant.client(tenant.read_key)
    looked = chat(reader, pid, message="Which tram climbs to the castle?", user_id="ana", persist=False)
    assert looked.status_code == 200, looked.json()
    assert looked.json()["conversation_id"] is None and looked.json()["references"]
    assert looked.json()["job_id"] is None
    assert count("Memory", pid) == 0 and count("Conversation", pid) == 0
    assert chat(reader, pid, message="hello", user_id="ana").status_code == 403

    kept = store(
        client, pid, [user("My favourite tram is the 28, it is yellow.")], user_id="ana", thread_id="t1"
    )
    cid = kept.json()["conversation_id"]
    alone = chat(
        client, pid, message="Which tram is my favourite?", user_id="ana", conversation_id=cid, rag=False
    )
    assert alone.json()["references"] == []
    assert "favourite tram is the 28" in alone.json()["answer"]


def test_other_users_and_projects_and_bad_input_are_refused_and_store_nothing(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    tenant, other = make_tenant("chat-bad"), make_tenant("chat-bad-other")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    cid = chat(client, pid, message="hello there", user_id="ana").json()["conversation_id"]
    before = count("Memory", pid)
    assert chat(client, pid, message="hi", user_id="bo", conversation_id=cid).status_code == 404
    outsider = other.client(other.write_key)
    assert (
        chat(outsider, other.project.id, message="hi", user_id="ana", conversation_id=cid).status_code == 404
    )
    assert chat(outsider, pid, message="hi", user_id="ana").status_code == 404
    for body in (
        {"message": "  ", "user_id": "ana"},
        {"message": "hi"},
        {"message": "hi", "user_id": "ana", "mode": "poetry"},
        {"message": "hi", "user_id": "ana", "mode": "llm"},  # no LLM configured
        {"message": "hi", "user_id": "ana", "top_k": 0},
        {"message": "hi", "user_id": "ana", "search_mode": "regex"},
        {"message": "hi", "user_id": "ana", "colour": "red"},
        {"message": "hi", "user_id": "a\x00b"},
        {"message": "hi", "user_id": "ana", "turn_id": "not-a-uuid"},
    ):
        response = chat(client, pid, **body)
        assert response.status_code == 400, (body, response.json())
    settings.MEMORY_MAX_MESSAGE_CHARS = 50
    assert chat(client, pid, message="x" * 51, user_id="ana").status_code == 413
    assert count("Memory", pid) == before
    assert count("Memory", other.project.id) == 0


def test_the_turn_reports_its_phases(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    settings.PROGRESS_REDIS_CHANNEL = "ui:chat-test"
    tenant = make_tenant("chat-progress")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _docs(tenant)
    pubsub = get_redis().pubsub()
    pubsub.subscribe("ui:chat-test")
    pubsub.get_message(timeout=2)
    turn_id = str(uuid.uuid4())
    assert chat(client, pid, message="Which tram?", user_id="ana", turn_id=turn_id).status_code == 200
    phases: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "completed" not in phases:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
        if message:
            payload = json.loads(message["data"])
            if payload.get("retrieval_id") == turn_id:
                phases.append(payload["phase"])
    pubsub.close()
    assert phases == ["retrieving", "message_stored", "answering", "completed"]
