"""Finding the document titles a text names (the links graph-mode search walks)."""

from __future__ import annotations

import pytest

from knowledge.pipeline.titles import TitleMatcher, title_names

pytestmark = pytest.mark.unit

TITLES = {
    "d-lothair": "Lothair II",
    "d-film": "Cold War (film)",
    "d-war": "Cold War",
    "d-paris": "Paris",
    "d-green": "Green",
    "d-it": "It",
    "d-mercury-planet": "Mercury",
    "d-mercury-element": "Mercury",
    "d-abbey": "St. Maurice's Abbey",
    "d-room": "The Room",
    "d-inside": "Inside the Room",
    "d-seville": "Seville",
    "d-romance": "A Romance of Seville",
}


def test_a_title_is_found_by_its_words_and_without_its_parenthetical() -> None:
    assert title_names("Cold War (film)") == [("Cold", "War", "film"), ("Cold", "War")]
    assert title_names("Paris") == [("Paris",)]
    assert title_names("") == []
    assert title_names(" ".join(["word"] * 13)) == []


def test_multi_word_titles_match_whole_words_in_their_own_case() -> None:
    matcher = TitleMatcher.of(TITLES)
    assert matcher.mentioned("Teutberga was a queen by marriage to Lothair II of Lotharingia.") == {
        "d-lothair"
    }
    assert matcher.mentioned("a queen by marriage to lothair ii") == set()
    assert matcher.mentioned("Lothair III ruled later.") == set()  # whole words only
    # "Cold War (film)" is found as "Cold War" too, and so is the document titled "Cold War"
    assert matcher.mentioned("He starred in Cold War, a drama.") == {"d-film", "d-war"}
    assert matcher.mentioned("the lay-abbot of St. Maurice's Abbey.") == {"d-abbey"}


def test_a_one_word_title_must_stand_as_a_name() -> None:
    matcher = TitleMatcher.of(TITLES)
    assert matcher.mentioned("She moved to Paris in 1920.") == {"d-paris"}
    assert matcher.mentioned("Paris is large.") == set()  # sentence-initial: any word is capitalised
    assert matcher.mentioned("It rained. It was cold. Then it stopped.") == set()
    assert matcher.mentioned("They painted the green door.") == set()
    assert matcher.mentioned("The novel by Stephen King, It, was filmed twice.") == {"d-it"}


def test_one_name_may_title_several_documents() -> None:
    matcher = TitleMatcher.of(TITLES)
    assert matcher.mentioned("the orbit of Mercury is short") == {"d-mercury-planet", "d-mercury-element"}
    assert len(TitleMatcher.of({})) == 0
    assert TitleMatcher.of({}).mentioned("Paris") == set()


def test_a_query_names_multi_word_titles_in_any_case_and_says_where() -> None:
    matcher = TitleMatcher.of(TITLES, fold_case=True)
    assert matcher.matches("who succeeded lothair ii in lotharingia?") == [("lothair ii", {"d-lothair"})]
    # the longest name where several start at the same word, and only that one
    assert matcher.matches("Who directed Cold War (film)?") == [("Cold War (film", {"d-film"})]
    # one-word names still stand as names only
    assert matcher.matches("what is green and sold in paris?") == []
    assert matcher.matches("Is Green sold in Paris?") == [("Green", {"d-green"}), ("Paris", {"d-paris"})]


def test_a_name_inside_a_longer_name_names_nothing() -> None:
    matcher = TitleMatcher.of(TITLES)
    assert matcher.mentioned("She starred in Inside the Room in 1935.") == {"d-inside"}
    assert matcher.mentioned("She starred in The Room and in A Romance of Seville.") == {
        "d-room",
        "d-romance",
    }
    assert matcher.mentioned("She was born in Seville.") == {"d-seville"}
    query = TitleMatcher.of(TITLES, fold_case=True)
    assert query.matches("Which came first, Inside The Room or A Romance Of Seville?") == [
        ("Inside The Room", {"d-inside"}),
        ("A Romance Of Seville", {"d-romance"}),
    ]
    # a one-word name that does not stand as a name does not hide a name starting after it
    assert matcher.mentioned("It rained on The Room.") == {"d-room"}
