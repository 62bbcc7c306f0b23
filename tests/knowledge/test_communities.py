"""Hierarchical Leiden communities: the pure hierarchy and the real rebuild on Neo4j."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from core import graph
from core.models import Job
from knowledge.communities import build_hierarchy
from knowledge.models import IngestBatch
from knowledge.services import ingest_batch_run
from knowledge.tasks import communities_rebuild_job
from tests.conftest import Tenant, make_tenant
from tests.knowledge.helpers import wait_job
from tests.support.openai_server import FakeOpenAI, Step


def _clusters_of_clusters() -> list[tuple[str, str, float]]:
    """8 dense groups of 6 nodes; groups pair up into 4 super-groups through 2 bridges each."""
    edges = []
    for g in range(8):
        nodes = [f"g{g}n{i}" for i in range(6)]
        edges += [(a, b, 5.0) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
    for g in range(0, 8, 2):
        edges += [(f"g{g}n0", f"g{g + 1}n0", 3.0), (f"g{g}n1", f"g{g + 1}n1", 3.0)]
    for g in range(0, 8, 2):
        edges.append((f"g{g}n2", f"g{(g + 2) % 8}n2", 0.5))
    return edges


def test_hierarchy_levels_nest() -> None:
    levels = build_hierarchy(_clusters_of_clusters(), max_levels=4, max_cluster_size=10)
    assert len(levels) >= 2
    leaves = levels[0]
    assert sum(len(m) for m in leaves.values()) == 48
    assert all(len(m) <= 10 for m in leaves.values())
    for lower, upper in zip(levels, levels[1:], strict=False):
        children = [child for members in upper.values() for child in members]
        assert sorted(children) == sorted(lower)  # every community below has exactly one parent
        assert len(upper) < len(lower)


def test_hierarchy_of_nothing_is_empty() -> None:
    assert build_hierarchy([], max_levels=3, max_cluster_size=10) == []


TEXTS = [
    "Marie Curie and Pierre Curie studied radioactivity in Paris. Marie Curie won the Nobel Prize.",
    "Pierre Curie taught physics in Paris. Marie Curie and Pierre Curie discovered polonium.",
    "Alan Turing worked at Bletchley Park. Alan Turing broke the Enigma machine cipher.",
    "Bletchley Park hosted codebreakers. The Enigma machine was broken at Bletchley Park by Alan Turing.",
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker_process")
def test_rebuild_writes_communities_with_summaries_and_links() -> None:
    tenant: Tenant = make_tenant("communities")
    client = tenant.client(tenant.write_key)
    response = client.post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        {"documents": [{"title": f"d{i}", "text": t} for i, t in enumerate(TEXTS)]},
        format="json",
    )
    wait_job(response.json()["job_id"])
    rebuild = client.post(f"/api/v1/projects/{tenant.project.id}/communities:rebuild")
    assert rebuild.status_code == 202
    job = wait_job(rebuild.json()["job_id"])
    assert job.status == "succeeded", job.errors
    assert job.counts["communities"] >= 2 and job.counts["levels"] >= 1

    communities = graph.read(
        "MATCH (c:Community {project_id: $p}) RETURN c.level AS level, c.title AS title, c.summary AS summary, "
        "c.rank AS rank, size(c.embedding) AS dims, c.stale AS stale",
        p=tenant.project.id,
    )
    assert all(c["summary"] and c["title"] and c["rank"] > 0 and c["dims"] == 384 for c in communities)
    assert not any(c["stale"] for c in communities)
    # the enrichment step gave every entity its name embedding
    missing = graph.read(
        "MATCH (e:Entity {project_id: $p}) WHERE size(e.embedding) <> 384 OR e.embedding IS NULL "
        "RETURN count(e) AS n",
        p=tenant.project.id,
    )
    assert missing[0]["n"] == 0
    # the Curie entities and the Turing entities do not share a leaf community
    leaf_of = {
        r["name"]: r["cid"]
        for r in graph.read(
            "MATCH (e:Entity {project_id: $p})-[:IN_COMMUNITY]->(c:Community {level: 0}) RETURN e.name AS name, c.id AS cid",
            p=tenant.project.id,
        )
    }
    assert leaf_of["Marie Curie"] != leaf_of["Alan Turing"]
    chunk_links = graph.read(
        "MATCH (:Chunk {project_id: $p})-[:IN_COMMUNITY]->(c:Community {level: 0}) RETURN count(*) AS n",
        p=tenant.project.id,
    )
    assert chunk_links[0]["n"] >= 4
    wrong_direction = graph.read(
        "MATCH (a:Community {project_id: $p})-[:IN_COMMUNITY]->(b:Community) WHERE b.level <> a.level + 1 "
        "RETURN count(*) AS n",
        p=tenant.project.id,
    )
    assert wrong_direction[0]["n"] == 0

    # new content marks communities stale; the debounced automatic rebuild then refreshes them
    more = client.post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        {"title": "more", "text": "Ada Lovelace wrote about the Analytical Engine of Charles Babbage."},
        format="json",
    )
    finished = wait_job(more.json()["job_id"]).finished_at
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        auto = Job.objects.filter(project_id=tenant.project.id, kind="communities", created_at__gt=finished)
        if auto.filter(status="succeeded").exists():
            break
        time.sleep(0.5)
    else:
        raise AssertionError("no automatic community rebuild after ingestion")
    names = {
        r["name"]
        for r in graph.read(
            "MATCH (e:Entity {project_id: $p})-[:IN_COMMUNITY]->(:Community) RETURN e.name AS name",
            p=tenant.project.id,
        )
    }
    assert "Ada Lovelace" in names


GIVEN_GRAPH = {
    "entities": [
        {"name": name, "type": kind, "description": description}
        for name, kind, description in [
            ("Marie Curie", "PERSON", "Physicist who studied radioactivity."),
            ("Pierre Curie", "PERSON", "Physicist, husband of Marie Curie."),
            ("Polonium", "ELEMENT", "Element discovered by the Curies."),
            ("Alan Turing", "PERSON", "Mathematician and codebreaker."),
            ("Bletchley Park", "PLACE", "Codebreaking centre."),
            ("Enigma Machine", "DEVICE", "German cipher machine."),
        ]
    ],
    "relations": [
        {"source": a, "target": b, "description": "related", "weight": 9}
        for a, b in [
            ("Marie Curie", "Pierre Curie"),
            ("Marie Curie", "Polonium"),
            ("Pierre Curie", "Polonium"),
            ("Alan Turing", "Bletchley Park"),
            ("Alan Turing", "Enigma Machine"),
            ("Bletchley Park", "Enigma Machine"),
        ]
    ],
}


def _fake_report(body: dict[str, Any]) -> Step:
    """The fake LLM's community report: it names the entities listed in the prompt."""
    prompt = body["messages"][-1]["content"]
    names = sorted(line[2:].split(":")[0] for line in prompt.splitlines() if line.startswith("- "))
    report = {"title": f"Fake report on {names[0]}", "summary": f"FAKE: {' + '.join(names)}.", "rating": 7.5}
    return Step(content=json.dumps(report))


