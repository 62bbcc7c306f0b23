"""Extraction through the LLM path (a real OpenAI-compatible server on 127.0.0.1), run in-process."""

from __future__ import annotations

import json

import pytest

from core import graph
from knowledge.models import IngestBatch
from knowledge.pipeline.extraction import extract_llm
from knowledge.services import ingest_batch_run
from tests.conftest import make_tenant
from tests.knowledge.helpers import post_document
from tests.support.openai_server import FakeOpenAI, Step

FIRST = {
    "entities": [
        {"name": "Ada Lovelace", "type": "person", "description": "Mathematician."},
        {"name": "Analytical Engine", "type": "work", "description": "A machine."},
    ],
    "relations": [
        {"source": "Ada Lovelace", "target": "Analytical Engine", "description": "wrote for", "weight": 8},
        {"source": "Ada Lovelace", "target": "Invented Thing", "description": "hallucinated"},
    ],
}
GLEANED = {
    "entities": [{"name": "Charles Babbage", "type": "PERSON", "description": "Designer."}],
    "relations": [
        {"source": "Charles Babbage", "target": "Analytical Engine", "description": "designed", "weight": 9}
    ],
}


def test_llm_extraction_with_gleaning_drops_unlisted_targets(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Step(content=json.dumps(FIRST)), Step(content=json.dumps(GLEANED)))
    result = extract_llm(
        "Ada Lovelace wrote for the Analytical Engine of Charles Babbage.", gleaning_passes=1
    )
    assert result.mode == "llm"
    assert {e.name for e in result.entities} == {"Ada Lovelace", "Analytical Engine", "Charles Babbage"}
    assert {(r.source, r.target) for r in result.relations} == {
        ("Ada Lovelace", "Analytical Engine"),
        ("Charles Babbage", "Analytical Engine"),
    }
    requests = fake_openai.requests_to("/chat/completions")
    assert len(requests) == 2
    assert "missed" in requests[1].body["messages"][-1]["content"]


def test_invalid_llm_output_is_retried_then_the_document_fails_cleanly(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(*[Step(content='{"entities": "not a list"}') for _ in range(3)])
    from core.llm.client import LLMInvalidOutput

    with pytest.raises(LLMInvalidOutput):
        extract_llm("Some text.", gleaning_passes=0)


@pytest.mark.django_db
def test_ingestion_batch_uses_the_llm_and_records_tokens(fake_openai: FakeOpenAI) -> None:
    tenant = make_tenant("llm ingest")
    response = post_document(
        tenant.client(tenant.write_key),
        tenant.project.id,
        title="lovelace",
        text="Ada Lovelace wrote for the Analytical Engine of Charles Babbage.",
    )
    assert response.status_code == 202
    fake_openai.queue(Step(content=json.dumps(FIRST)), Step(content=json.dumps(GLEANED)))
    batch = IngestBatch.objects.get(job_id=response.json()["job_id"])
    ingest_batch_run(batch_id=batch.pk)  # in-process: the test's transaction is not visible to workers
    batch.refresh_from_db()
    assert batch.status == "done"
    assert batch.token_usage["completion_tokens"] > 0 and batch.token_usage["calls"] >= 2
    types = {
        r["name"]: r["type"]
        for r in graph.read(
            "MATCH (e:Entity {project_id: $p}) RETURN e.name AS name, e.type AS type", p=tenant.project.id
        )
    }
    assert types == {"Ada Lovelace": "PERSON", "Analytical Engine": "WORK", "Charles Babbage": "PERSON"}
