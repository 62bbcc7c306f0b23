"""The words a message is found by: who said it, when, and what (docs/decisions.md, "Memory: speaker
and date in what is searched").

A message's stored `text` is what the caller sent. What is embedded and indexed is its **line**,
`"<speaker> (<day month year>): <text>"`: the speaker is the author's name when given, else the role,
and the day is the message's time. A question names people ("What did Caroline research?") and times
("in May 2023"); a turn rarely names its own speaker or date, so a line carries both.

Fulltext has **one tokenizer** for what is indexed and what is asked (`words`): NFC, typographic
apostrophes made plain, possessive `'s` dropped ("McGee's" → "mcgee"), then the word characters
between everything else ("well-known" → "well known", "don't" → "don t"). A message's indexed form
(`Memory.search_text`) is the space-joined words of its line, so Lucene's analyzer (which also folds
case and accents) sees exactly the tokens a query is split into.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from typing import Any

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})
_POSSESSIVE = re.compile(r"(?<=\w)'s\b|(?<=s)'(?=\W|$)", re.IGNORECASE)
_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """The lower-cased word tokens of `text`, in order (duplicates kept)."""
    plain = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    return [w.strip("_") for w in _WORD.findall(_POSSESSIVE.sub("", plain).lower()) if w.strip("_")]


# English function words: what a query's content words are without (memory search's relevance gate
# lets a hybrid search answer when one message holds every content word of the query)
_FUNCTION_WORDS = """a about after all also am an and any are as at be been before being but by can could
    did do
    does doing for from had has have having he her here hers him his how i if in into is it its just
    me more most my no nor not of on or our ours out over she should so some such than that the their
    theirs them then there these they this those to too under until up very was we were what when
    where which while who whom whose why will with would you your yours"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())


def fold(word: str) -> str:
    """Case and accents folded as the fulltext analyzer folds them ("Straße" → "strasse", "café" →
    "cafe")."""
    return "".join(c for c in unicodedata.normalize("NFKD", word.casefold()) if not unicodedata.combining(c))


def holds_every_content_word(query_terms: list[str], indexed: str) -> bool:
    """Whether a message's indexed words hold every content word (not a FUNCTION_WORDS one) of the
    query's terms; False for a query of function words only."""
    content = {fold(t) for t in query_terms if t not in FUNCTION_WORDS}
    return bool(content) and content <= {fold(w) for w in indexed.split()}


def day(timestamp: str | None) -> str:
    """`2023-05-08T13:56:00.000000Z` → `8 May 2023` (English month names, whatever the locale); ""
    for a missing or unreadable time."""
    if not timestamp:
        return ""
    try:
        parsed = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return ""
    return f"{parsed.day} {MONTHS[parsed.month - 1]} {parsed.year}"


MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def line(*, text: str, role: str, author_name: str | None, timestamp: str | None) -> str:
    """What a message's embedding is computed from: `"<speaker> (<day>): <text>"`."""
    speaker = (author_name or "").strip() or role
    when = day(timestamp)
    return f"{speaker} ({when}): {text}" if when else f"{speaker}: {text}"


def search_text(*, text: str, role: str, author_name: str | None, timestamp: str | None) -> str:
    """A message's indexed form (`Memory.search_text`): the words of its line, space-joined."""
    return " ".join(words(line(text=text, role=role, author_name=author_name, timestamp=timestamp)))


def row_line(row: Mapping[str, Any]) -> str:
    """`line` of a message's fields (a row with text, role, author_name and timestamp)."""
    return line(
        text=row["text"],
        role=row.get("role") or "",
        author_name=row.get("author_name"),
        timestamp=row.get("timestamp"),
    )


_SENTENCE_BREAK = re.compile(r"(?<=[.!?\u3002\uff01\uff1f\u061f])\s+")
_QUESTION_MARKS = ("?", "\uff1f", "\u061f")  # Latin, full-width, Arabic
_CLOSING = "\"')]}\u00bb\u201d\u2019 "
ASKING_MAX_STATED_WORDS = 12


def sentences(text: str) -> list[str]:
    """A message's sentences: split after `.`, `!` and `?` (and their full-width and Arabic forms)
    followed by white space; empty ones dropped."""
    return [s for s in _SENTENCE_BREAK.split(text.strip()) if s.strip()]


def asks(text: str) -> bool:
    """Whether a message mostly asks: one of its sentences is a question and the others hold fewer
    than ASKING_MAX_STATED_WORDS words together ("Cool! What did it look like?", but not "I went to
    the support group yesterday and it was so powerful. How was yours?"). A turn that asks seldom
    holds what a later question is after (docs/decisions.md, "Memory: turns that ask")."""
    said = sentences(text)
    stated = [s for s in said if not s.rstrip(_CLOSING).endswith(_QUESTION_MARKS)]
    return len(stated) < len(said) and sum(len(words(s)) for s in stated) < ASKING_MAX_STATED_WORDS


MENTION_KEYS_MAX = 64


def mention_keys(text: str) -> list[str]:
    """What a message mentions, the keys memory search's graph mode links messages by: its names
    (capitalised words of three or more letters that do not start a sentence: "Sweden", "Pride") and
    each pair of adjacent content words ("home country", "pottery class"), as `words` writes them;
    at most MENTION_KEYS_MAX, in order of appearance."""
    plain = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    keys: dict[str, None] = {}
    for match in _WORD.finditer(plain):
        word = match.group(0)
        if len(word) < 3 or not word[0].isupper():
            continue
        before = plain[: match.start()].rstrip()
        if before and before[-1] not in ".!?":
            keys.update(dict.fromkeys(w for w in words(word) if w not in FUNCTION_WORDS))
    content = [w for w in words(plain) if len(w) > 2 and w not in FUNCTION_WORDS]
    keys.update(dict.fromkeys(f"{a} {b}" for a, b in zip(content, content[1:], strict=False)))
    return list(keys)[:MENTION_KEYS_MAX]


def indexed(*, text: str, role: str, author_name: str | None, timestamp: str | None) -> dict[str, Any]:
    """What is stored beside a message's text for search: its indexed form and its mention keys."""
    indexed_form = search_text(text=text, role=role, author_name=author_name, timestamp=timestamp)
    return {"search_text": indexed_form, "mention_keys": mention_keys(text)}
