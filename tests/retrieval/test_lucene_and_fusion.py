"""Pure logic: Lucene query building and score fusion."""

from __future__ import annotations

import pytest

from retrieval import fusion, lucene
from retrieval.dto import Candidate

pytestmark = pytest.mark.unit


def test_terms_drop_stop_words_operators_and_syntax() -> None:
    terms = lucene.query_terms('title:(a OR b)~ \\ "The" AND NOT x* ? Who', max_terms=64)
    assert terms == ["title", "b", "x"]


def test_terms_are_distinct_and_capped() -> None:
    assert lucene.query_terms("alpha beta alpha gamma delta", max_terms=3) == ["alpha", "beta", "gamma"]


def test_only_stop_words_gives_no_query() -> None:
    assert lucene.query_terms("the and of", max_terms=64) == []
    assert lucene.chunk_query([], project_id="p") == ""


def test_escape_covers_every_special_character() -> None:
    assert lucene.escape('a+b-c!d(e)f{g}h[i]j^k"l~m*n?o:p\\q/r&s|t') == (
        'a\\+b\\-c\\!d\\(e\\)f\\{g\\}h\\[i\\]j\\^k\\"l\\~m\\*n\\?o\\:p\\\\q\\/r\\&s\\|t'
    )


def test_chunk_query_requires_project_and_documents_without_scoring_them() -> None:
    query = lucene.chunk_query(["ada", "engine"], project_id="p-1", document_ids=["d1", "d2"])
    assert query == 'text:(ada OR engine) AND project_id:"p-1"^0 AND document_id:("d1" OR "d2")^0'


def test_unicode_words_survive() -> None:
    assert lucene.query_terms("Zürich Ångström 東京", max_terms=10) == ["zürich", "ångström", "東京"]


def _c(*pairs: tuple[str, float]) -> list[Candidate]:
    return [Candidate(chunk_id=c, score=s) for c, s in pairs]


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    vector = _c(("a", 0.9), ("b", 0.8), ("c", 0.7))
    text = _c(("c", 12.0), ("b", 3.0), ("d", 1.0))
    fused = fusion.reciprocal_rank([vector, text], k=60)
    # c: ranks 3 and 1; b: ranks 2 and 2; a and d appear once
    assert [c.chunk_id for c in fused] == ["c", "b", "a", "d"]
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert fused[1].score == pytest.approx(2 / 62)


def test_linear_fusion_minmax_and_max() -> None:
    vector = _c(("a", 0.9), ("b", 0.5))
    text = _c(("b", 10.0), ("c", 5.0))
    minmax = {
        c.chunk_id: c.score for c in fusion.linear([vector, text], weights=[0.5, 0.5], normalise="minmax")
    }
    assert minmax == pytest.approx({"a": 0.5, "b": 0.5, "c": 0.0})
    by_max = {c.chunk_id: c.score for c in fusion.linear([vector, text], weights=[0.5, 0.5], normalise="max")}
    assert by_max == pytest.approx({"a": 0.5, "b": 0.5 * 0.5 / 0.9 + 0.5, "c": 0.25})


def test_linear_fusion_checks_its_arguments() -> None:
    with pytest.raises(ValueError):
        fusion.linear([[]], weights=[0.5, 0.5])
    with pytest.raises(ValueError):
        fusion.linear([[]], weights=[1.0], normalise="zscore")


def test_expansion_terms_are_boosted_escaped_and_not_repeated() -> None:
    query = lucene.chunk_query(
        ["ada"], project_id="p", expansion=["ada", "c++", "engine"], expansion_boost=0.3
    )
    assert query == 'text:(ada OR c\\+\\+^0.3 OR engine^0.3) AND project_id:"p"^0'
    # feedback words alone still make a query
    assert lucene.chunk_query([], project_id="p", expansion=["x"]) == 'text:(x^1) AND project_id:"p"^0'


def test_pin_keeps_the_first_hits_and_ranks_the_rest_below_them() -> None:
    from retrieval.retrievers import pin

    kept = _c(("a", 0.9), ("b", 0.6))
    pinned = pin(kept, _c(("c", 1.0), ("a", 0.95), ("d", 0.5)))
    assert [c.chunk_id for c in pinned] == ["a", "b", "c", "d"]
    scores = [c.score for c in pinned]
    assert scores == sorted(scores, reverse=True)
    assert scores[2] == pytest.approx(0.6) and scores[3] == pytest.approx(0.3)
    # already below: unchanged
    assert pin(kept, _c(("e", 0.2))) == [*kept, Candidate("e", 0.2)]