@pytest.mark.django_db
def test_rebuild_with_an_llm_stores_the_llms_reports(fake_openai: FakeOpenAI, settings: Any) -> None:
    """The rebuild job with an LLM configured: one report per community from the LLM (the fake
    server), prompted with the community's entities, stored as its title, summary and rank."""
    settings.INGEST_QUEUE = "communities-llm-test"  # nothing here goes to the session's worker
    tenant: Tenant = make_tenant("communities llm")
    client = tenant.client(tenant.write_key)
    response = client.post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        {"title": "scientists", "text": " ".join(TEXTS), **GIVEN_GRAPH},
        format="json",
    )
    assert response.status_code == 202, response.json()
    for batch in IngestBatch.objects.filter(job_id=response.json()["job_id"]):
        ingest_batch_run(batch_id=batch.pk)  # in-process: the test's transaction is not visible to workers
    assert not fake_openai.requests_to("/chat/completions")  # the given graph needed no extraction

    fake_openai.responder = _fake_report
    rebuild = client.post(f"/api/v1/projects/{tenant.project.id}/communities:rebuild")
    assert rebuild.status_code == 202
    communities_rebuild_job(rebuild.json()["job_id"])  # the Celery task, run in-process
    job = Job.objects.get(pk=rebuild.json()["job_id"])
    assert job.status == "succeeded", job.errors
    assert job.counts["mode"] == "llm"

    prompts = [r.body["messages"][-1]["content"] for r in fake_openai.requests_to("/chat/completions")]
    assert len(prompts) == job.counts["communities"] >= 2
    assert all(p.startswith("Write a report on this community") for p in prompts)
    assert any("Marie Curie" in p for p in prompts) and any("Enigma Machine" in p for p in prompts)
    leaves = graph.read(
        "MATCH (e:Entity {project_id: $p})-[:IN_COMMUNITY]->(c:Community {level: 0}) "
        "RETURN c.title AS title, c.summary AS summary, c.rank AS rank, collect(e.name) AS names",
        p=tenant.project.id,
    )
    assert leaves
    for leaf in leaves:
        names = sorted(leaf["names"])
        assert leaf["summary"] == f"FAKE: {' + '.join(names)}."
        assert leaf["title"] == f"Fake report on {names[0]}"
        assert leaf["rank"] == 7.5
    curie = next(leaf for leaf in leaves if "Marie Curie" in leaf["names"])
    assert "Alan Turing" not in curie["names"]
    summaries = graph.read("MATCH (c:Community {project_id: $p}) RETURN c.summary AS s", p=tenant.project.id)
    assert all(row["s"].startswith("FAKE: ") for row in summaries)
