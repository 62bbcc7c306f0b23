"""Hybrid search's feedback round on the real stack: the best hit's words and embedding find the
document a two-hop question needs next, and the second round stays inside the tenant and filters."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.dto import DocumentInput
from tests.conftest import Tenant, make_tenant
from tests.retrieval.helpers import ingest_now, search

pytestmark = pytest.mark.django_db

QUESTION = "Which television network aired the series that starred Drew Fuller?"

BRIDGE = [
    DocumentInput(
        title="Drew Fuller",
        text=(
            "Drew Fuller is an American actor and former model. He starred as Chris Halliwell in the "
            "fantasy drama Charmed and later in Army Wives."
        ),
        source_path="people/drew-fuller.md",
    ),
    DocumentInput(
        title="Charmed",
        text=(
            "Charmed is a fantasy drama about the Halliwell sisters, three witches in San Francisco. "
            "It premiered on The WB in October 1998 and ran for eight seasons."
        ),
        source_path="shows/charmed.md",
    ),
]
DISTRACTORS = [
    DocumentInput(title=title, text=text, source_path=f"networks/{title.lower()}.md")
    for title, text in [
        ("NBC", "NBC is an American television network headquartered in New York City."),
        ("CBS", "CBS is a commercial broadcast network owned by Paramount."),
        ("ABC", "ABC series aired on Tuesday nights during the 1990s."),
        ("Fox", "Fox was founded by Rupert Murdoch and Barry Diller in 1986 as a fourth network."),
        ("PBS", "PBS is a public broadcaster of educational programmes and documentaries."),
    ]
]


@pytest.fixture
def bridge() -> tuple[Tenant, dict[str, str]]:
    tenant = make_tenant("feedback")
    docs = BRIDGE + DISTRACTORS
    ids = ingest_now(tenant.project.id, docs)
    return tenant, {doc.title: doc_id for doc, doc_id in zip(docs, ids, strict=True)}


def _names(tenant: Tenant, **body: Any) -> list[str]:
    response = search(
        tenant.client(tenant.read_key), tenant.project.id, query=QUESTION, mode="hybrid", **body
    )
    assert response.status_code == 200, response.json()
    items = response.json()["items"]
    scores = [i["score"] for i in items]
    assert scores == sorted(scores, reverse=True)
    return [i["document_name"] for i in items]


def test_feedback_finds_the_second_hop(bridge, settings) -> None:  # type: ignore[no-untyped-def]
    tenant, _ids = bridge
    settings.RETRIEVAL_HYBRID_FEEDBACK = False
    without = _names(tenant, top_k=3)
    assert without[0] == "Drew Fuller"
    assert "Charmed" not in without  # the networks share the question's words, Charmed shares none
    settings.RETRIEVAL_HYBRID_FEEDBACK = True
    response = search(
        tenant.client(tenant.read_key), tenant.project.id, query=QUESTION, mode="hybrid", top_k=3
    )
    assert "feedback" in response.json()["timings_ms"]
    with_feedback = _names(tenant, top_k=3)
    assert with_feedback[:2] == without[:2]  # the first round's best hits keep their places
    assert "Charmed" in with_feedback


def test_top_k_up_to_the_kept_hits_needs_no_second_round(bridge) -> None:  # type: ignore[no-untyped-def]
    tenant, _ids = bridge
    response = search(
        tenant.client(tenant.read_key), tenant.project.id, query=QUESTION, mode="hybrid", top_k=2
    )
    assert "feedback" not in response.json()["timings_ms"]
    assert response.json()["items"][0]["document_name"] == "Drew Fuller"


def test_the_second_round_stays_in_the_filter_and_the_project(bridge) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = bridge
    # another project holds the second hop only: feedback from this project's best hit must not
    # reach it
    other = make_tenant("feedback-other")
    ingest_now(other.project.id, [BRIDGE[1]])
    allowed = [ids["Drew Fuller"], ids["NBC"], ids["CBS"]]
    found = _names(tenant, top_k=10, filters={"document_ids": allowed})
    assert found and set(found) <= {"Drew Fuller", "NBC", "CBS"}
    alone = make_tenant("feedback-alone")
    ingest_now(alone.project.id, [BRIDGE[0], *DISTRACTORS])
    found = _names(alone, top_k=10)
    assert "Charmed" not in found
    assert found[0] == "Drew Fuller"


def test_a_request_turns_the_feedback_round_off_or_on(bridge, settings) -> None:  # type: ignore[no-untyped-def]
    tenant, _ids = bridge
    client = tenant.client(tenant.read_key)
    off = search(client, tenant.project.id, query=QUESTION, mode="hybrid", top_k=3, feedback=False).json()
    assert "feedback" not in off["timings_ms"]
    assert "Charmed" not in [i["document_name"] for i in off["items"]]
    settings.RETRIEVAL_HYBRID_FEEDBACK = False
    on = search(client, tenant.project.id, query=QUESTION, mode="hybrid", top_k=3, feedback=True).json()
    assert "feedback" in on["timings_ms"]
    assert "Charmed" in [i["document_name"] for i in on["items"]]


@pytest.mark.parametrize(
    "body",
    [{"mode": "vector", "feedback": True}, {"mode": "fulltext", "feedback": False}, {"feedback": "maybe"}],
)
def test_feedback_is_validated(bridge, body: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    tenant, _ids = bridge
    response = search(tenant.client(tenant.read_key), tenant.project.id, query=QUESTION, **body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
    assert "feedback" in str(response.json())
