"""A memory context: one token-budgeted block of text for an agent's prompt (issue 34).

The memory search (`selectors.memories_search` at depth "facts": its modes, floors, relevance gate
and filters) finds the hits; around each hit its neighbouring turns of the same conversation are
read (`cypher.MESSAGE_NEIGHBOURS`, by `seq`, under the same scope and filters). Every memory appears
once (a hit that is also another hit's neighbour is a hit). The budget is filled best-first — hits by
score, then neighbours (nearest a better hit first), then the summaries of the hits' conversations,
then the user's facts and preferences (current, or valid at `as_of`) — and what fits is written in
time order: one section per conversation (oldest first; its turns by `seq`, each as its line
`"<speaker> (<day>): <text>"`,
`…` where turns were left out, a summary before the turns it covers), then the facts and
preferences.

Tokens are counted with tiktoken's `cl100k_base` (the encoding the platform chunks and counts message
tokens with); the block never has more than `max_tokens` by that count. A hit too long for the room
left is cut (`…`); other memories that do not fit are left out. No hit (the query is about nothing
stored, or the filters leave no message) is an empty block.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from core import graph
from knowledge.pipeline.chunking import count_tokens, encoding
from memory import cypher
from memory import text as message_text
from memory.dto import ContextItem, MemoryContext, MemoryItem, MessageFilters
from memory.scope import Scope
from memory.selectors import memories_search

DEFAULT_MAX_TOKENS = 1_000
MIN_MAX_TOKENS = 50
MAX_MAX_TOKENS = 8_000
DEFAULT_NEIGHBOURS = 1
MAX_NEIGHBOURS = 5
GAP = "…"  # between two turns of a conversation that are not next to each other
CUT_MIN_TOKENS = 8  # a hit is cut to the room left only when at least this much of its text fits
FACTS_HEADING = "Facts and preferences:"


@dataclass(frozen=True)
class _Piece:
    """A candidate memory: its item, where it goes (`group`: its conversation, None for facts and
    preferences; `order`: its place there) and how it is written (`prefix` + `body`)."""

    item: ContextItem
    group: str | None
    label: str
    order: float
    prefix: str
    body: str

    @property
    def line(self) -> str:
        return self.prefix + self.body

    @property
    def is_turn(self) -> bool:
        return self.item.level == "message"


def memories_context(
    *,
    project_id: str,
    scope: Scope,
    query: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    neighbours: int = DEFAULT_NEIGHBOURS,
    top_k: int = 10,
    mode: str | None = None,
    min_score: float | None = None,
    filters: MessageFilters | None = None,
) -> MemoryContext:
    """The scope's memories relevant to `query` as one block of at most `max_tokens` tokens, with
    the items it holds in the order written (module docstring)."""
    started = time.perf_counter()
    found = memories_search(
        project_id=project_id,
        scope=scope,
        query=query,
        top_k=top_k,
        mode=mode,
        depth="facts",
        min_score=min_score,
        filters=filters,
    )
    hits = [item for item in found.items if item.level == "message"]
    pieces: list[_Piece] = []
    if hits:
        around = _neighbour_rows(
            project_id=project_id, scope=scope, filters=filters or MessageFilters(), hits=hits, n=neighbours
        )
        pieces = _candidates(hits, around, _with_summary_sources(project_id, scope, found.items))
    chosen, text, tokens = _fill(pieces, max_tokens)
    return MemoryContext(
        context=text,
        tokens=tokens,
        items=[piece.item for piece in _written_order(chosen)],
        took_ms=round((time.perf_counter() - started) * 1000, 2),
    )


def _with_summary_sources(project_id: str, scope: Scope, items: list[MemoryItem]) -> list[MemoryItem]:
    """`items`, each summary with the ids of the turns it covers (those the scope sees) in its
    metadata's `source_message_ids`, as facts and preferences have theirs."""
    summaries = [
        {
            "id": item.id,
            "conversation_id": item.conversation_id,
            "first_seq": item.metadata.get("first_seq"),
            "last_seq": item.metadata.get("last_seq"),
        }
        for item in items
        if item.level == "summary" and isinstance(item.metadata.get("first_seq"), int)
    ]
    if not summaries:
        return items
    rows = graph.read(
        cypher.SUMMARY_SOURCES.format(scope=scope.visible_where("m")),
        project_id=project_id,
        summaries=summaries,
        **scope.params(),
    )
    sources = {row["id"]: row["sources"] for row in rows}
    return [
        replace(item, metadata={**item.metadata, "source_message_ids": sources.get(item.id, [])})
        if item.level == "summary"
        else item
        for item in items
    ]


