"""PII detection and replacement by typed placeholders (seed 003 `_anonymize_text`).

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

Limits that keep every step linear in the length of the text: an e-mail local part of at
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
from typing import Any, NamedTuple

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

# Every pattern below is linear in the length of the text: each start position does a
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

# The cues, by what may follow them before the name. The pattern is built so that every alternative
# starts with a literal character: the regex engine then skips, in C, every position whose character
# cannot start a cue (2.5x faster on prose, 20x on text without such characters). The word boundary
# before a cue is checked after its first character (`(?<!\w.)`: the character before it is no word
# character), which is what `\b` in front of it checked.
_CUES = {
    r"\s+": ("My name is", "My name's", "I am called", "I'm called", "Call me", "This is", "Named"),
    r"\.?\s+": ("Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Prof", "Sir", "Madam"),
    r",?\s*": ("Regards", "Sincerely", "Cheers", "Thanks"),
}
_LOWER_TOO = {"My name is", "My name's", "Call me", "This is", "Named", *_CUES[r",?\s*"]}


def _cue_pattern() -> str:
    by_first: dict[str, list[str]] = {}
    for tail, cues in _CUES.items():
        for cue in cues:
            for spelling in (cue, cue[0].lower() + cue[1:]) if cue in _LOWER_TOO else (cue,):
                by_first.setdefault(spelling[0], []).append(re.escape(spelling[1:]) + tail)
    return "(?:" + "|".join(rf"{c}(?<!\w.)(?:{'|'.join(rest)})" for c, rest in by_first.items()) + ")"


# A name found by a cue: a capitalised word then at most _MAX_NAME_WORDS - 1 more capitalised words or
# initials; a word is at most 40 letters and must end there (the look-ahead), so a run of letters
# cannot be cut into a "name". The whitespace after a sign-off is one `\s*` (the former
# `\s*\n?\s*` could split one run of whitespace in quadratically many ways before failing).
_MAX_NAME_WORDS = 6
# An honorific is a cue, never a word of the name: "Mr Mr Mr …" has no name, "regards, Dr. Ana
# Souza" is Ana Souza, "Mr Smith Dr Jones" two names.
_HONORIFIC = "(?:" + "|".join(_CUES[r"\.?\s+"]) + r")(?![a-zà-ÿ'’-])"
_NAME_WORD = rf"(?!{_HONORIFIC})[A-Z][a-zà-ÿ'’-]{{1,40}}(?![a-zà-ÿ'’-])"
_NAME = rf"{_NAME_WORD}(?:\s+(?:{_NAME_WORD}|[A-Z]\.)){{0,{_MAX_NAME_WORDS - 1}}}"
_NAME_CUES = re.compile(_cue_pattern() + rf"(?P<name>{_NAME})")
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


class Span(NamedTuple):
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
    """Every occurrence of a set of names, in time linear in the text (one regex scan per name would
    be quadratic when a text brings many names of its own: "Mr Aab. Mr Aac. …").

    Names are kept in a trie of tokens. A walk starts only at a run of word characters that begins a
    name and follows the text token by token, so it costs at most _MAX_TRIE_TOKENS steps. An
    occurrence is bounded by non-word characters, as with `(?<!\\w)name(?!\\w)`.

    A walk is Python work per token, so a text that starts a name at nearly every word ("Mr Mr Mr …"
    after the name "Mr Mr Mr Mr Mr Mr" was found by its cue) would cost tens of steps per word. The
    first words that start walks often (_HOT_MIN times, and at least a _HOT_RATIO-th of the
    characters of their names) are matched instead by one regular expression, compiled from a
    character trie of their names, which the regex engine runs in C: it tries one character at a
    time, so it neither backtracks nor depends on how many names there are. Compiling costs Python
    time per character of those names, and the ratio keeps it below a small multiple of the walks it
    replaces. `anonymise` asks that expression for the next name at or after the end of the last
    span it kept, which is the one the walks would have given there."""

    _END = ""  # key of the terminal mark in a trie node (no token is empty)
    _SPACE = " "  # the key of any whitespace run, in both tries

    def __init__(self, names: Iterable[str]) -> None:
        self.root: dict[str, Any] = {}
        self.long: list[str] = []
        self.name_chars = 0
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
            self.name_chars += len(name)
        # word runs that can start a name, found in C by their first character
        firsts = sorted({token[0] for token in self.root})
        self.first_chars = "[" + "".join(re.escape(c) for c in firsts) + "]"
        self.starts = re.compile(rf"(?<!\w){self.first_chars}\w*") if firsts else None

    def spans(self, text: str) -> tuple[list[Span], re.Pattern[str] | None]:
        """Occurrences found by walks, and the expression that finds the rest (None when every
        first word is walked)."""
        spans: list[Span] = []
        matcher = None
        if self.starts is not None:
            starts = self.starts
            hot = self._hot(text)
            if hot:
                hot_trie = _char_trie(tokens for word in sorted(hot) for tokens in hot[word])
                matcher = re.compile(r"(?<!\w)" + _trie_pattern(hot_trie))
                # walks start only at first words that are not hot (rejected in C)
                words = _trie_pattern(_char_trie((word,) for word in sorted(hot)))
                starts = re.compile(rf"(?<!\w)(?!{words}){self.first_chars}\w*")
            for first in starts.finditer(text):
                node = self.root.get(first.group())
                if node is None:
                    continue
                end = self._walk(text, node, first.end())
                if end != -1:
                    spans.append(Span(first.start(), end, "person"))
        for name in self.long:
            for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text):
                spans.append(Span(m.start(), m.end(), "person"))
        return spans, matcher

    def _walk(self, text: str, node: dict[str, Any], pos: int) -> int:
        """End of the longest name that starts with the word just before `pos` (its trie node is
        `node`), or -1."""
        longest = pos if self._END in node and not _WORD_CHAR.match(text, pos) else -1
        for _ in range(_MAX_TRIE_TOKENS - 1):
            token = _TOKEN.match(text, pos)
            if token is None:
                break
            child = node.get(self._SPACE if token.group(2) else token.group())
            if child is None:
                break
            node = child
            pos = token.end()
            if self._END in node and not _WORD_CHAR.match(text, pos):
                longest = pos
        return longest

    def _hot(self, text: str) -> dict[str, list[tuple[str, ...]]]:
        """The first words worth matching in C, with the names they start: counted in C (findall,
        Counter), kept when they start walks often enough to pay for compiling their names, and when
        their character trie nests no deeper than _HOT_MAX_NESTING groups (the regex compiler
        recurses per group)."""
        assert self.starts is not None
        if len(self.root) <= _COUNT_BY_SUBSTRING_WORDS and self.name_chars <= _COUNT_BY_SUBSTRING_CHARS:
            # few short names: a substring count per first word (in C) bounds its walks from above
            counts = Counter({word: text.count(word) for word in self.root})
        else:
            counts = Counter(self.starts.findall(text))
        hot = {}
        for word in [w for w, count in counts.items() if count >= _HOT_MIN and w in self.root]:
            names = self._names_below(word, budget=counts[word] * _HOT_RATIO)
            if names and _nesting(_char_trie(names), _HOT_MAX_NESTING) <= _HOT_MAX_NESTING:
                hot[word] = names
        return hot

    def _names_below(self, word: str, budget: int) -> list[tuple[str, ...]] | None:
        """The names that start with `word`, as tokens; None once their characters exceed
        `budget` (so the cost of looking is bounded by what compiling them may cost)."""
        names: list[tuple[str, ...]] = []
        stack: list[tuple[dict[str, Any], tuple[str, ...]]] = [(self.root[word], (word,))]
        while stack:
            node, tokens = stack.pop()
            for key, child in node.items():
                if key == self._END:
                    names.append(tokens)
                    budget -= sum(map(len, tokens))
                    if budget < 0:
                        return None
                else:
                    stack.append((child, (*tokens, key)))
        return names


# A first word is matched in C when it starts at least _HOT_MIN walks and at least one walk per
# _HOT_RATIO characters of the names it starts; see _NameIndex.
_HOT_MIN = 16
_HOT_RATIO = 4
_HOT_MAX_NESTING = 100
# With at most this many first words and characters of names, walks are counted with str.count (an
# upper bound: a word inside a longer one counts too); the compile it may cause stays this small.
_COUNT_BY_SUBSTRING_WORDS = 64
_COUNT_BY_SUBSTRING_CHARS = 10_000


def _char_trie(names: Iterable[tuple[str, ...]]) -> dict[str, Any]:
    """Names (as tokens) in a trie of characters; a whitespace token is the one key " "."""
    root: dict[str, Any] = {}
    for tokens in names:
        node = root
        for token in tokens:
            for char in token:
                node = node.setdefault(char, {})
        node[""] = True
    return root


def _chain_end(node: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The keys of a run of nodes with one child and no terminal mark, and the node after it."""
    keys: list[str] = []
    while len(node) == 1 and "" not in node:
        ((key, node),) = node.items()
        keys.append(key)
    return keys, node


