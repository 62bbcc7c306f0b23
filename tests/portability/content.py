"""A small project with documents, memories and a session (filled through the API), and what to
compare after it has travelled: its counts per label and relationship type, and its searches."""

from __future__ import annotations

import time
from typing import Any

from core import graph
from core.models import Job
from core.selectors import project_get
from core.services import api_key_create
from portability.owners import LABELS
from tests.conftest import Tenant
from tests.knowledge.helpers import wait_job
from tests.memory.helpers import assistant, msearch, store, user

TEXTS = [
    "Marie Curie discovered polonium and radium in Paris with Pierre Curie.",
    "Alan Turing broke the Enigma cipher at Bletchley Park during the war.",
    "The Analytical Engine was designed by Charles Babbage; Ada Lovelace wrote its first program.",
    "Radium glows faintly in the dark, which made it popular in early twentieth century products.",
]
QUERIES = ["who discovered radium", "Enigma codebreaking", "first computer program"]


def fill(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    pid = tenant.project.id
    response = client.post(
        f"/api/v1/projects/{pid}/documents",
        {"documents": [{"title": f"doc {i}", "text": text} for i, text in enumerate(TEXTS)]},
        format="json",
    )
    assert wait_job(response.json()["job_id"]).status == "succeeded"
    messages = [user("I moved to Lisbon last spring"), assistant("Lisbon is lovely"), user("I love sardines")]
    response = store(client, pid, messages, user_id="ana", thread_id="t1")
    assert response.status_code == 201, response.content
    if response.json()["job_id"]:
        assert wait_job(response.json()["job_id"]).status == "succeeded"
    base = f"/api/v1/projects/{pid}/apps/shop/users/ana/sessions"
    sid = client.post(base, {}, format="json").json()["id"]
    event = {
        "author": "user",
        "timestamp": 1_700_000_000.0,
        "content": {"role": "user", "parts": [{"text": "hi"}]},
    }
    assert client.post(f"{base}/{sid}/events", {"event": event}, format="json").status_code == 201
    settle(pid)


def settle(project_id: str) -> None:
    """Wait until the work the writes queued (memory processing, the community rebuild ingestion
    schedules a second later) is done: no job queued or running and the graph unchanged for 3 s."""
    deadline, last, quiet_since = time.monotonic() + 120, None, time.monotonic()
    while time.monotonic() < deadline:
        active = Job.objects.filter(project_id=project_id, status__in=("queued", "running")).exists()
        now = (active, graph_counts(project_id))
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif not active and time.monotonic() - quiet_since >= 3:
            return
        time.sleep(0.3)
    raise AssertionError(f"project {project_id} still changing after 120 s")


def tenant_of(project_id: str) -> Tenant:
    keys = [
        api_key_create(project_id=project_id, name=s[-1], scopes=s)
        for s in (["read"], ["read", "write"], ["admin"])
    ]
    return Tenant(project_get(project_id=project_id), *keys)


def graph_counts(project_id: str) -> dict[str, int]:
    nodes = {
        label: graph.read(f"MATCH (n:{label}) WHERE n.project_id = $p RETURN count(n) AS n", p=project_id)[0][
            "n"
        ]
        for label in LABELS
    }
    rels = graph.read(
        "MATCH (a)-[r]->(b) WHERE a.project_id = $p AND b.project_id = $p RETURN type(r) AS t, count(r) AS n",
        p=project_id,
    )
    return {**nodes, **{f"-[{row['t']}]-": row["n"] for row in rels}}


def embeddings_of(project_id: str) -> dict[str, list[float]]:
    """Every embedding the project's nodes hold, by node id: exactly the stored doubles."""
    rows = graph.read(
        "MATCH (n) WHERE n.project_id = $p AND n.embedding IS NOT NULL RETURN n.id AS id, n.embedding AS e",
        p=project_id,
    )
    return {row["id"]: row["e"] for row in rows}


def answers_of(tenant: Tenant) -> dict[str, Any]:
    client = tenant.client(tenant.read_key)
    pid = tenant.project.id
    out: dict[str, Any] = {}
    for query in QUERIES:
        for mode in ("vector", "fulltext", "hybrid"):
            response = client.post(
                f"/api/v1/projects/{pid}/search", {"query": query, "mode": mode, "top_k": 3}, format="json"
            )
            assert response.status_code == 200, response.content
            out[f"{mode}:{query}"] = [(i["chunk_id"], round(i["score"], 6)) for i in response.json()["items"]]
    for query in ("Lisbon", "sardines"):
        response = msearch(client, pid, query, {"user_id": "ana"}, top_k=3)
        assert response.status_code == 200, response.content
        out[f"memory:{query}"] = [(i["id"], i["text"]) for i in response.json()["items"]]
    return out
