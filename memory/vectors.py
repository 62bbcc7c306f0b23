"""A stored message's vectors: one per sentence, and their mean as the message's own.

A long turn says several things ("Thanks! The trip was great. My sister moved to Sweden last month."),
and one vector of the whole turn dilutes the sentence a later question is about. With
MEMORY_SENTENCE_VECTORS on, a message of two or more sentences is embedded sentence by sentence, each
as its own line (speaker, day, sentence: memory.text.line). Its `embedding` (what the vector index
and exact scans rank by) is the normalised mean of those vectors, and `sentence_embeddings` keeps them,
concatenated, so a search can score a candidate by its best sentence too (memory.selectors.
MessageSearch.sentence_rescored). A message of one sentence keeps the one vector of its line.

A sentence of fewer than MEMORY_SENTENCE_MIN_WORDS words ("Thanks!", "Wow, really?") is not embedded
alone: it joins the sentence after it (a last one joins the sentence before). That cuts a quarter of
the lines on locomo-dev for no measured loss of recall (docs/decisions.md, "Sentence vectors").

At most MEMORY_SENTENCE_VECTORS_MAX vectors per message: the sentences of a longer one are grouped, in
order, into that many runs. Measured on locomo-dev in docs/decisions.md ("Sentence vectors").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings

from core.embeddings import get_embedder
from core.graph import Vector
from memory import text as message_text


@dataclass(frozen=True)
class MessageVectors:
    embedding: Vector
    sentences: Vector | None  # the sentences' vectors end to end; None for a message of one sentence


def pieces(row: Mapping[str, Any]) -> list[str]:
    """The lines a message is embedded as: its line, or one line per sentence (or run of sentences)."""
    whole = message_text.row_line(row)
    if not settings.MEMORY_SENTENCE_VECTORS:
        return [whole]
    sentences = folded(message_text.sentences(row["text"] or ""), settings.MEMORY_SENTENCE_MIN_WORDS)
    if len(sentences) < 2:
        return [whole]
    most = settings.MEMORY_SENTENCE_VECTORS_MAX
    runs = [" ".join(part) for part in _runs(sentences, most)] if len(sentences) > most else sentences
    role, author, when = row.get("role") or "", row.get("author_name"), row.get("timestamp")
    return [message_text.line(text=run, role=role, author_name=author, timestamp=when) for run in runs]


def folded(sentences: list[str], min_words: int) -> list[str]:
    """`sentences` with each one of fewer than `min_words` words joined to the sentence after it, and
    a short last one to the sentence before: ["Wow!", "You went to Paris?"] -> ["Wow! You went to
    Paris?"]. Words are counted as memory.text.words counts them."""
    out: list[str] = []
    counts: list[int] = []  # words of each piece of `out`, kept as pieces grow
    for sentence in sentences:
        count = len(message_text.words(sentence))
        if out and counts[-1] < min_words:
            out[-1], counts[-1] = f"{out[-1]} {sentence}", counts[-1] + count
        else:
            out.append(sentence)
            counts.append(count)
    if len(out) > 1 and counts[-1] < min_words:
        last = out.pop()
        out[-1] = f"{out[-1]} {last}"
    return out


def _runs(sentences: list[str], count: int) -> list[list[str]]:
    """`sentences` cut, in order, into `count` runs whose lengths differ by one at most."""
    size, extra = divmod(len(sentences), count)
    runs, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        runs.append(sentences[start:end])
        start = end
    return runs


def message_vectors(rows: Sequence[Mapping[str, Any]]) -> list[MessageVectors]:
    """Each message's vectors (text, role, author_name, timestamp per row), from one embedding call."""
    lines = [pieces(row) for row in rows]
    flat = get_embedder().embed([line for group in lines for line in group])
    out: list[MessageVectors] = []
    start = 0
    for group in lines:
        vectors = flat[start : start + len(group)]
        start += len(group)
        if len(vectors) == 1:
            out.append(MessageVectors(Vector(vectors[0]), None))
            continue
        stacked = np.asarray(vectors, dtype=np.float32)
        mean = stacked.mean(axis=0)
        norm = float(np.linalg.norm(mean))
        # sentences whose vectors cancel out (never seen) leave the first sentence's as the message's
        embedding = mean / norm if norm > 1e-6 else stacked[0]
        out.append(MessageVectors(Vector(embedding.tolist()), Vector(stacked.ravel().tolist())))
    return out


def set_on(rows: Sequence[dict[str, Any]]) -> None:
    """Set `embedding` and `sentence_embeddings` on each row (a message about to be written)."""
    for row, vectors in zip(rows, message_vectors(rows), strict=True):
        row["embedding"] = vectors.embedding
        row["sentence_embeddings"] = vectors.sentences
