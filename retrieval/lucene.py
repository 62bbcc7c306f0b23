"""Turning any user text into a safe Lucene query for a chunk fulltext index.

The text is never handed to Lucene as syntax: it is split into word tokens, lower-cased (so `AND`,
`OR`, `NOT` lose their operator meaning), stripped of stop words and escaped, then OR-ed inside a
`text:(…)` group. Tenancy and document filters are required clauses on indexed keyword-like fields
with boost 0, so they restrict the hits without changing the BM25 score.
"""

from __future__ import annotations

import re

# Lucene's classic English stop-word set plus question words, which carry no topic: a question's
# "which", "what" or "when" should not rank passages (docs/decisions.md, "Fulltext: one Lucene
# index per project").
STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
    }
)

_TOKEN = re.compile(r"\w+", re.UNICODE)
_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')


def escape(term: str) -> str:
    """Backslash-escape every character that has a meaning in Lucene's query syntax."""
    return _SPECIAL.sub(r"\\\1", term)


def query_terms(text: str, *, max_terms: int) -> list[str]:
    """Distinct lower-cased word tokens of `text` without stop words, in order of appearance."""
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(text.lower()):
        token = match.group(0).strip("_")
        if token and token not in STOP_WORDS and token not in seen:
            seen[token] = None
            if len(seen) >= max_terms:
                break
    return list(seen)


def _phrase(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def chunk_query(
    terms: list[str],
    *,
    project_id: str | None,
    document_ids: list[str] | None = None,
    expansion: list[str] | None = None,
    expansion_boost: float = 1.0,
    field: str = "text",
) -> str:
    """`<field>:(t1 OR t2 … [OR e1^b …]) [AND project_id:"…"^0] [AND document_id:("…" OR …)^0]`;
    empty without terms. `expansion` terms (already tokens) are added with boost `expansion_boost`.
    `project_id` is None for a project's own index (it holds nothing else)."""
    own = set(terms)
    clauses = [escape(t) for t in terms]
    clauses += [f"{escape(t)}^{expansion_boost:g}" for t in expansion or [] if t not in own]
    if not clauses:
        return ""
    parts = [f"{field}:(" + " OR ".join(clauses) + ")"]
    if project_id is not None:
        parts.append(f"project_id:{_phrase(project_id)}^0")
    if document_ids:
        parts.append("document_id:(" + " OR ".join(_phrase(d) for d in document_ids) + ")^0")
    return " AND ".join(parts)
