"""Ingestion links a chunk to every other document of its project whose title it names:
`(:Chunk)-[:NAMES]->(:Document)`, in both directions of time, never across projects."""

from __future__ import annotations

import pytest

from core import graph
from knowledge.dto import DocumentInput
from tests.conftest import make_tenant
from tests.retrieval.helpers import ingest_now

pytestmark = pytest.mark.django_db


def _doc(title: str, text: str) -> DocumentInput:
    return DocumentInput(title=title, text=text, source_path=f"wiki/{title}.txt")


def _links(project_id: str) -> set[tuple[str, str]]:
    rows = graph.read(
        "MATCH (src:Document)-[:HAS_CHUNK]->(:Chunk {project_id: $p})-[:NAMES]->(d:Document) "
        "RETURN src.title AS source, d.title AS named",
        p=project_id,
    )
    return {(r["source"], r["named"]) for r in rows}


TEUTBERGA = _doc(
    "Teutberga",
    "Teutberga was a queen of Lotharingia by marriage to Lothair II. She was a daughter of Boso the Elder. "
    "It is said that she outlived him.",
)
LOTHAIR = _doc("Lothair II", "Lothair II was king of Lotharingia. He sought to divorce Teutberga.")


def test_chunks_name_the_titles_of_documents_ingested_before_with_and_after_them() -> None:
    tenant = make_tenant("title links")
    pid = tenant.project.id
    ingest_now(pid, [TEUTBERGA, LOTHAIR])  # one batch: both directions
    assert _links(pid) == {("Teutberga", "Lothair II"), ("Lothair II", "Teutberga")}

    # named by a chunk stored before
    ingest_now(pid, [_doc("Boso the Elder", "Boso the Elder was a Frankish count.")])
    ingest_now(pid, [_doc("It", "It is a novel by Stephen King.")])  # "It is said" names no novel
    assert _links(pid) == {
        ("Teutberga", "Lothair II"),
        ("Lothair II", "Teutberga"),
        ("Teutberga", "Boso the Elder"),
    }

    # the document renamed: the links to its old title go, none to its own chunks appear
    ingest_now(pid, [_doc("Boso the Elder", "Boso of Provence, a Frankish count.")])
    assert ("Teutberga", "Boso the Elder") in _links(pid)  # same title, same link
    renamed = DocumentInput(title="Boso I", text="Boso of Provence.", source_path="wiki/Boso the Elder.txt")
    ingest_now(pid, [renamed])
    assert _links(pid) == {("Teutberga", "Lothair II"), ("Lothair II", "Teutberga")}


def test_a_title_in_another_project_links_nothing() -> None:
    mine, theirs = make_tenant("titles mine"), make_tenant("titles theirs")
    ingest_now(theirs.project.id, [LOTHAIR])
    ingest_now(mine.project.id, [TEUTBERGA])
    assert _links(mine.project.id) == set()
    assert _links(theirs.project.id) == set()
    crossing = graph.read(
        "MATCH (c:Chunk)-[:NAMES]->(d:Document) WHERE c.project_id <> d.project_id RETURN count(*) AS n"
    )
    assert crossing == [{"n": 0}]


def test_a_title_inside_a_longer_title_links_nothing_whichever_came_first() -> None:
    tenant = make_tenant("nested titles")
    pid = tenant.project.id
    review = _doc("Film review", "Critics praised A Romance of Seville when it opened in 1929.")
    ingest_now(pid, [review, _doc("A Romance of Seville", "A Romance of Seville is a 1929 British film.")])
    # "Seville" comes later: the stored chunk names the longer title, not this one
    ingest_now(pid, [_doc("Seville", "Seville is the capital of Andalusia.")])
    assert _links(pid) == {("Film review", "A Romance of Seville")}
