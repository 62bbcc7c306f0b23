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

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])")

_NAME = r"[A-Z][a-zà-ÿ'’-]+(?:\s+(?:[A-Z][a-zà-ÿ'’-]+|[A-Z]\.))*"
_NAME_CUES = re.compile(
    r"(?:\b(?:[Mm]y name is|[Mm]y name's|I am called|I'm called|[Cc]all me|[Tt]his is|[Nn]amed)\s+"
    r"|\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Madam)\.?\s+"
    r"|\b(?:[Rr]egards|[Ss]incerely|[Cc]heers|[Tt]hanks),?\s*\n?\s*)"
    rf"(?P<name>{_NAME})"
)
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


@dataclass(frozen=True)
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
    for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
        yield Span(match.start, match.end, "phone")


def _names(text: str, known: Iterable[str]) -> tuple[list[Span], set[str]]:
    found: set[str] = set()
    for m in _NAME_CUES.finditer(text):
        words = m.group("name").split()
        while words and words[-1].rstrip(".") in _NOT_NAMES:
            words.pop()
        if words and words[0] not in _NOT_NAMES:
            found.add(" ".join(words))
    names = {n.strip() for n in [*known, *found] if n and len(n.strip()) >= 2}
    spans: list[Span] = []
    # longest first, so "Ana Souza" is one placeholder rather than "[PERSON] Souza"
    for name in sorted(names, key=len, reverse=True):
        for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text):
            spans.append(Span(m.start(), m.end(), "person"))
    return spans, found


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