def _neighbour_rows(
    *, project_id: str, scope: Scope, filters: MessageFilters, hits: list[MemoryItem], n: int
) -> list[dict[str, Any]]:
    """The neighbouring messages of the hits, nearest first for each hit, best hit first."""
    if n <= 0:
        return []
    rows = graph.read(
        cypher.MESSAGE_NEIGHBOURS.format(scope=scope.visible_where("n") + filters.where("n")),
        project_id=project_id,
        ids=[hit.id for hit in hits],
        neighbours=n,
        **scope.params(),
        **filters.params(),
    )
    rank = {hit.id: i for i, hit in enumerate(hits)}
    rows.sort(key=lambda r: (rank[r["hit_id"]], abs(r["memory"]["seq"] - r["hit_seq"]), r["memory"]["seq"]))
    return [row["memory"] for row in rows]


def _candidates(
    hits: list[MemoryItem], around: list[dict[str, Any]], found: list[MemoryItem]
) -> list[_Piece]:
    """Every memory once, best first: hits, neighbours, the hits' conversations' summaries, facts and
    preferences."""
    pieces = [_turn(_hit_row(hit), "hit") for hit in hits]
    pieces += [_turn(row, "neighbour") for row in around]
    conversations = {hit.conversation_id for hit in hits}
    labels = {piece.group: piece.label for piece in pieces}
    for item in found:
        if item.level == "summary" and item.conversation_id in conversations:
            pieces.append(_summary(item, labels.get(item.conversation_id) or ""))
    pieces += [_known(item) for item in found if item.level in ("fact", "preference")]
    seen: set[str] = set()
    unique = []
    for piece in pieces:
        key = piece.item.id if piece.group is not None else piece.line  # one line per fact said
        if key not in seen:
            seen.add(key)
            unique.append(piece)
    return unique


def _hit_row(hit: MemoryItem) -> dict[str, Any]:
    return {
        "id": hit.id,
        "text": hit.text,
        "role": hit.role,
        "timestamp": hit.timestamp,
        "conversation_id": hit.conversation_id,
        "thread_id": hit.scope.get("thread_id"),
        "author_name": hit.metadata.get("author_name"),
        "seq": hit.metadata.get("seq"),
    }


def _turn(row: dict[str, Any], reason: str) -> _Piece:
    item = ContextItem(
        id=row["id"],
        level="message",
        timestamp=row.get("timestamp"),
        conversation_id=row.get("conversation_id"),
        role=row.get("role"),
        text=row["text"],
        reason=reason,
    )
    line = message_text.row_line(row)
    return _Piece(
        item=item,
        group=row.get("conversation_id") or "",
        label=row.get("thread_id") or row.get("conversation_id") or "",
        order=float(row.get("seq") or 0),
        prefix=line[: len(line) - len(row["text"])],
        body=row["text"],
    )


def _summary(item: MemoryItem, label: str) -> _Piece:
    first = item.metadata.get("first_seq")
    return _Piece(
        item=_context_item(item, "summary"),
        group=item.conversation_id or "",
        label=label or item.scope.get("thread_id") or item.conversation_id or "",
        order=float(first) - 0.5 if isinstance(first, int) else -1.0,  # before the turns it covers
        prefix="Summary: ",
        body=item.text,
    )


def _known(item: MemoryItem) -> _Piece:
    """A fact or preference as a short statement: `user lives in: Lisbon (since 8 May 2023)`."""
    meta = item.metadata
    if item.level == "fact" and meta.get("predicate") and meta.get("object"):
        body = f"{meta.get('subject') or 'user'} {str(meta['predicate']).replace('_', ' ')}: {meta['object']}"
    elif item.level == "preference" and meta.get("value"):
        verb = "dislikes" if meta.get("sentiment") == "dislike" else "likes"
        body = f"user {verb}: {meta['value']}"
    else:
        body = item.text
    since = message_text.day(meta.get("valid_from"))
    return _Piece(
        item=_context_item(item, item.level),
        group=None,
        label="",
        order=0.0,
        prefix="- ",
        body=f"{body} (since {since})" if since else body,
    )


def _context_item(item: MemoryItem, reason: str) -> ContextItem:
    return ContextItem(
        id=item.id,
        level=item.level,
        timestamp=item.timestamp,
        conversation_id=item.conversation_id,
        role=item.role,
        text=item.text,
        reason=reason,
        sources=list(item.metadata.get("source_message_ids") or [])
        if item.level in ("fact", "preference", "summary")
        else [],
    )


