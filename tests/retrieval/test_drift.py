"""DRIFT search (POST /retrieve) on the real stack: both modes, citations, progress, tenancy."""

from __future__ import annotations

import json
import re
import threading

import pytest

from tests.conftest import Tenant
from tests.retrieval.corpus import DOCS
from tests.retrieval.drift_helpers import (
    DriftModel,
    ProgressListener,
    chunk_ids_of,
    ingest_with_communities,
    kind_of,
    prompt_text,
    retrieve,
)
from tests.support.openai_server import Step

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]

PHASES = [
    "initializing",
    "expanding_query",
    "retrieving_communities",
    "executing_followup",
    "aggregating_results",
    "completed",
]


def _phase_order(events: list[dict]) -> list[str]:
    order: list[str] = []
    for e in events:
        if not order or order[-1] != e["phase"]:
            order.append(e["phase"])
    return order


def test_extractive_drift_answers_with_real_citations_and_progress(tenant_a: Tenant) -> None:
    ingest_with_communities(tenant_a.project.id)
    listener = ProgressListener("rid-extractive-1")
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="Who designed the Analytical Engine?",
        project_id=tenant_a.project.id,
        retrieval_id="rid-extractive-1",
    )
    events = listener.stop()
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["mode"] == "extractive"
    assert "no_data_found" not in body
    assert "Babbage" in body["final_answer"]
    assert body["key_facts"]
    project_chunks = chunk_ids_of(tenant_a.project.id)
    for fact in body["key_facts"]:
        assert fact["citations"]
        for citation in fact["citations"]:
            assert citation["chunk_id"] in project_chunks
            assert citation["document_name"] in {
                "Lovelace",
                "Babbage",
                "Sourdough",
                "Glaciers",
                "Gletscher",
                "Volcanoes",
            }
            assert citation["span"]
    assert _phase_order(events) == PHASES
    pcts = [e["progress_pct"] for e in events]
    assert pcts == sorted(pcts) and pcts[0] == 0 and pcts[-1] == 100
    assert body["usage"]["llm_calls"] == 0


def test_llm_drift_runs_seed_phases_with_bounded_calls(tenant_a: Tenant, fake_openai) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    model = DriftModel(followups=3)
    fake_openai.responder = model
    listener = ProgressListener("rid-llm-phases")
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="Who designed the Analytical Engine?",
        project_id=tenant_a.project.id,
        retrieval_id="rid-llm-phases",
    )
    events = listener.stop()
    assert response.status_code == 200, response.content
    # the phases were reported in seed 002's order, each follow-up answered within its phase
    assert _phase_order(events) == PHASES
    answered = [e for e in events if re.match(r"Follow-up \d/3 answered", e["thought_summary"])]
    assert len(answered) == 3 and {e["phase"] for e in answered} == {"executing_followup"}
    # and the model was asked in that order, as the server saw the calls arrive: HyDE, the primer,
    # the three follow-ups, then the aggregation
    calls = sorted(fake_openai.requests_to("/chat/completions"), key=lambda r: r.seq)
    assert [kind_of(c.body) for c in calls] == ["hyde", "primer", "local", "local", "local", "aggregator"]
    body = response.json()
    assert body["mode"] == "llm"
    assert body["final_answer"] == "The final answer."
    citation = body["key_facts"][0]["citations"][0]
    assert citation["chunk_id"] in chunk_ids_of(tenant_a.project.id)
    assert model.calls == {"hyde": 1, "primer": 1, "local": 3, "aggregator": 1}
    assert body["usage"]["llm_calls"] == 6


def test_progress_details_follow_the_citation_display_rules(tenant_a: Tenant) -> None:
    ingest_with_communities(tenant_a.project.id)
    listener = ProgressListener("rid-display")
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="How do glaciers carve valleys?",
        project_id=tenant_a.project.id,
        retrieval_id="rid-display",
    )
    events = listener.stop()
    assert response.status_code == 200
    followups = [
        e for e in events if e["phase"] == "executing_followup" and "answered" in e["thought_summary"]
    ]
    assert followups
    assert any(re.search(r'^- \[[^\]]+\] "', e["details_md"], re.M) for e in followups)
    aggregating = next(e for e in events if e["phase"] == "aggregating_results")
    names = aggregating["details_md"].removeprefix("**Sources:** ").split(", ")
    assert names and len(names) == len(set(names))
    completed = events[-1]
    assert completed["phase"] == "completed" and completed["progress_pct"] == 100
    bracketed = re.findall(r"\[([^\]]+)\]", completed["details_md"])
    assert bracketed and len(bracketed) == len(set(bracketed))
    cited = {c["document_name"] for f in response.json()["key_facts"] for c in f["citations"]}
    assert set(bracketed) == cited
    assert all(
        e["project_id"] == tenant_a.project.id and e["message_type"] == "retrieval_progress" for e in events
    )


