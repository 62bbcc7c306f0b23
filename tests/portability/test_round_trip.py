"""Export a project with documents, memories and sessions through the API, import the archive into a
new project after the source's graph is gone (as on a fresh platform), and get the same nodes,
relationships, searches and memories back. Also: the GraphML export, the download's tenancy, and
export refused while ingestion is queued."""

from __future__ import annotations

import io
import time
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from core import graph
from core.models import Job
from core.selectors import project_get
from core.services import api_key_create
from portability import importer
from portability.owners import LABELS
from tests.conftest import Tenant, make_tenant
from tests.knowledge.helpers import wait_job
from tests.memory.helpers import assistant, msearch, store, user
from tests.portability.helpers import member_names, stored_imports, upload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_graph")]

TEXTS = [
    "Marie Curie discovered polonium and radium in Paris with Pierre Curie.",
    "Alan Turing broke the Enigma cipher at Bletchley Park during the war.",
    "The Analytical Engine was designed by Charles Babbage; Ada Lovelace wrote its first program.",
    "Radium glows faintly in the dark, which made it popular in early twentieth century products.",
]
QUERIES = ["who discovered radium", "Enigma codebreaking", "first computer program"]


def _fill(tenant: Tenant) -> None:
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
    _settle(pid)


def _settle(project_id: str) -> None:
    """Wait until the work the writes queued (memory processing, the community rebuild ingestion
    schedules a second later) is done: no job queued or running and the graph unchanged for 3 s."""
    deadline, last, quiet_since = time.monotonic() + 120, None, time.monotonic()
    while time.monotonic() < deadline:
        active = Job.objects.filter(project_id=project_id, status__in=("queued", "running")).exists()
        now = (active, _counts(project_id))
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif not active and time.monotonic() - quiet_since >= 3:
            return
        time.sleep(0.3)
    raise AssertionError(f"project {project_id} still changing after 120 s")


def _tenant_of(project_id: str) -> Tenant:
    keys = [
        api_key_create(project_id=project_id, name=s[-1], scopes=s)
        for s in (["read"], ["read", "write"], ["admin"])
    ]
    return Tenant(project_get(project_id=project_id), *keys)


def _counts(project_id: str) -> dict[str, int]:
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


def _answers(tenant: Tenant) -> dict[str, Any]:
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


def _ingest_job(project_id: str) -> str:
    return str(Job.objects.get(project_id=project_id, kind="ingest").id)


def _export(tenant: Tenant, fmt: str = "ndjson") -> bytes:
    client = tenant.client(tenant.admin_key)
    response = client.post(f"/api/v1/projects/{tenant.project.id}:export", {"format": fmt}, format="json")
    assert response.status_code == 202, response.content
    job = wait_job(response.json()["job_id"])
    assert job.status == "succeeded", job.errors
    download = client.get(f"/api/v1/projects/{tenant.project.id}/exports/{job.id}")
    assert download.status_code == 200
    body = b"".join(download.streaming_content)
    assert len(body) == job.counts["bytes"]
    return body


@pytest.mark.usefixtures("celery_worker_process")
def test_a_project_exported_and_imported_answers_the_same() -> None:
    source = make_tenant("source")
    _fill(source)
    before, answers = _counts(source.project.id), _answers(source)
    assert (
        before["Chunk"] >= 4
        and before["Memory"] == 3
        and before["Event"] == 1
        and before["-[HAS_CHUNK]-"] >= 4
    )
    assert all(answers.values())
    body = _export(source)
    assert member_names(body) == ["manifest.json", "nodes.ndjson", "relationships.ndjson"]

    # beside its source, every id is taken: refused whole
    response = upload(source.client(source.admin_key), body)
    assert response.status_code == 409 and response.json()["error"]["code"] == "id_conflict"
    assert response.json()["error"]["details"]["count"] == sum(v for k, v in before.items() if "-" not in k)

    # on a platform without the source (its graph erased here), the archive makes a new project
    importer.erase(source.project.id)
    uploads = stored_imports()
    response = upload(source.client(source.admin_key), body, name="restored")
    assert response.status_code == 202, response.content
    job = wait_job(response.json()["job_id"])
    assert job.status == "succeeded", job.errors
    target = _tenant_of(response.json()["project_id"])
    assert target.project.name == "restored"
    assert _counts(target.project.id) == before
    assert job.counts["nodes"] == sum(v for k, v in before.items() if "-" not in k)
    assert _answers(target) == answers
    assert stored_imports() == uploads  # the upload is dropped once imported