def _nesting(node: dict[str, Any], limit: int) -> int:
    """How many alternation groups deep the pattern of `node` nests (more than `limit` once it
    exceeds it; the recursion never goes deeper than `limit` + 1)."""
    if limit < 0:
        return 1
    deepest = 0
    for key, child in node.items():
        if key == "":
            continue
        _, after = _chain_end(child)
        deepest = max(deepest, _nesting(after, limit - 1))
        if deepest > limit:
            break
    return deepest + (1 if len(node) > 1 else 0)


def _trie_pattern(node: dict[str, Any]) -> str:
    """A pattern that matches the longest name of a character trie: alternatives per character (so
    the engine never backtracks over a name), any whitespace run for " ", possessive; a name must
    end before a non-word character, and a longer name is tried before the shorter one it extends."""
    alternatives = []
    for key, child in node.items():
        if key == "":
            continue
        keys, after = _chain_end(child)
        literal = "".join(r"\s++" if k == " " else re.escape(k) for k in [key, *keys])
        alternatives.append(literal + _trie_pattern(after))
    if "" in node:
        alternatives.append(r"(?!\w)")
    if len(alternatives) == 1:
        return alternatives[0]
    return "(?:" + "|".join(alternatives) + ")"


def _names(text: str, known: Iterable[str]) -> tuple[list[Span], re.Pattern[str] | None, set[str]]:
    found: set[str] = set()
    for cued in set(_NAME_CUES.findall(text)):  # the name group, each distinct one once
        words = cued.split()
        while words and words[-1].rstrip(".") in _NOT_NAMES:
            words.pop()
        if words and words[0] not in _NOT_NAMES:
            found.add(" ".join(words))
    names = {n.strip() for n in [*known, *found] if n and len(n.strip()) >= 2}
    # at one position the longest name wins, so "Ana Souza" is one placeholder rather than
    # "[PERSON] Souza"
    spans, matcher = _NameIndex(names).spans(text)
    return spans, matcher, found


