"""Export a project with documents, memories and sessions through the API, import the archive into a
new project after the source's graph is gone (as on a fresh platform), and get the same nodes,
relationships, searches and memories back. Also: the GraphML export, the download's tenancy, and
export refused while ingestion is queued."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest

from core.models import Job
from portability import importer
from tests.conftest import Tenant, make_tenant
from tests.knowledge.helpers import wait_job
from tests.portability.content import answers_of, embeddings_of, fill, graph_counts, tenant_of
from tests.portability.helpers import member_names, member_rows, stored_imports, upload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_graph")]


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
    fill(source)
    before, answers = graph_counts(source.project.id), answers_of(source)
    embeddings = embeddings_of(source.project.id)
    assert (
        before["Chunk"] >= 4
        and before["Memory"] == 3
        and before["Event"] == 1
        and before["-[HAS_CHUNK]-"] >= 4
    )
    assert all(answers.values())
    body = _export(source)
    assert member_names(body) == ["manifest.json", "nodes.ndjson", "relationships.ndjson"]
    chunk_line = next(row for row in member_rows(body, "nodes.ndjson") if row["label"] == "Chunk")
    assert chunk_line["props"]["embedding"]["$t"] == "f32"  # packed: the embedder's float32 values

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
    target = tenant_of(response.json()["project_id"])
    assert target.project.name == "restored"
    assert graph_counts(target.project.id) == before
    assert job.counts["nodes"] == sum(v for k, v in before.items() if "-" not in k)
    assert answers_of(target) == answers
    assert embeddings_of(target.project.id) == embeddings and len(embeddings) >= before["Chunk"]
    assert stored_imports() == uploads  # the upload is dropped once imported


@pytest.mark.usefixtures("celery_worker_process")
def test_graphml_export_holds_every_node_and_relationship() -> None:
    tenant = make_tenant("graphml")
    fill(tenant)
    counts = graph_counts(tenant.project.id)
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
