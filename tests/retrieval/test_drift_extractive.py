"""Extractive DRIFT: its searches walk the passage graph as graph mode does, and its answers are
clean sentences quoted from the evidence, ordered by support."""

from __future__ import annotations

import pytest

from knowledge.dto import DocumentInput
from retrieval.drift.dto import ChunkInfo, Followup, FollowupResult
from retrieval.drift.strategies import ExtractiveStrategy, Primer
from tests.conftest import Tenant
from tests.retrieval.drift_helpers import ingest_with_communities, retrieve
from tests.retrieval.test_graph_mode import DIRECTOR, DISTRACTORS, FILM, QUESTION

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]


def _said(body: dict) -> str:  # type: ignore[type-arg]
    return " ".join([body["final_answer"], *(f["fact"] for f in body["key_facts"])])


def test_extractive_drift_reaches_the_second_hop_through_a_title_link(tenant_a: Tenant) -> None:
    # the director's page shares no word with the question but its name: only the film's page,
    # which names her, leads there
    ingest_with_communities(tenant_a.project.id, [FILM, DIRECTOR, *DISTRACTORS])
    response = retrieve(tenant_a.client(tenant_a.read_key), query=QUESTION, project_id=tenant_a.project.id)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["mode"] == "extractive"
    assert "Quillon" in _said(body)
    cited = {c["document_name"] for f in body["key_facts"] for c in f["citations"]}
    assert "Marta Vell" in cited


MARKDOWN = DocumentInput(
    title="Glass notes",
    text=(
        "## Glassblowing in **Murano**\n\n"
        "- Murano glassmakers were moved to the island in 1291 to protect *Venice* from fires.\n"
        "- See [the museum](https://example.org/museo) for the furnaces of `Murano` and their series of vases.\n\n"
        "---\n\n"
        "Glassblowing spread from Syria across the Roman world in the first century."
    ),
    source_path="notes/glass.md",
)


def test_extractive_answers_are_plain_sentences_without_markdown(tenant_a: Tenant) -> None:
    ingest_with_communities(tenant_a.project.id, [MARKDOWN])
    body = retrieve(
        tenant_a.client(tenant_a.read_key),
        query="Why were the Murano glassmakers moved to the island?",
        project_id=tenant_a.project.id,
    ).json()
    said = _said(body)
    assert "Murano glassmakers were moved to the island in 1291 to protect Venice from fires." in said
    for syntax in ("**", "##", "](", "`", "- Murano", "*Venice*", "---"):
        assert syntax not in said, syntax


def _chunk(chunk_id: str, text: str, score: float = 1.0) -> ChunkInfo:
    return ChunkInfo(chunk_id, f"doc-{chunk_id}", f"Doc {chunk_id}", text, score)


def _result(n: int, spans: list[tuple[str, str]], confidence: float) -> FollowupResult:
    return FollowupResult(
        followup=Followup(question=f"q{n}", targets=[], depth=1, search_text=f"q{n}"),
        answer=" ".join(s for _c, s in spans),
        citations=[{"chunk_id": c, "span": s, "document_name": f"Doc {c}"} for c, s in spans],
        confidence=confidence,
        should_continue=False,
        new_followups=[],
    )


def test_key_facts_are_ordered_by_support_and_the_missing_words_are_the_questions_own() -> None:
    query = "Which glass series did the Murano furnaces produce?"
    shared = "The Murano furnaces produced a glass series for the doges."
    alone = "The Murano furnaces produced a glass series for export to the Levant."
    primer = Primer(
        initial_answer="",
        followups=[],
        evidence=[_chunk("c9", "Glassmakers in Murano worked long hours. " + shared, 0.5)],
    )
    results = [_result(1, [("c1", alone)], 0.5), _result(2, [("c2", shared)], 0.5)]
    aggregate = ExtractiveStrategy().aggregate(query, primer, results, known={})
    facts = [fact for fact, _ids in aggregate.facts]
    # equal in the question's terms; the question's own search and a follow-up both found `shared`
    assert facts[:2] == [shared, alone]
    assert dict(aggregate.facts)[shared] == ["c9", "c2"]
    assert aggregate.final_answer == f"{shared} {alone}"
    # the question's words as written ("series" is covered; a stem such as "serie" is never shown)
    held = ExtractiveStrategy().aggregate("Which series of vases did Murano sell?", primer, [], known={})
    assert "Not found in the evidence: vases, did, sell." in held.residual_uncertainty
