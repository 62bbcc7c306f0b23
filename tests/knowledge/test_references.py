"""Document references (seed 003's Reference Querying System) on the real stack: references given
at ingestion and added later, the citation graph, and documents found by a source-path glob."""

from __future__ import annotations

import pytest

from knowledge.dto import DocumentInput
from tests.conftest import make_tenant
from tests.retrieval.helpers import ingest_now

pytestmark = pytest.mark.django_db


def _chain(project_id: str) -> list[str]:
    """a → b → c → d (each cites the next; ingested from the end so each target exists first)."""
    d = ingest_now(project_id, [DocumentInput(title="D", text="Delta text.", source_path="papers/d.md")])[0]
    c = ingest_now(
        project_id, [DocumentInput(title="C", text="Gamma text.", source_path="papers/c.md", references=[d])]
    )[0]
    b = ingest_now(
        project_id,
        [
            DocumentInput(
                title="B", text="Beta text.", source_path="papers/2024/b.md", references=["papers/c.md"]
            )
        ],
    )[0]
    a = ingest_now(
        project_id, [DocumentInput(title="A", text="Alpha text.", source_path="notes/a.txt", references=[b])]
    )[0]
    return [a, b, c, d]


def test_references_in_and_out_and_a_typed_reference_added_later() -> None:
    tenant = make_tenant("docref")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    a, b, c, d = _chain(pid)
    base = f"/api/v1/projects/{pid}/documents"
    out = client.get(f"{base}/{b}/references?direction=out").json()["items"]
    assert [(r["id"], r["direction"], r["type"]) for r in out] == [(c, "out", "references")]
    assert out[0]["title"] == "C" and out[0]["source_path"] == "papers/c.md"
    both = client.get(f"{base}/{b}/references").json()["items"]
    assert {(r["id"], r["direction"]) for r in both} == {(c, "out"), (a, "in")}

    added = client.post(
        f"{base}/{d}/references", {"to_document_id": a, "type": "rebuts", "context": "§2"}, format="json"
    )
    assert added.status_code == 201, added.json()
    assert added.json()["created"] is True and added.json()["type"] == "rebuts"
    again = client.post(f"{base}/{d}/references", {"to_document_id": a, "type": "supports"}, format="json")
    assert again.status_code == 200 and again.json()["created"] is False
    into_a = client.get(f"{base}/{a}/references?direction=in").json()["items"]
    assert [(r["id"], r["type"], r["context"]) for r in into_a] == [(d, "supports", None)]


def test_reference_writes_reject_bad_input_and_other_projects() -> None:
    tenant, other = make_tenant("docref-bad"), make_tenant("docref-bad-other")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    a, b, _c, _d = _chain(pid)
    (foreign,) = ingest_now(other.project.id, [DocumentInput(title="X", text="Other tenant.")])
    base = f"/api/v1/projects/{pid}/documents"
    for body in (
        {"to_document_id": foreign},
        {"to_document_id": "missing"},
        {"to_document_id": a},  # itself
        {"to_document_id": b, "type": "DROP ALL"},
        {"to_document_id": b, "context": "x" * 2001},
        {"to_document_id": b, "weight": 3},
    ):
        response = client.post(f"{base}/{a}/references", body, format="json")
        assert response.status_code == 400, (body, response.json())
    assert (
        client.post(f"{base}/{foreign}/references", {"to_document_id": a}, format="json").status_code == 404
    )
    reader = tenant.client(tenant.read_key)
    assert reader.post(f"{base}/{a}/references", {"to_document_id": b}, format="json").status_code == 403
    outsider = other.client(other.write_key)
    assert outsider.get(f"{base}/{a}/references").status_code == 404
    assert outsider.get(f"/api/v1/projects/{other.project.id}/documents/{a}/references").status_code == 404
    # nothing was written: a still cites only b
    out = client.get(f"{base}/{a}/references?direction=out").json()["items"]
    assert [(r["id"], r["type"]) for r in out] == [(b, "references")]


def test_citation_graph_by_depth_with_edges() -> None:
    tenant = make_tenant("docref-graph")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    a, b, c, d = _chain(pid)
    url = f"/api/v1/projects/{pid}/documents/{b}/citation-graph"
    one = client.get(f"{url}?depth=1").json()
    assert one["document"]["id"] == b
    assert {(n["id"], n["direction"], n["depth"]) for n in one["nodes"]} == {
        (c, "cites", 1),
        (a, "cited_by", 1),
    }
    assert {(e["source"], e["target"]) for e in one["edges"]} == {(a, b), (b, c)}
    three = client.get(f"{url}?depth=3").json()
    assert {(n["id"], n["direction"], n["depth"]) for n in three["nodes"]} == {
        (c, "cites", 1),
        (d, "cites", 2),
        (a, "cited_by", 1),
    }
    assert three["truncated"] is False
    for bad in ("0", "4", "50", "x"):
        assert client.get(f"{url}?depth={bad}").status_code == 400
    assert client.get(f"/api/v1/projects/{pid}/documents/nope/citation-graph").status_code == 404


def test_documents_by_source_path_glob() -> None:
    tenant = make_tenant("docref-glob")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    a, b, c, d = _chain(pid)
    base = f"/api/v1/projects/{pid}/documents"

    def ids(glob: str) -> set[str]:
        response = client.get(base, {"source_path": glob})
        assert response.status_code == 200, response.json()
        return {item["id"] for item in response.json()["items"]}

    assert ids("papers/*.md") == {c, d}
    assert ids("papers/**") == {b, c, d}
    assert ids("papers/**.md") == {b, c, d}
    assert ids("notes/?.txt") == {a}
    assert ids("*.md") == set()
    assert ids("papers/(c|d).md") == set()  # no regex: parentheses and bars are literal
    assert ids("papers/c.md") == {c}
    for bad in ("**/../*", "../papers/*", "a" * 501):
        assert client.get(base, {"source_path": bad}).status_code == 400, bad