# --- the budget ---------------------------------------------------------------------------------------


def _fill(pieces: list[_Piece], max_tokens: int) -> tuple[list[_Piece], str, int]:
    """The pieces that fit, best first, their block and its tokens. Each piece is costed as it is added (its
    line, a heading when it opens a section, a possible `…`), an upper bound of what it adds to the
    block; the block is then counted whole, and the last pieces are dropped while it is over."""
    chosen: list[_Piece] = []
    opened: set[str | None] = set()
    used = 0
    for piece in pieces:
        overhead = _overhead(piece, opened)
        cost = overhead + count_tokens(piece.line + "\n")
        if used + cost > max_tokens:
            if piece.item.reason != "hit":
                continue
            cut = _cut(piece, max_tokens - used - overhead)
            if cut is None:
                continue
            piece, cost = cut, overhead + count_tokens(cut.line + "\n")
        chosen.append(piece)
        opened.add(piece.group)
        used += cost
    while chosen:
        text = _render(chosen)
        tokens = count_tokens(text)
        if tokens <= max_tokens:
            return chosen, text, tokens
        chosen.pop()
    return [], "", 0


def _overhead(piece: _Piece, opened: set[str | None]) -> int:
    """Tokens a piece may add beside its line: a `…` line, a section's heading and blank line."""
    extra = count_tokens(GAP + "\n") if piece.is_turn else 0
    if piece.group in opened:
        return extra
    if piece.group is None:
        return extra + count_tokens("\n\n" + FACTS_HEADING + "\n")
    day = message_text.day(piece.item.timestamp) or "30 September 2000"  # the longest a day is written
    return extra + count_tokens(f"\n\n{_heading(piece.label, day, day)}\n")


def _cut(piece: _Piece, room: int) -> _Piece | None:
    """The piece with its text cut to `room` tokens of line (ending in `…`), or None when too little of
    it would be left."""
    keep = room - count_tokens(piece.prefix + GAP + "\n") - 1  # 1: a token may merge across the cut
    if keep < CUT_MIN_TOKENS:
        return None
    enc = encoding()
    body = enc.decode_bytes(enc.encode(piece.body, disallowed_special=())[:keep])
    text = body.decode("utf-8", errors="ignore").rstrip() + GAP
    return replace(piece, body=text, item=replace(piece.item, text=text))


# --- the block ----------------------------------------------------------------------------------------


def _written_order(pieces: list[_Piece]) -> list[_Piece]:
    """Conversations oldest first, each in its order; then the facts and preferences, best first."""
    groups: dict[str, list[_Piece]] = {}
    for piece in pieces:
        if piece.group is not None:
            groups.setdefault(piece.group, []).append(piece)
    ordered: list[_Piece] = []
    for group in sorted(groups.values(), key=_start):
        ordered += sorted(group, key=lambda p: (p.order, p.item.id))
    return ordered + [piece for piece in pieces if piece.group is None]


def _start(group: list[_Piece]) -> tuple[str, str]:
    turns = [p.item.timestamp or "" for p in group if p.is_turn]
    return (min(turns) if turns else min(p.item.timestamp or "" for p in group)), group[0].group or ""


def _render(pieces: list[_Piece]) -> str:
    sections: list[list[str]] = []
    known: list[str] = []
    current: str | None = None
    previous = 0.0
    for piece in _written_order(pieces):
        if piece.group is None:
            known.append(piece.line)
            continue
        if piece.group != current:
            stamps = sorted(p.item.timestamp or "" for p in pieces if p.group == piece.group and p.is_turn)
            days = [message_text.day(stamp) for stamp in stamps if stamp]
            sections.append([_heading(piece.label, days[0] if days else "", days[-1] if days else "")])
            current, previous = piece.group, -1.0
        if piece.is_turn:
            if previous >= 0 and piece.order > previous + 1:
                sections[-1].append(GAP)
            previous = piece.order
        sections[-1].append(piece.line)
    if known:
        sections.append([FACTS_HEADING, *known])
    return "\n\n".join("\n".join(lines) for lines in sections)


def _heading(label: str, first: str, last: str) -> str:
    days = first if first == last else f"{first} – {last}"
    name = f"Conversation {label}" if label else "Conversation"
    return f"{name} ({days}):" if days else f"{name}:"