def test_follow_ups_of_a_round_run_concurrently_and_rounds_iterate(
    tenant_a: Tenant, fake_openai, settings
) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    # neither the client nor DRIFT gives up on a call while the server holds it
    settings.LLM_TIMEOUT_SEC = 120.0
    settings.DRIFT_FOLLOWUP_TIMEOUT_SEC = 120.0
    model = DriftModel(followups=3)
    # the server holds each first-round call until all three have arrived: they all get through only
    # if the search had them in flight side by side (one at a time, the first is held until the
    # barrier's own bound breaks it, and every call of the round is marked "not together")
    together = threading.Barrier(3)
    log: list[tuple[str, str]] = []  # (what, question) in the order the server saw it
    lock = threading.Lock()

    def note(what: str, question: str) -> None:
        with lock:
            log.append((what, question))

    def held_local(body: dict) -> Step:
        data = json.loads(DriftModel(followups=3)(body).content or "{}")
        question = data["answer"].removeprefix("Local answer to ")
        note("asked", question)
        number = re.search(r"Follow-up (\d+)", question)
        if number and "Deeper" not in question:
            try:
                together.wait(timeout=30)
            except threading.BrokenBarrierError:
                note("not together", question)
            data["new_followups"] = [{"question": f"Deeper {number.group(1)}?"}]
            data["should_continue"] = True
        note("answered", question)
        return Step(content=json.dumps(data))

    model.override["local"] = held_local
    fake_openai.responder = model
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="Who designed the Analytical Engine?",
        project_id=tenant_a.project.id,
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["stats"]["depth"] == 2
    assert body["stats"]["followups"] == 6
    assert [what for what, _q in log].count("not together") == 0
    first_round = {q for what, q in log if what == "asked" and "Deeper" not in q}
    deeper = {q for what, q in log if what == "asked" and "Deeper" in q}
    assert len(first_round) == 3 and len(deeper) == 3
    # all three first-round calls were in flight before any of them was answered
    order = [what for what, q in log if q in first_round]
    assert order == ["asked"] * 3 + ["answered"] * 3
    # rounds are sequential: the first deeper call came after the last first-round answer
    last_first_answer = max(i for i, (what, q) in enumerate(log) if what == "answered" and q in first_round)
    first_deeper_call = min(i for i, (what, q) in enumerate(log) if what == "asked" and q in deeper)
    assert first_deeper_call > last_first_answer
    assert body["usage"]["llm_calls"] == 1 + 1 + 3 + 3 + 1


def test_max_followups_and_max_depth_bound_the_llm_calls(tenant_a: Tenant, fake_openai) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    model = DriftModel(followups=8)
    fake_openai.responder = model
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="Who designed the Analytical Engine?",
        project_id=tenant_a.project.id,
        max_followups=2,
        max_depth=1,
    )
    assert response.status_code == 200
    assert model.calls == {"hyde": 1, "primer": 1, "local": 2, "aggregator": 1}


def test_empty_graph_answers_no_data_found(tenant_a: Tenant) -> None:
    listener = ProgressListener("rid-empty")
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="anything",
        project_id=tenant_a.project.id,
        retrieval_id="rid-empty",
    )
    events = listener.stop()
    assert response.status_code == 200
    body = response.json()
    assert {k: body[k] for k in ("final_answer", "key_facts", "residual_uncertainty", "no_data_found")} == {
        "final_answer": "",
        "key_facts": [],
        "residual_uncertainty": "",
        "no_data_found": True,
    }
    assert [e["phase"] for e in events] == ["initializing", "completed"]


def test_nothing_relevant_answers_no_data_found(tenant_a: Tenant, fake_openai) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id)
    model = DriftModel()
    fake_openai.responder = model
    response = retrieve(
        tenant_a.client(tenant_a.read_key), query="qwzxv jjkrpt", project_id=tenant_a.project.id
    )
    assert response.status_code == 200
    assert response.json()["no_data_found"] is True
    assert "local" not in model.calls and "aggregator" not in model.calls


def test_drift_never_crosses_projects(tenant_a: Tenant, tenant_b: Tenant, fake_openai) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id, DOCS[:3])
    ingest_with_communities(tenant_b.project.id, DOCS[3:])
    b_chunks = sorted(chunk_ids_of(tenant_b.project.id))
    # the model cites B's chunks while answering for A: they are filtered out
    model = DriftModel(extra_citations=[{"chunk_id": b_chunks[0], "span": "foreign"}])
    fake_openai.responder = model

    def aggregator(body: dict) -> Step:
        ids = re.search(r"Valid chunk ids: (.*)", prompt_text(body)).group(1).split(", ")  # type: ignore[union-attr]
        return Step(
            content=json.dumps(
                {
                    "final_answer": "x",
                    "key_facts": [{"fact": "f", "citations": [*ids, *b_chunks]}],
                    "residual_uncertainty": "",
                }
            )
        )

    model.override["aggregator"] = aggregator
    response = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="volcano glacier engine bread",
        project_id=tenant_a.project.id,
    )
    assert response.status_code == 200
    cited = {
        c["chunk_id"] if isinstance(c, dict) else c
        for f in response.json()["key_facts"]
        for c in f["citations"]
    }
    assert cited and cited <= chunk_ids_of(tenant_a.project.id)
    # every chunk the local executors were shown is A's
    shown = set()
    for request in fake_openai.requests_to("/chat/completions"):
        shown |= set(re.findall(r"\[chunk_id: ([^\]]+)\]", prompt_text(request.body)))
    assert shown and shown <= chunk_ids_of(tenant_a.project.id)
    # B's key cannot run DRIFT on A's project, and an unknown project is 404 too
    other = retrieve(tenant_b.client(tenant_b.read_key), query="engine", project_id=tenant_a.project.id)
    assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"
    unknown = retrieve(tenant_b.client(tenant_b.read_key), query="engine", project_id="no-such-project")
    assert unknown.status_code == 404


def test_a_staff_session_may_search_any_project(tenant_a: Tenant, admin_client) -> None:  # type: ignore[no-untyped-def]
    ingest_with_communities(tenant_a.project.id, DOCS[:2])
    response = admin_client.post(
        "/retrieve",
        {"query": "Analytical Engine", "project_id": tenant_a.project.id},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["key_facts"]
