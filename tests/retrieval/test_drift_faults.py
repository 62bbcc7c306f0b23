"""DRIFT's bad input and faults: validation, LLM rate limits and outages, malformed output,
hallucinated citations, a hanging follow-up, a websocket client that goes away."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import transaction

from config.asgi import application
from retrieval.drift import citations
from retrieval.drift.dto import ChunkInfo
from tests.conftest import Tenant, make_tenant
from tests.retrieval.drift_helpers import (
    DriftModel,
    ProgressListener,
    chunk_ids_of,
    ingest_with_communities,
    kind_of,
    prompt_text,
    retrieve,
)
from tests.retrieval.helpers import node_count
from tests.support.openai_server import Step

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]


def _drift_events(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if hasattr(r, "drift")]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 100_000}, "query"),
        ({"query": "\n" * 50_000 + "ok" + "\n" * 50_000}, "query"),  # blanks count toward the limit
        ({"query": "a\x00b"}, "query"),
        ({"query": "ok", "top_k": 0}, "top_k"),
        ({"query": "ok", "top_k": 51}, "top_k"),
        ({"query": "ok", "top_k": "many"}, "top_k"),
        ({"query": "ok", "max_depth": 0}, "max_depth"),
        ({"query": "ok", "max_depth": 5}, "max_depth"),
        ({"query": "ok", "max_followups": 11}, "max_followups"),
        ({"query": "ok", "community_level": -1}, "community_level"),
        ({"query": "ok", "retrieval_id": "has spaces/and slashes"}, "retrieval_id"),
        ({"query": "ok", "surprise": 1}, "surprise"),
    ],
)
def test_bad_input_is_400_and_writes_nothing(tenant_a: Tenant, body: dict[str, Any], field: str) -> None:
    before = node_count()
    listener = ProgressListener("rid-bad")
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        **{"project_id": tenant_a.project.id, "retrieval_id": "rid-bad", **body},
    )
    events = listener.stop(settle_sec=0.1)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert field in error["details"]["fields"]
    assert node_count() == before
    assert events == []


def test_missing_project_id_and_missing_key(tenant_a: Tenant) -> None:
    response = retrieve(tenant_a.client(tenant_a.read_key), query="ok")
    assert response.status_code == 400
    assert "project_id" in response.json()["error"]["details"]["fields"]
    anonymous = retrieve(tenant_a.client(), query="ok", project_id=tenant_a.project.id)
    assert anonymous.status_code == 401


def test_rate_limited_llm_is_retried(tenant_a: Tenant, fake_openai, settings) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    # the backoff alone would retry within 0.01 s; the first 429 asks for 1 s (within the cap)
    settings.RETRY_BACKOFF_MAX_SEC = 5.0
    fake_openai.queue(Step(status=429, headers={"Retry-After": "1"}), Step(status=429))
    model = DriftModel(followups=2)
    fake_openai.responder = model
    response = retrieve(
        tenant_a.client(tenant_a.read_key), query="Analytical Engine", project_id=tenant_a.project.id
    )
    assert response.status_code == 200, response.content
    assert response.json()["mode"] == "llm"
    # the two 429s were answered to the first call (HyDE), which then went through
    calls = fake_openai.requests_to("/chat/completions")
    assert len(calls) == 2 + 1 + 1 + 2 + 1
    assert model.calls["hyde"] == 1
    # the retry after the first 429 reached the server only after the wait its Retry-After asked for
    assert calls[1].received_at - calls[0].received_at >= 0.9


def test_llm_down_is_500_with_an_error_event(tenant_a: Tenant, fake_openai) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    fake_openai.responder = lambda body: Step(status=500)
    listener = ProgressListener("rid-down")
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="Analytical Engine",
        project_id=tenant_a.project.id,
        retrieval_id="rid-down",
    )
    events = listener.stop()
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "retrieval_failed"
    assert error["details"]["dependency"] == "llm"
    assert events[-1]["phase"] == "error"
    assert [e["phase"] for e in events][:2] == ["initializing", "expanding_query"]
    # bounded: RETRY_MAX_ATTEMPTS tries of the first call (HyDE), and no call after it
    calls = fake_openai.requests_to("/chat/completions")
    assert [kind_of(c.body) for c in calls] == ["hyde"] * 3


def test_llm_unreachable_is_500(tenant_a: Tenant, fake_openai, settings) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    response = retrieve(
        tenant_a.client(tenant_a.read_key), query="Analytical Engine", project_id=tenant_a.project.id
    )
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "retrieval_failed"


def test_malformed_follow_up_output_drops_that_branch(
    tenant_a: Tenant, fake_openai, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    model = DriftModel(followups=3)

    def broken_first(body: dict[str, Any]) -> Step | None:
        text = prompt_text(body)
        if "Follow-up question: Follow-up 0" in text:
            return Step(content="{not json")
        if "Follow-up question: Follow-up 1" in text:  # valid JSON, wrong schema
            return Step(content=json.dumps({"answer": "x", "confidence": 7}))
        return None

    model.override["local"] = broken_first
    fake_openai.responder = model
    caplog.set_level(logging.WARNING)
    response = retrieve(
        tenant_a.client(tenant_a.read_key), query="Analytical Engine", project_id=tenant_a.project.id
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["stats"]["followups"] == 1
    assert _drift_events(caplog).count("drift_followup_invalid_output") == 2
    # each broken branch was asked RETRY_MAX_ATTEMPTS (3) times
    assert model.calls["local"] == 3 + 3 + 1


def test_malformed_primer_and_aggregator_fall_back(tenant_a: Tenant, fake_openai, caplog) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    model = DriftModel()
    model.override["primer"] = lambda body: Step(content="nonsense")
    model.override["aggregator"] = lambda body: Step(content=json.dumps({"key_facts": "not a list"}))
    fake_openai.responder = model
    caplog.set_level(logging.WARNING)
    response = retrieve(
        tenant_a.client(tenant_a.read_key), query="Analytical Engine", project_id=tenant_a.project.id
    )
    assert response.status_code == 200
    body = response.json()
    events = _drift_events(caplog)
    assert "drift_primer_invalid" in events and "drift_aggregation_invalid" in events
    assert body["key_facts"] and body["key_facts"][0]["fact"].startswith("Local answer")
    assert all(isinstance(c, dict) for f in body["key_facts"] for c in f["citations"])


def test_hallucinated_and_empty_citations_are_filtered_with_log_events(
    tenant_a: Tenant, fake_openai, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    model = DriftModel(
        followups=1,
        extra_citations=[
            {"chunk_id": "made-up-chunk", "span": "invented"},
            {"chunk_id": None, "span": "no id"},
            {"chunk_id": "   ", "span": "blank id"},
        ],
    )

    def aggregator(body: dict[str, Any]) -> Step:
        ids = re.search(r"Valid chunk ids: (.*)", prompt_text(body)).group(1).split(", ")  # type: ignore[union-attr]
        facts = [{"fact": "F", "citations": [ids[0], "ghost-chunk", None, ids[0]]}]
        return Step(content=json.dumps({"final_answer": "A", "key_facts": facts, "residual_uncertainty": ""}))

    model.override["aggregator"] = aggregator
    fake_openai.responder = model
    caplog.set_level(logging.WARNING)
    response = retrieve(
        tenant_a.client(tenant_a.read_key), query="Analytical Engine", project_id=tenant_a.project.id
    )
    assert response.status_code == 200, response.content
    events = _drift_events(caplog)
    assert "citation_model_null_chunk_id" in events
    assert "citation_model_empty_chunk_id" in events
    assert (
        events.count("citation_validation_null_chunk_id") == 2 + 1
    )  # two in the follow-up, one in aggregation
    unmatched = [
        r.drift for r in caplog.records if r.getMessage() == "citation_validation_unmatched_chunk_id"
    ]
    assert {u["chunk_id"] for u in unmatched} == {"made-up-chunk", "ghost-chunk"}
    summary = next(r.drift for r in caplog.records if r.getMessage() == "citation_validation_summary")
    assert summary == {
        "event": "citation_validation_summary",
        "stage": "followup",
        "total": 5,
        "valid": 2,
        "filtered": 3,
    }
    (fact,) = response.json()["key_facts"]
    assert len(fact["citations"]) == 1  # the duplicate collapsed, the ghost and the null dropped
    assert fact["citations"][0]["chunk_id"] in chunk_ids_of(tenant_a.project.id)
    assert fact["citations"][0]["span"].startswith("evidence for")


def test_enrichment_falls_back_to_the_id_string() -> None:
    known = {"a": ChunkInfo(chunk_id="a", document_id="d", document_name="Doc A", text="alpha text")}
    cited = {"b": {"chunk_id": "b", "span": "beta", "document_name": "Doc B"}}
    out = citations.enrich(["a", "b", "c", "zzz"], cited=cited, known=known, valid_ids={"a", "b", "c"})
    assert out == [
        {"chunk_id": "a", "span": "alpha text", "document_name": "Doc A"},
        {"chunk_id": "b", "span": "beta", "document_name": "Doc B"},
        "c",
    ]


def test_a_hanging_follow_up_is_bounded_by_its_timeout(
    tenant_a: Tenant, fake_openai, settings, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    # the timeout leaves the other follow-up (retrieval + answer) room on a loaded 2-core machine
    settings.DRIFT_FOLLOWUP_TIMEOUT_SEC = 2.0
    settings.LLM_TIMEOUT_SEC = 120.0  # the client never gives up first: only DRIFT's timeout can
    model = DriftModel(followups=2)
    # the server holds follow-up 0's call until the test releases it, which it does only once the
    # search has answered; a search that waited for the call would see it end by the hold's own
    # bound (30 s) first
    release = threading.Event()
    held: list[str] = []

    def hang(body: dict[str, Any]) -> Step | None:
        if "Follow-up 0" not in prompt_text(body):
            return None
        held.append("released by the test" if release.wait(30) else "ended by its own bound")
        return None  # a normal answer, which the search no longer reads

    model.override["local"] = hang
    fake_openai.responder = model
    caplog.set_level(logging.WARNING)
    try:
        response = retrieve(
            tenant_a.client(tenant_a.read_key), query="Analytical Engine", project_id=tenant_a.project.id
        )
        held_when_answered = list(held)
    finally:
        release.set()
    assert response.status_code == 200
    assert response.json()["stats"]["followups"] == 1
    assert "drift_followup_timeout" in _drift_events(caplog)
    # the search answered while the hanging call was still held: it did not wait for it
    assert held_when_answered == []


@pytest.mark.django_db(transaction=True)
def test_a_websocket_client_leaving_does_not_stop_the_search(fake_openai) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("ws leaver")  # committed: the websocket checks the key on another connection

    class _Discard(Exception):
        pass

    # The graph is built in this process; its SQL bookkeeping (job, batches) is rolled back so the
    # queued batches never reach the session's Celery worker, which would ingest them a second time.
    with pytest.raises(_Discard), transaction.atomic():
        ingest_with_communities(tenant.project.id)
        raise _Discard
    model = DriftModel(followups=2)
    fake_openai.responder = model
    fake_openai.chat_delay_sec = 0.2

    async def scenario() -> tuple[Any, dict[str, Any]]:
        communicator = WebsocketCommunicator(
            application, f"/ws/v1/projects/{tenant.project.id}/progress/?key={tenant.read_key.key}"
        )
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        call = asyncio.ensure_future(
            sync_to_async(retrieve, thread_sensitive=False)(
                tenant.client(tenant.read_key),
                query="Analytical Engine",
                project_id=tenant.project.id,
                retrieval_id="rid-leave",
            )
        )
        first = await communicator.receive_json_from(timeout=10)
        await communicator.disconnect()
        return await call, first

    response, first = asyncio.run(scenario())
    assert first["retrieval_id"] == "rid-leave" and first["phase"] == "initializing"
    assert response.status_code == 200, response.content
    assert response.json()["key_facts"]