def anonymise(text: str, *, known_names: Iterable[str] = (), phone_region: str = "US") -> Anonymised:
    """`text` with every detected PII span replaced by its placeholder, the counts by kind and the
    person names found by cue (so the caller can replace them in the rest of a conversation)."""
    if not text:
        return Anonymised(text=text)
    spans: list[Span] = [*_emails(text), *_cards(text), *_ibans(text), *_ips(text)]
    spans += _phones(text, phone_region)
    name_spans, names_after, found = _names(text, known_names)
    spans += name_spans
    kept = _without_overlaps(spans, text, names_after)
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


def _without_overlaps(spans: list[Span], text: str, names_after: re.Pattern[str] | None) -> list[Span]:
    """The spans to replace: earlier first; at one position the longer span wins; a span that starts
    inside a kept one is dropped. `names_after` (see _NameIndex) gives the names it matches one at a
    time: the first that starts at or after the end of the last kept span."""
    spans.sort(key=_order)
    kept: list[Span] = []
    end = 0
    # Successive matches of one finditer are what repeated searches from each match's end give; it
    # starts again from `end` when a span from elsewhere ends past its next match's start.
    matches = names_after.finditer(text) if names_after is not None else iter(())
    pending = next(matches, None)
    i = 0
    while True:
        # names before the next span from elsewhere (or at its start and longer) are all kept
        nxt = spans[i] if i < len(spans) else None
        while pending is not None and (
            nxt is None
            or pending.start() < nxt.start
            or (pending.start() == nxt.start and pending.end() > nxt.end)
        ):
            start, end = pending.span()
            kept.append(Span(start, end, "person"))
            pending = next(matches, None)
        if nxt is None:
            return kept
        i += 1
        if nxt.start >= end:
            kept.append(nxt)
            end = nxt.end
            if pending is not None and pending.start() < end:
                assert names_after is not None
                matches = names_after.finditer(text, end)
                pending = next(matches, None)


def _order(span: Span) -> tuple[int, int]:
    return span.start, span.start - span.end


def contains_pii(text: str, *, known_names: Iterable[str] = (), phone_region: str = "US") -> bool:
    return anonymise(text, known_names=known_names, phone_region=phone_region).changed
