"""Which document titles a text names: the links of the passage graph that graph-mode search walks.

A title is found as a run of whole words with the title's own case ("Lothair II", "The Godfather Part
II"); a title ending in a parenthetical disambiguation ("Cold War (film)") is also found without it.
A one-word name ("Paris", "Green", "It") is found only capitalised and not as a sentence's first
word, where any word is capitalised: "Green" in "the green door" or "It" in "It rained" names nothing.
A search query is matched with `fold_case`: names of two words or more in any case (people type
"the godfather part ii"), one-word names as in text.

Names are read leftmost-longest, as a gazetteer reads them: where a name starts, the longest one found
there is taken and reading goes on after it, so a name inside a longer one names nothing. "Inside the
Room" does not also name "The Room", nor "A Romance of Seville" the city.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_WORD = re.compile(r"\w+(?:['’.-]\w+)*")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")
_SENTENCE_END = re.compile(r"[.!?:;\"“”]\s*$|^\s*$")
MAX_TITLE_WORDS = 12


def title_names(title: str) -> list[tuple[str, ...]]:
    """The word sequences a title is found by: the title, and the title without a trailing
    parenthetical; none for a title of no words or more than MAX_TITLE_WORDS."""
    names: list[tuple[str, ...]] = []
    for variant in (title, _PARENTHETICAL.sub("", title)):
        words = tuple(_WORD.findall(variant))
        if 0 < len(words) <= MAX_TITLE_WORDS and words not in names:
            names.append(words)
    return names


@dataclass
class TitleMatcher:
    """Titles by the word sequences they are found by; one sequence may name several documents
    (two documents titled "Mercury")."""

    fold_case: bool = False
    _by_name: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    _longest: int = 0

    @classmethod
    def of(cls, titles: Mapping[str, str], *, fold_case: bool = False) -> TitleMatcher:
        """`titles`: document id -> title."""
        matcher = cls(fold_case=fold_case)
        matcher.add(titles.items())
        return matcher

    def add(self, titles: Iterable[tuple[str, str]]) -> None:
        for document_id, title in titles:
            for name in title_names(title or ""):
                self._by_name.setdefault(self._key(name), set()).add(document_id)
                self._longest = max(self._longest, len(name))

    def _key(self, words: tuple[str, ...]) -> tuple[str, ...]:
        if self.fold_case and len(words) > 1:
            return tuple(w.casefold() for w in words)
        return words

    def __len__(self) -> int:
        return len(self._by_name)

    def mentioned(self, text: str) -> set[str]:
        """Ids of the documents whose title `text` names."""
        found: set[str] = set()
        for _name, ids in self.matches(text):
            found |= ids
        return found

    def matches(self, text: str) -> list[tuple[str, set[str]]]:
        """Each name `text` holds, leftmost-longest, as written there, with the ids of the documents
        it names; in the order found."""
        if not self._by_name:
            return []
        spans = list(_WORD.finditer(text))
        words = [m.group(0) for m in spans]
        found: list[tuple[str, set[str]]] = []
        start = 0
        while start < len(words):
            length = self._longest_at(words, start, text, spans[start].start())
            if not length:
                start += 1
                continue
            ids = self._by_name[self._key(tuple(words[start : start + length]))]
            found.append((text[spans[start].start() : spans[start + length - 1].end()], set(ids)))
            start += length
        return found

    def _longest_at(self, words: list[str], start: int, text: str, position: int) -> int:
        """Words in the longest name starting at `words[start]`; 0 when none does."""
        for length in range(min(self._longest, len(words) - start), 0, -1):
            if self._key(tuple(words[start : start + length])) not in self._by_name:
                continue
            if length == 1 and not _proper_word(words[start], text, position):
                continue
            return length
        return 0


def _proper_word(word: str, text: str, position: int) -> bool:
    """A one-word name stands as a name: capitalised, and not where a sentence starts."""
    if not word[:1].isupper():
        return False
    return not _SENTENCE_END.search(text[max(0, position - 3) : position])
