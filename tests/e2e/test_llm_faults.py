"""The LLM answering 429 and 5xx while a real Celery worker extracts entities from documents (LLM
extraction) and derives facts from memories: each call is retried (RETRY_MAX_ATTEMPTS, counted on the
fake server), then the task is retried (INGEST_MAX_RETRIES), then the work fails with the reason and
writes nothing (knowledge/tasks.py, core/jobs/runs.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from subprocess import Popen
from typing import Any

import pytest

from core import graph
from memory.extraction import DESCRIBE_PROMPT
from tests.conftest import Tenant, make_tenant, start_worker, stop_worker, worker_env
from tests.knowledge.helpers import graph_counts, post_document, wait_job
from tests.memory.helpers import count, store, user
from tests.support.openai_server import FakeOpenAI, Step

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUEUE = "llm-faults"
ATTEMPTS = 3  # RETRY_MAX_ATTEMPTS: tries of one LLM call
TASK_RETRIES = 1  # INGEST_MAX_RETRIES: re-runs of the task after a call gave up
TEXT = "Ada Lovelace wrote notes on the Analytical Engine of Charles Babbage."
EXTRACTION = {
    "entities": [
        {"name": "Ada Lovelace", "type": "PERSON", "description": "Mathematician."},
        {"name": "Analytical Engine", "type": "WORK", "description": "A machine."},
    ],
    "relations": [{"source": "Ada Lovelace", "target": "Analytical Engine", "description": "wrote on"}],
}


@pytest.fixture
def llm_worker(fake_openai: FakeOpenAI, settings: Any) -> Iterator[Popen[bytes]]:
    """A worker whose LLM is the fake server, with fast backoff; this test's tasks go to its queue."""
    settings.INGEST_QUEUE = QUEUE
    settings.MEMORY_QUEUE = QUEUE
    env = {
        **worker_env(),
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": fake_openai.base_url,
        "LLM_API_KEY": "sk-test",
        "LLM_MODEL": "fake-chat",
        "LLM_TIMEOUT_SEC": "5",
        "RETRY_MAX_ATTEMPTS": str(ATTEMPTS),
        "RETRY_BACKOFF_BASE_SEC": "0.01",
        "RETRY_BACKOFF_MAX_SEC": "0.05",
        "INGEST_MAX_RETRIES": str(TASK_RETRIES),
        "EXTRACT_GLEANING_PASSES": "0",
    }
    worker = start_worker("llm-faults", env=env, queue=QUEUE)
    yield worker
    stop_worker(worker)


def _chat_requests(fake: FakeOpenAI) -> list[Any]:
    return fake.requests_to("/chat/completions")


def _tenant() -> Tenant:
    return make_tenant("llm faults")


def test_ingestion_retries_429_and_500_then_extracts_with_the_llm(
    llm_worker: Popen[bytes], fake_openai: FakeOpenAI
) -> None:
    tenant = _tenant()
    fake_openai.queue(
        Step(status=429, headers={"Retry-After": "0"}),
        Step(status=500),
        Step(content=json.dumps(EXTRACTION)),
    )
    response = post_document(tenant.client(tenant.write_key), tenant.project.id, title="ada", text=TEXT)
    assert response.status_code == 202, response.json()
    job = wait_job(response.json()["job_id"])
    assert job.status == "succeeded", job.errors
    assert len(_chat_requests(fake_openai)) == 3  # the 429, the 500, the answer
    names = graph.read("MATCH (e:Entity {project_id: $p}) RETURN e.name AS n ORDER BY n", p=tenant.project.id)
    assert [r["n"] for r in names] == ["Ada Lovelace", "Analytical Engine"]


@pytest.mark.parametrize("status", [429, 503])
def test_ingestion_with_the_llm_down_fails_the_document_and_writes_no_graph(
    llm_worker: Popen[bytes], fake_openai: FakeOpenAI, status: int
) -> None:
    tenant = _tenant()
    fake_openai.responder = lambda _body: Step(status=status, headers={"Retry-After": "0"})
    response = post_document(tenant.client(tenant.write_key), tenant.project.id, title="ada", text=TEXT)
    job = wait_job(response.json()["job_id"])
    assert job.status == "failed"
    # every call tried RETRY_MAX_ATTEMPTS times, in the first run and each task retry
    assert len(_chat_requests(fake_openai)) == ATTEMPTS * (1 + TASK_RETRIES)
    assert any("llm is unavailable" in e for e in job.errors), job.errors
    document = graph.read(
        "MATCH (d:Document {id: $id}) RETURN d.status AS status, d.error AS error",
        id=response.json()["document_id"],
    )[0]
    assert document["status"] == "failed"
    assert f"gave up after {TASK_RETRIES} retries: llm is unavailable" in document["error"]
    counts = graph_counts(tenant.project.id)
    assert counts == {"Document": 1, "Chunk": 0, "Entity": 0, "Community": 0, "Source": 0, "RELATED": 0}


def test_memory_processing_retries_then_derives_facts_from_the_llm(
    llm_worker: Popen[bytes], fake_openai: FakeOpenAI
) -> None:
    tenant = _tenant()
    client, pid = tenant.client(tenant.write_key), tenant.project.id

    def derive(body: dict[str, Any]) -> Step:
        if body["messages"][0]["content"] == DESCRIBE_PROMPT:  # the conversation's title and sentiment
            return Step(content=json.dumps({"title": "Living in Lisbon", "sentiment": "neutral"}))
        listing = body["messages"][-1]["content"]
        message_id = listing[1 : listing.index("]")]
        fact = {
            "subject": "user",
            "predicate": "lives_in",
            "object": "Lisbon",
            "statement": "The user lives in Lisbon.",
            "message_ids": [message_id],
        }
        return Step(content=json.dumps({"facts": [fact], "preferences": []}))

    fake_openai.queue(Step(status=429, headers={"Retry-After": "0"}), Step(status=502))
    fake_openai.responder = derive
    stored = store(client, pid, [user("I live in Lisbon.")], user_id="ana")
    assert stored.status_code == 201, stored.json()
    job = wait_job(stored.json()["job_id"])
    assert job.status == "succeeded", job.errors
    assert len(_chat_requests(fake_openai)) == 4  # 429, 502, the facts, the title
    facts = graph.read("MATCH (f:Fact {project_id: $p}) RETURN f.object AS o, f.mode AS m", p=pid)
    assert facts == [{"o": "Lisbon", "m": "llm"}]
    titles = graph.read(
        "MATCH (c:Conversation {project_id: $p}) RETURN c.title AS t, c.sentiment AS s", p=pid
    )
    assert titles == [{"t": "Living in Lisbon", "s": "neutral"}]


def test_memory_processing_with_the_llm_down_fails_the_job_and_keeps_the_messages(
    llm_worker: Popen[bytes], fake_openai: FakeOpenAI
) -> None:
    tenant = _tenant()
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    fake_openai.responder = lambda _body: Step(status=500)
    stored = store(client, pid, [user("I live in Lisbon."), user("I like green tea.")], user_id="ana")
    job = wait_job(stored.json()["job_id"])
    assert job.status == "failed"
    assert len(_chat_requests(fake_openai)) == ATTEMPTS * (1 + TASK_RETRIES)
    assert any("llm is unavailable" in e for e in job.errors), job.errors
    # the stored messages stay; nothing was derived from them
    assert count("Memory", pid) == 2
    for label in ("Fact", "Preference", "UserProfile", "ConversationSummary"):
        assert count(label, pid) == 0, label
