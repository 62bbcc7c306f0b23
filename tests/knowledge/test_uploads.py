"""Multipart uploads of each supported format, ingested for real."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core import graph
from core.models import Job
from tests.conftest import Tenant, make_tenant
from tests.knowledge.helpers import wait_job
from tests.knowledge.test_bad_input import _pdf_bytes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker_process")]


@pytest.mark.parametrize(
    ("name", "content", "content_type", "expected"),
    [
        (
            "notes.txt",
            b"Plain text about the Hubble Space Telescope.",
            "text/plain",
            "Hubble Space Telescope",
        ),
        ("notes.md", b"# Title\n\nMarkdown about **Marie Curie**.", "text/markdown", "Marie Curie"),
        (
            "page.html",
            b"<html><body><h1>Head</h1><p>HTML about <b>Alan Turing</b>.</p>"
            b"<script>var hidden = 1;</script></body></html>",
            "text/html",
            "Alan Turing",
        ),
        ("paper.pdf", None, "application/pdf", "Kurt Goedel"),
    ],
)
def test_upload_each_format(name: str, content: bytes | None, content_type: str, expected: str) -> None:
    tenant: Tenant = make_tenant("uploads")
    content = content if content is not None else _pdf_bytes("A PDF about Kurt Goedel and logic.")
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        {"file": SimpleUploadedFile(name, content, content_type=content_type)},
        format="multipart",
    )
    assert response.status_code == 202, response.json()
    job = wait_job(response.json()["job_id"])
    assert job.status == "succeeded", job.errors
    rows = graph.read(
        "MATCH (d:Document {id: $id})-[:HAS_CHUNK]->(c:Chunk) RETURN d.mime_type AS m, "
        "d.title AS t, c.text AS text",
        id=response.json()["document_id"],
    )
    assert rows[0]["m"] == content_type
    assert rows[0]["t"] == name
    assert expected in rows[0]["text"]
    assert "hidden" not in rows[0]["text"]


def _files() -> list[SimpleUploadedFile]:
    return [
        SimpleUploadedFile(
            "hubble.txt", b"The Hubble Space Telescope orbits Earth.", content_type="text/plain"
        ),
        SimpleUploadedFile(
            "curie.md", b"# Curie\n\nMarie Curie studied radium.", content_type="text/markdown"
        ),
        SimpleUploadedFile("turing.html", b"<p>Alan Turing broke Enigma.</p>", content_type="text/html"),
    ]


def test_several_files_in_one_upload_each_become_a_document_of_one_job() -> None:
    tenant: Tenant = make_tenant("multi upload")
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents", {"file": _files()}, format="multipart"
    )
    assert response.status_code == 202, response.json()
    body = response.json()
    assert [d["status"] for d in body["documents"]] == ["queued"] * 3
    job = wait_job(body["job_id"])
    assert job.status == "succeeded", job.errors
    assert job.counts["documents"] == 3
    rows = graph.read(
        "MATCH (d:Document {project_id: $p})-[:HAS_CHUNK]->(c:Chunk) "
        "RETURN d.id AS id, d.title AS title, d.source_path AS path, d.status AS status, c.text AS text "
        "ORDER BY title",
        p=tenant.project.id,
    )
    assert {r["id"] for r in rows} == {d["document_id"] for d in body["documents"]}
    assert [(r["title"], r["path"], r["status"]) for r in rows] == [
        ("curie.md", "curie.md", "ready"),
        ("hubble.txt", "hubble.txt", "ready"),
        ("turing.html", "turing.html", "ready"),
    ]
    assert [
        "Marie Curie" in rows[0]["text"],
        "Hubble" in rows[1]["text"],
        "Alan Turing" in rows[2]["text"],
    ] == [True] * 3


@pytest.mark.parametrize(
    ("bad", "content_type"),
    [
        (SimpleUploadedFile("latin1.txt", b"caf\xe9 cr\xe8me", content_type="text/plain"), "non-UTF-8"),
        (SimpleUploadedFile("archive.zip", b"PK\x03\x04....", content_type="application/zip"), "unsupported"),
    ],
    ids=lambda value: value if isinstance(value, str) else value.name,
)
def test_one_bad_file_among_good_ones_rejects_the_whole_upload(
    bad: SimpleUploadedFile, content_type: str
) -> None:
    """docs/api.md: an unparseable file is a 400 naming it, and a failed request writes nothing."""
    tenant: Tenant = make_tenant("multi upload bad")
    files = _files()
    files.insert(1, bad)
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents", {"file": files}, format="multipart"
    )
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "unparseable_document"
    assert error["details"]["file"] == bad.name
    assert not Job.objects.filter(project_id=tenant.project.id).exists()
    assert (
        graph.read("MATCH (d:Document {project_id: $p}) RETURN count(d) AS n", p=tenant.project.id)[0]["n"]
        == 0
    )
