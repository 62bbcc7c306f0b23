"""The start-up warm-up (core.runtime.warmup) on the real stack: every registered hot query runs
against the project whose ingestion finished last, nothing is written, and /healthz reports it."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from core import graph
from core.models import ApiKey, Job
from core.runtime.redis_client import get_redis
from core.runtime.warmup import WARM_UP_QUERY, WarmUpRequestFailed, api_post, warm_questions, warm_up
from knowledge.dto import DocumentInput
from tests.conftest import Tenant
from tests.retrieval.helpers import ingest_now

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]

STEPS = {
    "embedding",
    "chunk records",
    "search vector",
    "search fulltext",
    "search hybrid",
    "search graph",
    "drift",
    "memory search",
}


def _graph_size() -> tuple[int, int]:
    row = graph.read("MATCH (n) OPTIONAL MATCH (n)-[r]->() RETURN count(DISTINCT n) AS n, count(r) AS r")[0]
    return row["n"], row["r"]


def test_warm_up_runs_every_hot_query_on_the_last_ingested_project_and_writes_nothing(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    ingest_now(
        tenant_a.project.id, [DocumentInput(title="Ada", text="Ada Lovelace wrote the first program.")]
    )
    ingest_now(
        tenant_b.project.id, [DocumentInput(title="Grace", text="Grace Hopper built the first compiler.")]
    )
    size, jobs = _graph_size(), Job.objects.count()
    keys = sorted(ApiKey.objects.values_list("pk", "last_used_at"))
    throttled = get_redis().keys("throttle:*")

    state = warm_up(rounds=2)

    assert state.status == "done" and state.project_id == tenant_b.project.id
    assert set(state.steps) == STEPS
    failed = {name: step for name, step in state.steps.items() if "first_ms" not in step}
    assert failed == {}
    assert all("last_ms" in step for name, step in state.steps.items() if name != "embedding")
    # two rounds, two questions: the generic one, then one naming the project's document
    assert state.steps["embedding"]["questions"] == 2
    assert _graph_size() == size and Job.objects.count() == jobs
    # the requests hold no key: no key row made or touched, no throttle bucket counted
    assert sorted(ApiKey.objects.values_list("pk", "last_used_at")) == keys
    assert get_redis().keys("throttle:*") == throttled

    health = Client().get("/healthz").json()
    assert health["warm_up"]["status"] == "done"
    assert set(health["warm_up"]["steps"]) == STEPS


def test_without_projects_the_warm_up_loads_the_embedder_only() -> None:
    state = warm_up(rounds=2)
    assert state.status == "done" and state.project_id is None


def test_the_rounds_ask_questions_naming_the_projects_own_documents_only(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    ingest_now(
        tenant_a.project.id,
        [
            DocumentInput(title="Ada", text="Ada Lovelace wrote the first program."),
            DocumentInput(title="Babbage", text="Charles Babbage designed the Analytical Engine."),
        ],
    )
    ingest_now(
        tenant_b.project.id, [DocumentInput(title="Grace", text="Grace Hopper built the first compiler.")]
    )

    questions = warm_questions(tenant_a.project.id, 4)

    assert questions[0] == WARM_UP_QUERY and len(questions) == 4
    assert set(questions[1:3]) == {"What does Ada say?", "What does Babbage say?"}
    assert questions[3] == WARM_UP_QUERY  # too few documents: the same questions again, in turn
    assert not any("Grace" in q for q in questions)  # another project's titles never
    assert warm_questions(tenant_b.project.id, 2) == [WARM_UP_QUERY, "What does Grace say?"]


def test_a_warm_up_request_is_held_to_its_projects_read_scope(tenant_a: Tenant, tenant_b: Tenant) -> None:
    ingest_now(
        tenant_a.project.id, [DocumentInput(title="Ada", text="Ada Lovelace wrote the first program.")]
    )
    ingest_now(tenant_b.project.id, [DocumentInput(title="Grace", text="Grace Hopper built the compiler.")])
    own = reverse("search", kwargs={"project_id": tenant_a.project.id})
    assert api_post(own, {"query": "Who wrote the first program?"}, project_id=tenant_a.project.id) == 200

    # another project's search answers 404 as it does to a key of project a
    other = reverse("search", kwargs={"project_id": tenant_b.project.id})
    with pytest.raises(WarmUpRequestFailed, match="answered 404"):
        api_post(other, {"query": "Who built the compiler?"}, project_id=tenant_a.project.id)
    with pytest.raises(WarmUpRequestFailed, match="answered 404"):
        api_post(
            reverse("retrieve"),
            {"query": "compiler", "project_id": tenant_b.project.id},
            project_id=tenant_a.project.id,
        )

    # a write is refused (read scope) and nothing is stored
    memories = graph.read("MATCH (m:Memory) RETURN count(m) AS n")[0]["n"]
    store = reverse("memory-store", kwargs={"project_id": tenant_a.project.id})
    body = {"scope": {"user_id": "u"}, "messages": [{"role": "user", "content": "I like tea."}]}
    with pytest.raises(WarmUpRequestFailed, match="answered 403"):
        api_post(store, body, project_id=tenant_a.project.id)
    assert graph.read("MATCH (m:Memory) RETURN count(m) AS n")[0]["n"] == memories
