"""Multipart uploads of each supported format, ingested for real."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core import graph
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