@pytest.mark.usefixtures("celery_worker_process")
def test_graphml_export_holds_every_node_and_relationship() -> None:
    tenant = make_tenant("graphml")
    _fill(tenant)
    counts = _counts(tenant.project.id)
    body = _export(tenant, "graphml")
    ns = "{http://graphml.graphdrawing.org/xmlns}"
    root = ET.parse(io.BytesIO(body)).getroot()  # noqa: S314 - the platform's own export
    nodes = root.findall(f"{ns}graph/{ns}node")
    edges = root.findall(f"{ns}graph/{ns}edge")
    assert len(nodes) == sum(v for k, v in counts.items() if "-" not in k)
    assert len(edges) == sum(v for k, v in counts.items() if "-" in k)
    keys = {
        k.get("attr.name"): k.get("attr.type") for k in root.findall(f"{ns}key") if k.get("for") == "node"
    }
    assert keys["text"] == "string" and keys["index"] == "long"
    chunk = next(n for n in nodes if n.get("labels") == ":Chunk")
    assert any(d.get("key") == "n_embedding" and d.text.startswith("[") for d in chunk)


def test_an_export_is_the_project_admins_alone(tenant_a: Tenant, tenant_b: Tenant) -> None:
    pid = tenant_a.project.id
    assert tenant_a.client(tenant_a.write_key).post(f"/api/v1/projects/{pid}:export").status_code == 403
    assert tenant_b.client(tenant_b.admin_key).post(f"/api/v1/projects/{pid}:export").status_code == 404
    response = tenant_a.client(tenant_a.admin_key).post(
        f"/api/v1/projects/{pid}:export", {"format": "csv"}, format="json"
    )
    assert response.status_code == 400 and "format" in response.json()["error"]["details"]["fields"]
    job = Job.objects.create(
        project_id=pid, kind="export", status="succeeded", counts={"archive": "exports/x"}
    )
    assert (
        tenant_b.client(tenant_b.admin_key)
        .get(f"/api/v1/projects/{tenant_b.project.id}/exports/{job.id}")
        .status_code
        == 404
    )
    assert (
        tenant_a.client(tenant_a.read_key).get(f"/api/v1/projects/{pid}/exports/{job.id}").status_code == 403
    )
    # the job is there but its archive is not
    assert (
        tenant_a.client(tenant_a.admin_key).get(f"/api/v1/projects/{pid}/exports/{job.id}").status_code == 404
    )
    running = Job.objects.create(project_id=pid, kind="export", status="running")
    response = tenant_a.client(tenant_a.admin_key).get(f"/api/v1/projects/{pid}/exports/{running.id}")
    assert response.status_code == 409


def test_export_while_ingestion_is_queued_is_a_conflict(
    tenant_a: Tenant, unconsumed_ingest_queue: str
) -> None:
    client = tenant_a.client(tenant_a.admin_key)
    pid = tenant_a.project.id
    response = client.post(
        f"/api/v1/projects/{pid}/documents", {"title": "t", "text": "some text"}, format="json"
    )
    assert response.status_code == 202
    jobs = Job.objects.count()
    response = client.post(f"/api/v1/projects/{pid}:export")
    assert response.status_code == 409
    assert response.json()["error"]["details"]["job_ids"] == [_ingest_job(pid)]
    assert Job.objects.count() == jobs
