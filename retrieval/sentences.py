"""Sentences of retrieved text, for answers built without an LLM (DRIFT's extractive strategy, the
chat turn's extractive mode): markdown removed, split at sentence ends, compared by the stems of
their query terms."""

from __future__ import annotations

import re

from retrieval.lucene import query_terms

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
# markdown a chunk may hold: headings, list and quote markers, emphasis, code ticks, links and images
# (their text kept); horizontal rules and table rows (dropped whole, table text is no sentence)
_LINE_MARK = re.compile(r"^\s*(?:#{1,6}\s+|[-*+>]\s+|\d+[.)]\s+)", re.MULTILINE)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|`+|~~)(?=\S)(.+?)(?<=\S)\1")
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$|^\s*\|.*\|\s*$", re.MULTILINE)


def plain(text: str) -> str:
    """`text` without markdown syntax: what a reader of the rendered text sees."""
    text = _RULE.sub(" ", text)
    text = _LINE_MARK.sub("", text)
    text = _LINK.sub(r"\1", text)
    return _EMPHASIS.sub(r"\2", text)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(" ".join(plain(text).split())) if len(s.strip()) > 15]


def stem(token: str) -> str:
    return token.rstrip("s") if len(token) > 3 else token


def terms(text: str) -> set[str]:
    return {stem(t) for t in query_terms(text, max_terms=256)}
