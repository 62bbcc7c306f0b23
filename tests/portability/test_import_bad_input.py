"""Import of bad archives and by callers without the right: each answers its documented error and
writes nothing (no project, no node, no stored upload)."""

from __future__ import annotations

import gzip
import io
import tarfile

import orjson
import pytest

from core import graph
from core.models import Job, Project
from portability import archive
from tests.conftest import Tenant
from tests.portability.helpers import (
    hand_archive,
    manifest_for,
    members,
    memory_rows,
    project_node_count,
    stored_imports,
    tar_bytes,
    upload,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_graph")]


def _refused(tenant: Tenant, body: bytes, status: int, code: str, **fields: str) -> dict:
    projects, jobs, uploads = Project.objects.count(), Job.objects.count(), stored_imports()
    memories = graph.read("MATCH (m:Memory) RETURN count(m) AS n")[0]["n"]
    response = upload(tenant.client(tenant.admin_key), body, **fields)
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert Project.objects.count() == projects and Job.objects.count() == jobs
    assert stored_imports() == uploads
    assert graph.read("MATCH (m:Memory) RETURN count(m) AS n")[0]["n"] == memories
    return response.json()["error"]


def test_a_truncated_archive_is_refused_whole(tenant_a: Tenant) -> None:
    body = hand_archive(memory_rows(300))
    _refused(tenant_a, body[: len(body) // 2], 400, "invalid_archive")
    _refused(tenant_a, b"not an archive at all", 400, "invalid_archive")


def test_a_changed_line_fails_its_checksum(tenant_a: Tenant) -> None:
    rows = memory_rows(5)
    data = members(rows, [])
    manifest = manifest_for(data, rows)
    data["nodes.ndjson"] = data["nodes.ndjson"].replace(b"message 3", b"message 8")
    error = _refused(tenant_a, tar_bytes(manifest, data), 400, "checksum_mismatch")
    assert error["details"]["file"] == "nodes.ndjson"
    # a manifest whose file entries were edited without its checksum
    manifest = manifest_for(members(rows, []), rows)
    manifest["files"]["nodes.ndjson"]["lines"] = 4
    _refused(tenant_a, tar_bytes(manifest, members(rows, [])), 400, "checksum_mismatch")


def test_an_archive_of_a_newer_schema_is_refused(tenant_a: Tenant) -> None:
    error = _refused(
        tenant_a, hand_archive(memory_rows(2), schema_version=99), 400, "unsupported_schema_version"
    )
    assert error["details"] == {"schema_version": 99, "supported": archive.SCHEMA_VERSION}


def test_malformed_contents_are_refused(tenant_a: Tenant) -> None:
    _refused(tenant_a, hand_archive([{"label": "Nonsense", "props": {"id": "x"}}]), 400, "invalid_archive")
    _refused(
        tenant_a, hand_archive([{"label": "Memory", "props": {"text": "no id"}}]), 400, "invalid_archive"
    )
    rel = {
        "type": "NEXT",
        "start_label": "Memory",
        "start": "a",
        "end_label": "Elsewhere",
        "end": "b",
        "props": {},
    }
    _refused(tenant_a, hand_archive(memory_rows(1), [rel]), 400, "invalid_archive")
    rel = {**rel, "end_label": "Memory", "type": "NEXT]->(x) DETACH DELETE x //"}
    _refused(tenant_a, hand_archive(memory_rows(1), [rel]), 400, "invalid_archive")
    # a plain tar whose first member is not the manifest
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("nodes.ndjson")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    _refused(tenant_a, gzip.compress(raw.getvalue()), 400, "invalid_archive")
    _refused(tenant_a, hand_archive(memory_rows(1), format="something-else"), 400, "invalid_archive")


def test_another_embedder_is_a_conflict(tenant_a: Tenant) -> None:
    body = hand_archive(
        memory_rows(2), embedder={"name": "openai:text-embedding-3-large", "dimensions": 3072}
    )
    error = _refused(tenant_a, body, 409, "embedder_mismatch")
    assert error["details"]["archive"]["dimensions"] == 3072


def test_ids_taken_by_another_project_are_a_conflict(tenant_a: Tenant, tenant_b: Tenant) -> None:
    rows = memory_rows(3)
    taken = rows[1]["props"]["id"]
    graph.write(
        "CREATE (:Memory {id: $id, project_id: $p, text: 'b owns this'})", id=taken, p=tenant_b.project.id
    )
    error = _refused(tenant_a, hand_archive(rows), 409, "id_conflict")
    assert error["details"] == {"count": 1, "ids": [taken]}
    assert graph.read("MATCH (m:Memory {id: $id}) RETURN m.project_id AS p", id=taken) == [
        {"p": tenant_b.project.id}
    ]


def test_only_an_admin_imports_into_its_own_empty_project(tenant_a: Tenant, tenant_b: Tenant) -> None:
    body = hand_archive(memory_rows(2))
    for key in (tenant_a.read_key, tenant_a.write_key):
        assert upload(tenant_a.client(key), body).status_code == 403
    assert upload(tenant_a.client(), body).status_code == 401
    # another project's id is not found, whatever it holds
    response = upload(tenant_a.client(tenant_a.admin_key), body, project_id=tenant_b.project.id)
    assert response.status_code == 404
    # a project with data is not a target
    graph.write("CREATE (:Memory {id: 'already-here', project_id: $p, text: 'x'})", p=tenant_a.project.id)
    _refused(tenant_a, body, 409, "conflict", project_id=tenant_a.project.id)
    assert project_node_count(tenant_b.project.id) == 0


def test_unknown_fields_and_a_missing_archive_are_bad_input(tenant_a: Tenant) -> None:
    client = tenant_a.client(tenant_a.admin_key)
    response = client.post("/api/v1/projects:import", {"name": "x"}, format="multipart")
    assert response.status_code == 400 and "archive" in response.json()["error"]["details"]["fields"]
    response = upload(client, hand_archive(memory_rows(1)), colour="blue")
    assert response.status_code == 400 and "colour" in response.json()["error"]["details"]["fields"]
    response = client.post("/api/v1/projects:import", orjson.dumps({}), content_type="application/json")
    assert response.status_code == 415


def test_an_archive_may_be_larger_than_other_requests_up_to_its_own_limit(tenant_a: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    body = hand_archive(memory_rows(400))
    settings.API_MAX_BODY_BYTES = len(body) // 2
    settings.PORTABILITY_IMPORT_MAX_BYTES = len(body) * 2
    client = tenant_a.client(tenant_a.admin_key)
    # another endpoint refuses a body of that size; the import reads it (and refuses it for its content)
    response = client.post(
        f"/api/v1/projects/{tenant_a.project.id}/documents",
        {"title": "t", "text": "x" * len(body)},
        format="json",
    )
    assert response.status_code == 413
    rows = memory_rows(400)
    rows[0]["props"]["id"] = ""
    _refused(tenant_a, hand_archive(rows), 400, "invalid_archive")
    settings.PORTABILITY_IMPORT_MAX_BYTES = len(body) // 4
    error = _refused(tenant_a, body, 413, "payload_too_large")
    assert error["details"]["limit_bytes"] == len(body) // 4
