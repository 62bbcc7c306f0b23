"""Bad documents: a clear 400/413 and nothing written to the graph or the job table."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfWriter

from core.models import Job
from tests.conftest import Tenant, make_tenant
from tests.knowledge.helpers import graph_counts, post_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenant() -> Tenant:
    return make_tenant("bad input")


def _nothing_written(tenant: Tenant) -> None:
    assert Job.objects.filter(project_id=tenant.project.id).count() == 0
    assert graph_counts(tenant.project.id) == {
        "Document": 0,
        "Chunk": 0,
        "Entity": 0,
        "Community": 0,
        "Source": 0,
        "RELATED": 0,
    }


def _error(response) -> dict:  # type: ignore[no-untyped-def]
    return response.json()["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "t", "text": ""}, "text"),
        ({"title": "t", "text": "   \n  "}, "text"),
        ({"title": "t"}, "text"),
        ({"text": "hello"}, "title"),
        ({"title": "x" * 10_000, "text": "hello"}, "title"),
        ({"title": "t", "text": "bad \x00 byte"}, "text"),
        ({"title": "t\x00", "text": "ok"}, "title"),
        ({"title": "t", "text": "ok", "source_path": "../../etc/passwd"}, "source_path"),
        ({"title": "t", "text": "ok", "metadata": {"nested": {"a": 1}}}, "metadata"),
        ({"title": "t", "text": "ok", "mime_type": "application/zip"}, "mime_type"),
        ({"title": "t", "text": "ok", "sourcepath": "a.md"}, "sourcepath"),  # misspelt: not ignored
        ({"title": "t", "text": "ok", "entities": [{"name": "A", "type": "T", "kind": "x"}]}, "entities"),
    ],
)
def test_invalid_document_fields_are_400(tenant: Tenant, body: dict, field: str) -> None:
    response = post_document(tenant.client(tenant.write_key), tenant.project.id, **body)
    assert response.status_code == 400, response.json()
    error = _error(response)
    assert error["code"] == "invalid_input"
    assert field in error["details"]["fields"]
    _nothing_written(tenant)


@pytest.mark.parametrize(
    "relations",
    [
        [{"source": "Alpha", "target": "Gamma"}],  # unknown entity
        [{"source": "Alpha", "target": "Beta", "weight": -1}],  # bad weight
        [{"source": "Alpha", "target": "Beta", "weight": 1e9}],
        [{"source": "Alpha", "target": "Beta", "weight": "heavy"}],
        [{"source": "Alpha", "target": "Alpha"}],
    ],
)
def test_invalid_pre_extracted_relations_are_400(tenant: Tenant, relations: list) -> None:
    response = post_document(
        tenant.client(tenant.write_key),
        tenant.project.id,
        title="t",
        text="Alpha and Beta.",
        entities=[{"name": "Alpha", "type": "ORG"}, {"name": "Beta", "type": "ORG"}],
        relations=relations,
    )
    assert response.status_code == 400, response.json()
    assert "relations" in _error(response)["details"]["fields"]
    _nothing_written(tenant)


def test_more_than_500_documents_is_400(tenant: Tenant) -> None:
    docs = [{"title": f"d{i}", "text": f"text {i}"} for i in range(501)]
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents", {"documents": docs}, format="json"
    )
    assert response.status_code == 400
    assert "500" in _error(response)["message"]
    _nothing_written(tenant)


def test_one_bad_document_in_a_bulk_rejects_the_whole_request(tenant: Tenant) -> None:
    docs = [{"title": "ok", "text": "fine"}, {"title": "bad", "text": ""}]
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents", {"documents": docs}, format="json"
    )
    assert response.status_code == 400
    _nothing_written(tenant)


def test_invalid_utf8_json_body_is_400(tenant: Tenant) -> None:
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        data=b'{"title": "t", "text": "caf\xe9"}',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert _error(response)["code"] == "malformed_request"
    _nothing_written(tenant)


def _upload(tenant: Tenant, name: str, content: bytes, content_type: str, **fields: str):  # type: ignore[no-untyped-def]
    from django.core.files.uploadedfile import SimpleUploadedFile

    return tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents",
        {"file": SimpleUploadedFile(name, content, content_type=content_type), **fields},
        format="multipart",
    )


def test_truncated_pdf_is_400(tenant: Tenant) -> None:
    pdf = _pdf_bytes("Truncated document text")
    response = _upload(tenant, "broken.pdf", pdf[: len(pdf) // 2], "application/pdf")
    assert response.status_code == 400
    assert _error(response)["code"] == "unparseable_document"
    _nothing_written(tenant)


def test_unsupported_file_type_is_400(tenant: Tenant) -> None:
    response = _upload(tenant, "archive.zip", b"PK\x03\x04....", "application/zip")
    assert response.status_code == 400
    assert _error(response)["code"] == "unparseable_document"
    _nothing_written(tenant)


def test_invalid_utf8_text_file_is_400(tenant: Tenant) -> None:
    response = _upload(tenant, "latin1.txt", "café crème".encode("latin-1"), "text/plain")
    assert response.status_code == 400
    assert "UTF-8" in _error(response)["message"]
    _nothing_written(tenant)


def test_file_over_the_size_limit_is_413(tenant: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    settings.API_MAX_BODY_BYTES = 50_000
    response = _upload(tenant, "big.txt", b"word " * 20_000, "text/plain")
    assert response.status_code == 413
    _nothing_written(tenant)


def test_references_to_unknown_documents_are_400(tenant: Tenant) -> None:
    response = post_document(
        tenant.client(tenant.write_key), tenant.project.id, title="t", text="x", references=["no/such/doc.md"]
    )
    assert response.status_code == 400
    assert _error(response)["details"]["unknown_references"] == ["no/such/doc.md"]
    _nothing_written(tenant)


def _pdf_bytes(text: str) -> bytes:
    """A real one-page PDF with `text` (pypdf writes it; the content stream is built by hand)."""
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(width=300, height=200)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    stream = DecodedStreamObject()
    stream.set_data(f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode())
    page[NameObject("/Contents")] = writer._add_object(stream)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "params",
    [{"offset": "1e20"}, {"offset": str(10**20)}, {"offset": str(2**63)}, {"limit": str(10**20)}],
)
def test_list_offsets_beyond_the_database_are_400(tenant: Tenant, params: dict) -> None:
    response = tenant.client(tenant.read_key).get(f"/api/v1/projects/{tenant.project.id}/documents", params)
    assert response.status_code == 400, response.content
    error = _error(response)
    assert error["code"] == "invalid_input"
    assert set(error["details"]["fields"]) == set(params)
