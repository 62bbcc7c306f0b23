"""PII detection and replacement by typed placeholders (issue 9, seed 003 `_anonymize_text`).

What is detected:
- e-mail addresses (pattern);
- phone numbers: libphonenumber (`phonenumbers`) finds numbers written for PII_PHONE_REGION and
  any number in international `+CC …` form, and keeps only numbers valid for their country;
- payment card numbers: 13–19 digits (spaces or dashes allowed) that pass the Luhn check;
- IBANs: country code, check digits and account, validated with ISO 7064 mod 97 (`python-stdnum`);
- IPv4 and IPv6 addresses (validated with `ipaddress`);
- person names, by cue only: a capitalised name after "my name is", "I am called", "this is",
  "call me", an honorific (Mr, Mrs, Ms, Dr, Prof …) or a sign-off ("regards,"), and every name the
  caller already knows (a message's `author_name`, names found elsewhere in the same conversation).

Limits that keep every step linear in the length of the text (issue 28): an e-mail local part of at
most 64 characters, a name found by cue of at most 6 words of at most 41 letters each, phone numbers
looked for in windows of whole lines (of at most 4,096 characters) rather than in the whole text at
once. A name matches across any run of whitespace (a line break between "Ana" and "Souza" too).

What is not: person names without such a cue (no offline NER model is installed: spaCy's English
models are not on PyPI, only unofficial re-uploads), postal addresses, dates of birth, national
identity numbers other than IBANs, and numbers split over several lines.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import luhn

PLACEHOLDERS = {
    "email": "[EMAIL]",
    "phone": "[PHONE]",
    "credit_card": "[CREDIT_CARD]",
    "iban": "[IBAN]",
    "ip_address": "[IP_ADDRESS]",
    "person": "[PERSON]",
}

# Every pattern below is linear in the length of the text (issue 28): each start position does a
# bounded amount of work (bounded repetitions, no two quantifiers that can share characters), and the
# look-behinds refuse a start inside a run that an earlier start already covered. tests/core/
# test_pii_linear.py times each of them on adversarial inputs of 100 KB and 1 MB.
#
# E-mail: a local part of at most 64 characters (RFC 5321), at most 10 dot-separated domain labels of
# at most 63 characters, then an alphabetic top-level label (a run of `%`, in the local-part class but
# not in the look-behind, starts a scan at every position: the bound keeps each one at 64 characters).
_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,10}[A-Za-z]{2,24}\b")
# Card: 13-19 digits, a single space or dash allowed between two digits (each repetition consumes a
# digit, so the separator is never ambiguous).
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])")

# A name found by a cue: a capitalised word then at most _MAX_NAME_WORDS - 1 more capitalised words or
# initials; a word is at most 40 letters and must end there (the look-ahead), so a run of letters
# cannot be cut into a "name". The whitespace after a sign-off is one `\s*` (the former
# `\s*\n?\s*` could split one run of whitespace in quadratically many ways before failing).
_MAX_NAME_WORDS = 6
_NAME_WORD = r"[A-Z][a-zà-ÿ'’-]{1,40}(?![a-zà-ÿ'’-])"
_NAME = rf"{_NAME_WORD}(?:\s+(?:{_NAME_WORD}|[A-Z]\.)){{0,{_MAX_NAME_WORDS - 1}}}"
_NAME_CUES = re.compile(
    r"(?:\b(?:[Mm]y name is|[Mm]y name's|I am called|I'm called|[Cc]all me|[Tt]his is|[Nn]amed)\s+"
    r"|\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Madam)\.?\s+"
    r"|\b(?:[Rr]egards|[Ss]incerely|[Cc]heers|[Tt]hanks),?\s*)"
    rf"(?P<name>{_NAME})"
)
# Known names are found with a token trie (see _NameIndex): a token is a run of word characters, a
# run of whitespace (any run matches any run) or one other character.
_TOKEN = re.compile(r"(\w+)|(\s+)|([^\w\s])")
_WORD_CHAR = re.compile(r"\w")
# Names with more tokens than this are searched for one by one (a literal scan each, linear); they
# are not person names in practice, and they would make every trie walk that long.
_MAX_TRIE_TOKENS = 24
# phonenumbers' matcher gives up after 65,535 candidates in one text, so a long text is matched in
# windows of at most this many characters, cut at line ends; a longer line is cut with an overlap
# longer than any number the matcher accepts, and a number belongs to the window it starts in.
_PHONE_WINDOW = 4096
_PHONE_OVERLAP = 256
# Capitalised words after a cue that are not names ("This is Monday", "call me Tomorrow")
_NOT_NAMES = frozenset(
    [
        "The",
        "A",
        "An",
        "It",
        "This",
        "That",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Today",
        "Tomorrow",
        "Yesterday",
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
        "I",
        "We",
        "You",
        "He",
        "She",
        "They",
        "Not",
        "Just",
        "Also",
        "Here",
        "There",
    ]
)


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    kind: str


@dataclass
class Anonymised:
    text: str
    counts: dict[str, int] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)

    @property
    def changed(self) -> bool:
        return bool(self.counts)


def _emails(text: str) -> Iterable[Span]:
    for m in _EMAIL.finditer(text):
        yield Span(m.start(), m.end(), "email")


def _cards(text: str) -> Iterable[Span]:
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and luhn.is_valid(digits) and len(set(digits)) > 1:
            yield Span(m.start(), m.end(), "credit_card")


def _ibans(text: str) -> Iterable[Span]:
    for m in _IBAN.finditer(text):
        if stdnum_iban.is_valid(m.group()):
            yield Span(m.start(), m.end(), "iban")


def _ips(text: str) -> Iterable[Span]:
    for m in _IPV4.finditer(text):
        try:
            ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        yield Span(m.start(), m.end(), "ip_address")
    for m in _IPV6.finditer(text):
        candidate = m.group()
        if candidate.count(":") < 2 or len(candidate.replace(":", "")) < 2:
            continue  # "a::b" is an address, "10:30:00" is not hex-only enough to matter but is valid
        try:
            ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        yield Span(m.start(), m.end(), "ip_address")


def _phones(text: str, region: str) -> Iterable[Span]:
    n = len(text)
    pos = 0
    while pos < n:
        end = min(pos + _PHONE_WINDOW, n)
        if end < n and (cut := text.rfind("\n", pos, end)) > pos:
            end, accept_before, next_pos = cut, cut, cut + 1  # whole lines
        elif end < n:  # one line longer than a window
            accept_before, next_pos = end - _PHONE_OVERLAP, end - _PHONE_OVERLAP
        else:
            accept_before, next_pos = n, n
        window = text[pos:end]
        for match in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.VALID):
            if pos + match.start < accept_before:
                yield Span(pos + match.start, pos + match.end, "phone")
        pos = next_pos


def _tokens(name: str) -> tuple[str, ...]:
    """A name as trie keys: word runs as they are, any whitespace run as one space, other characters
    one by one ("Ana  J. Souza" -> Ana, " ", J, ., " ", Souza)."""
    return tuple(" " if m.group(2) else m.group() for m in _TOKEN.finditer(name))


class _NameIndex:
    """Every occurrence of a set of names, in time linear in the text (issue 28): the former one
    regex scan per name was quadratic when a text brought many names of its own ("Mr Aab. Mr Aac. …").

    Names are kept in a trie of tokens. A walk starts only at a run of word characters that begins a
    name and follows the text token by token, so it costs at most _MAX_TRIE_TOKENS steps. An
    occurrence is bounded by non-word characters, as the former `(?<!\\w)name(?!\\w)` was."""

    _END = ""  # key of the terminal mark in a trie node (no token is empty)

    def __init__(self, names: Iterable[str]) -> None:
        self.root: dict[str, Any] = {}
        self.long: list[str] = []
        for name in names:
            tokens = _tokens(name)
            if not tokens:
                continue
            if len(tokens) > _MAX_TRIE_TOKENS or not _WORD_CHAR.match(name):
                self.long.append(name)
                continue
            node = self.root
            for token in tokens:
                node = node.setdefault(token, {})
            node[self._END] = True
        # word runs that can start a name, found in C by their first character
        firsts = sorted({token[0] for token in self.root})
        self.starts = (
            re.compile(r"(?<!\w)[" + "".join(re.escape(c) for c in firsts) + r"]\w*") if firsts else None
        )

    def spans(self, text: str) -> list[Span]:
        spans: list[Span] = []
        if self.starts is not None:
            for first in self.starts.finditer(text):
                node = self.root.get(first.group())
                if node is None:
                    continue
                pos = first.end()
                longest = pos if self._END in node and not _WORD_CHAR.match(text, pos) else -1
                for _ in range(_MAX_TRIE_TOKENS - 1):
                    token = _TOKEN.match(text, pos)
                    if token is None:
                        break
                    node = node.get(" " if token.group(2) else token.group())
                    if node is None:
                        break
                    pos = token.end()
                    if self._END in node and not _WORD_CHAR.match(text, pos):
                        longest = pos
                if longest != -1:
                    spans.append(Span(first.start(), longest, "person"))
        for name in self.long:
            for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text):
                spans.append(Span(m.start(), m.end(), "person"))
        return spans


def _names(text: str, known: Iterable[str]) -> tuple[list[Span], set[str]]:
    found: set[str] = set()
    for m in _NAME_CUES.finditer(text):
        words = m.group("name").split()
        while words and words[-1].rstrip(".") in _NOT_NAMES:
            words.pop()
        if words and words[0] not in _NOT_NAMES:
            found.add(" ".join(words))
    names = {n.strip() for n in [*known, *found] if n and len(n.strip()) >= 2}
    # at one position the longest name wins, so "Ana Souza" is one placeholder rather than
    # "[PERSON] Souza"
    return _NameIndex(names).spans(text), found


def anonymise(text: str, *, known_names: Iterable[str] = (), phone_region: str = "US") -> Anonymised:
    """`text` with every detected PII span replaced by its placeholder, the counts by kind and the
    person names found by cue (so the caller can replace them in the rest of a conversation)."""
    if not text:
        return Anonymised(text=text)
    spans: list[Span] = [*_emails(text), *_cards(text), *_ibans(text), *_ips(text)]
    spans += _phones(text, phone_region)
    name_spans, found = _names(text, known_names)
    spans += name_spans
    # earlier first; at one position the longer span wins; overlapping later spans are dropped
    spans.sort(key=lambda s: (s.start, -(s.end - s.start)))
    kept: list[Span] = []
    for span in spans:
        if kept and span.start < kept[-1].end:
            continue
        kept.append(span)
    if not kept:
        return Anonymised(text=text, names=found)
    parts: list[str] = []
    cursor = 0
    for span in kept:
        parts.append(text[cursor : span.start])
        parts.append(PLACEHOLDERS[span.kind])
        cursor = span.end
    parts.append(text[cursor:])
    return Anonymised(text="".join(parts), counts=dict(Counter(s.kind for s in kept)), names=found)


def contains_pii(text: str, *, known_names: Iterable[str] = (), phone_region: str = "US") -> bool:
    return anonymise(text, known_names=known_names, phone_region=phone_region).changed
