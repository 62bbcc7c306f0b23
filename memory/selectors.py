"""Reads of the memory app: search across the hierarchy, list, get.

Search modes (seed 000's rules): `vector` (cosine to the query embedding), `fulltext` (BM25),
`hybrid` (both, fused as for documents: retrieval/search_core.py), `recency` (newest first; the mode when the
query is blank). Vector search is tenant-correct as for chunks: scopes up to MEMORY_EXACT_SCAN_MAX
memories are scanned exactly, larger ones go through the shared index, over-fetched by the
database-to-scope ratio and re-checked, falling back to the exact scan when too few survive
(retrieval/search_core.py, as for chunks).
"""

from __future__ import annotations

import base64
import copy
import json
import math
import time
import unicodedata
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from neo4j.exceptions import ClientError

from core import graph
from core.embeddings import embed_soon, get_embedder
from core.errors import InvalidInput, NotFound
from memory import cypher
from memory import metadata as message_metadata
from memory import text as message_text
from memory.dto import MemoryItem, MemorySearchResult, MessageFilters
from memory.indexes import ensure_memory_indexes, filtered_vector_index
from memory.scope import SCOPE_KEYS, Scope, lucene_filter
from memory.services import normalise_timestamp
from memory.when import resolve as when_resolve
from retrieval import fusion, lucene, search_core
from retrieval.dto import Candidate

Hits = list[Candidate]
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memory-search")


class MessageSearch:
    """One search: the query, its vector (computed once, when needed) and per-stage timings."""

    def __init__(
        self,
        *,
        project_id: str,
        scope: Scope,
        query: str,
        vector: list[float] | Future[list[float]] | None = None,
        vector_floor: float | None = None,
        text_floor: float | None = None,
        filters: MessageFilters | None = None,
    ) -> None:
        self.project_id = project_id
        self.filters = filters or MessageFilters()
        # relevance floors: hits scoring below are not returned (a query about nothing gets nothing)
        self.vector_floor = settings.MEMORY_MIN_SCORE_VECTOR if vector_floor is None else vector_floor
        # the nearest message must reach this for a vector or hybrid search to return anything
        self.gate = settings.MEMORY_MIN_SCORE_QUERY if vector_floor is None else vector_floor
        self.off_topic = False
        self.every_word_found = False
        self.text_floor = settings.MEMORY_MIN_SCORE_FULLTEXT if text_floor is None else text_floor
        self.scope = scope
        self.query = unicodedata.normalize("NFC", query)  # as stored text is (memory.services._kept)
        self.timings_ms: dict[str, float] = {}
        # the query's embedding, when the caller has it already, or its Future (embed_early)
        self._vector: list[float] | Future[list[float]] | None = vector
        # the one speaker whose messages this search ranks (narrowed_to), else None
        self.speaker: str | None = None
        # messages of the scope (filters applied) in all and per author, once named_speaker has read them
        self._size: int | None = None
        self._per_author: dict[str, int] = {}
        # messages read while ranking (asking_last), by id, as messages_hydrated returns them
        self._rows: dict[str, dict[str, Any]] = {}

    def vector(self) -> list[float]:
        """The query's embedding: computed here, or taken from the Future `embed_early` started."""
        if not isinstance(self._vector, list):
            started = time.perf_counter()
            pending = self._vector
            self._vector = pending.result() if pending is not None else get_embedder().embed_one(self.query)
            self.timings_ms["embedding"] = (time.perf_counter() - started) * 1000
        return self._vector

    def embed_early(self) -> None:
        """Start embedding the query on a worker thread (it takes a core while the database reads)."""
        if self._vector is None:
            self._vector = embed_soon(self.query)

    def _where(self, var: str) -> str:
        """The messages this search may return: the scope's visible ones that pass the filters (and,
        narrowed to a speaker, that speaker's)."""
        speaker = f" AND {var}.author_name = $speaker" if self.speaker else ""
        return self.scope.visible_where(var) + self.filters.where(var) + speaker

    def _params(self) -> dict[str, Any]:
        return {**self.scope.params(), **self.filters.params(), "speaker": self.speaker}

    def _timed(self, name: str, query: str, **params: Any) -> list[dict[str, Any]]:
        started = time.perf_counter()
        rows = graph.read(query, project_id=self.project_id, **params)
        self.timings_ms[name] = self.timings_ms.get(name, 0.0) + (time.perf_counter() - started) * 1000
        return rows

    # --- messages ---

    def vector_memories(self, limit: int, *, where: str | None = None, **extra: Any) -> Hits:
        """The scope's messages nearest the query, above the vector floor; `where` (fixed text over
        `m`, values in `extra`) replaces the scope's visibility condition when given. Without `where`,
        nothing when even the nearest scores below the relevance gate (MEMORY_MIN_SCORE_QUERY, or the
        request's min_score): the query is about nothing stored."""
        nearest = self._nearest(limit, where=where, **extra)
        # narrowed to a speaker, the whole scope's search has passed the gate already
        if where is None and self.speaker is None and (not nearest or nearest[0].score < self.gate):
            self.off_topic = True
            return []
        return _floored(nearest, self.vector_floor)

    def _scope_size(self, where: str | None, params: dict[str, Any]) -> int:
        """How many messages the search ranks: known from named_speaker's read for the scope itself."""
        if where is None and self._size is not None:
            return self._size if self.speaker is None else self._per_author.get(self.speaker, 0)
        query = cypher.SCOPE_SIZE.format(scope=where or self._where("m"))
        return int(self._timed("scope_size", query, **params)[0]["size"])

    def _nearest(self, limit: int, *, where: str | None = None, **extra: Any) -> Hits:
        params = {**self._params(), **extra}
        size = self._scope_size(where, params)
        where = where or self._where("m")
        if size == 0:
            return []
        vector = self.vector()

        def exact() -> Hits:
            query = cypher.VECTOR_EXACT.format(scope=where)
            return _hits(self._timed("vector", query, vector=vector, limit=limit, **params))

        if size <= settings.MEMORY_EXACT_SCAN_MAX:
            return exact()

        def index_query(fetch: int) -> Hits:
            rows = self._timed(
                "vector_index",  # approximate (HNSW), over-fetched and filtered to the scope
                cypher.VECTOR_INDEX_QUERY.format(scope=where),
                index=cypher.VECTOR_INDEX,
                fetch=fetch,
                vector=vector,
                limit=limit,
                **params,
            )
            return _hits(rows)

        total = graph.read("MATCH (m:Memory) RETURN count(m) AS n")[0]["n"]
        try:
            return search_core.over_fetched(
                index_query, exact, limit=limit, population=max(total, size), size=size
            )
        except ClientError:  # the index is not online (yet): the exact scan is always right
            return exact()

    def user_vector_memories(self, limit: int, *, where: str, **extra: Any) -> Hits:
        """The scope's user's messages nearest the query, above the vector floor, among those `where`
        keeps (fixed text over
        `m`, values in `extra`). The vector index narrows its search to the project's user itself
        (Neo4j 2026.01+): its RETRIEVAL_INDEX_MIN_CANDIDATES nearest are kept by `where` and scored
        exactly, 4x more while too few survive and the user has more, and the scope is scanned exactly
        past RETRIEVAL_MAX_INDEX_CANDIDATES, on an older server or while the index populates."""

        def exact() -> Hits:
            return self.vector_memories(limit, where=where, **extra)

        if not filtered_vector_index():
            return exact()
        params = {**self.scope.params(), **extra}
        query = cypher.USER_VECTOR_SEARCH.format(scope=where)
        vector = self.vector()
        fetch = max(settings.RETRIEVAL_INDEX_MIN_CANDIDATES, limit)
        while True:
            try:
                row = self._timed("vector_index", query, vector=vector, fetch=fetch, **params)[0]
            except ClientError:  # the index is populating: the exact scan is always right
                return exact()
            hits = sorted(_hits(row["hits"]), key=lambda h: (-h.score, h.chunk_id))
            if len(hits) >= limit or row["fetched"] < fetch:
                return _floored(hits[:limit], self.vector_floor)
            if fetch >= settings.RETRIEVAL_MAX_INDEX_CANDIDATES:
                return exact()
            fetch = min(settings.RETRIEVAL_MAX_INDEX_CANDIDATES, fetch * 4)

    def fulltext_memories(self, limit: int, *, context: bool = False) -> Hits:
        """The scope's messages by their indexed words (memory.text: speaker, day and text, the
        query split by the same tokenizer), above the fulltext floor. With `context` (hybrid's ranking)
        each hit's next message also gets MEMORY_CONTEXT_WEIGHT of its score: a reply is found by the
        words of what it answers. Without it only messages holding a query word are returned."""
        return self.fulltext_pair(limit, None, context=context)[0]

    def fulltext_pair(self, limit: int, speaker: str | None, *, context: bool = False) -> tuple[Hits, Hits]:
        """fulltext_memories, and from the same matches (twice as many when a speaker is given) the
        speaker's messages ranked the same way: every message is matched, so another speaker's
        question still finds the speaker's reply."""
        terms = lucene.query_terms(
            " ".join(message_text.words(self.query)), max_terms=settings.RETRIEVAL_MAX_QUERY_TERMS
        )
        if not terms:
            return [], []
        matched = limit * 2 if speaker else limit  # about half the matches are the speaker's
        rows = self._timed(
            "fulltext",
            cypher.MESSAGE_FULLTEXT.format(scope=self._where("m"), next_scope=self._where("n")),
            index=cypher.FULLTEXT_INDEX,
            lucene=self._lucene(terms, self.scope, field="search_text"),
            fetch=matched * 2,
            limit=matched,
            **self._params(),
        )
        ranked = rows[:limit]  # ordered by score: the matches of a search without a speaker
        # a message holding every content word of the query is evidence of relevance the vector gate lacks
        self.every_word_found = any(
            message_text.holds_every_content_word(terms, row["words"]) for row in ranked if row["words"]
        )
        own = self._text_scores(rows, limit, context, speaker) if speaker else []
        return self._text_scores(ranked, limit, context, None), own

    def _text_scores(
        self, rows: list[dict[str, Any]], limit: int, context: bool, speaker: str | None
    ) -> Hits:
        scores: dict[str, float] = {}
        weight = settings.MEMORY_CONTEXT_WEIGHT if context else 0.0
        for row in rows:
            if speaker is None or row["author"] == speaker:
                scores[row["id"]] = scores.get(row["id"], 0.0) + row["score"]
            credited = row["next_id"] is not None and (speaker is None or row["next_author"] == speaker)
            if credited and weight > 0:
                scores[row["next_id"]] = scores.get(row["next_id"], 0.0) + weight * row["score"]
        return _floored(fusion.ordered(scores)[:limit], self.text_floor)

    def vector_pair(self, limit: int, speaker: str | None) -> tuple[Hits, Hits]:
        """vector_memories, and the speaker's messages nearest the query (not gated again: the whole
        scope's search decides relevance), from one exact scan when the scope is scanned exactly.
        The first MEMORY_SENTENCE_CANDIDATES of each are scored by their sentences too
        (sentence_rescored) before the first `limit` are kept."""
        if settings.MEMORY_SENTENCE_WEIGHT <= 0:
            return self._vector_pair(limit, speaker)
        ranked, own = self._vector_pair(max(limit, settings.MEMORY_SENTENCE_CANDIDATES), speaker)
        ranked, own = self.sentence_rescored(ranked, own)
        return ranked[:limit], own[:limit]

    def sentence_rescored(self, *lists: Hits) -> tuple[Hits, ...]:
        """Each list re-ordered once each message with sentence vectors (memory.vectors) scores its
        mean's score plus MEMORY_SENTENCE_WEIGHT times how far its best sentence scores above that:
        a long turn is found by the one sentence a question is about. The gate and the floor have
        judged the mean's scores already; a message's score only rises."""
        ids = list({h.chunk_id for hits in lists for h in hits})
        if not ids:
            return lists
        rows = self._timed(
            "sentences",
            cypher.SENTENCE_SCORES,
            ids=ids,
            vector=self.vector(),
            dims=int(settings.EMBEDDINGS_DIMENSIONS),
        )
        best = {row["id"]: max(row["scores"]) for row in rows if row["scores"]}
        if not best:
            return lists
        weight = settings.MEMORY_SENTENCE_WEIGHT

        def rescored(hits: Hits) -> Hits:
            scores = {
                h.chunk_id: h.score + weight * max(0.0, best.get(h.chunk_id, h.score) - h.score) for h in hits
            }
            return fusion.ordered(scores)

        return tuple(rescored(hits) for hits in lists)

    def _vector_pair(self, limit: int, speaker: str | None) -> tuple[Hits, Hits]:
        if speaker is None:
            return self.vector_memories(limit), []
        if (self._size or 0) > settings.MEMORY_EXACT_SCAN_MAX:
            ranked = self.vector_memories(limit)
            return ranked, [] if self.off_topic else self.narrowed_to(speaker).vector_memories(limit)
        row = self._timed(
            "vector",
            cypher.VECTOR_EXACT_SPEAKER.format(scope=self._where("m")),
            vector=self.vector(),
            limit=limit,
            **{**self._params(), "speaker": speaker},
        )[0]
        nearest = _hits(row["hits"])
        if not nearest or nearest[0].score < self.gate:
            self.off_topic = True
            return [], []
        return _floored(nearest, self.vector_floor), _floored(_hits(row["own"]), self.vector_floor)

    def _lucene(self, terms: list[str], scope: Scope, *, field: str = "text") -> str:
        query = lucene.chunk_query(terms, project_id=None, field=field)
        return f"{query} AND {lucene_filter(self.project_id, scope)}"

    def _fulltext(self, index: str, scope: Scope, extra: str, limit: int, **params: Any) -> Hits:
        terms = lucene.query_terms(self.query, max_terms=settings.RETRIEVAL_MAX_QUERY_TERMS)
        if not terms:
            return []
        expression = self._lucene(terms, scope)
        query = cypher.FULLTEXT.format(scope=scope.visible_where("m"), extra=extra)
        # the scope is inside the Lucene query, so the first hits are the scope's: no over-fetch
        rows = self._timed(
            "fulltext",
            query,
            index=index,
            lucene=expression,
            fetch=limit * 2,
            limit=limit,
            **scope.params(),
            **params,
        )
        return _floored(_hits(rows), self.text_floor)

    def recent_memories(self, limit: int) -> Hits:
        rows = self._timed(
            "recency",
            cypher.RECENT.format(scope=self._where("m")),
            limit=limit,
            **self._params(),
        )
        # newest first; a rank-based score keeps the order meaningful next to other levels
        return [Candidate(r["id"], 1.0 / (1 + i)) for i, r in enumerate(rows)]

    def memories(self, mode: str, limit: int) -> Hits:
        """The scope's messages ranked by `mode`. When the query names one of the scope's speakers
        (`named_speaker`), that speaker's messages are ranked among themselves and come with their own
        scores; the others' scores are scaled by MEMORY_SPEAKER_OTHER_WEIGHT (speaker_first). Messages
        that mostly ask then move down (asking_last)."""
        if mode == "recency":
            return self.recent_memories(limit)
        if settings.MEMORY_ASKING_WEIGHT >= 1:
            return self.ranked(mode, limit)[:limit]
        # the first MEMORY_HYBRID_CANDIDATES of any mode, so a message that asks has others to give way to
        depth = max(limit, settings.MEMORY_HYBRID_CANDIDATES)
        return self.asking_last(self.ranked(mode, depth)[:depth], limit)

    def asking_last(self, ranked: Hits, limit: int) -> Hits:
        """The first `limit` of `ranked` once the score of each message that mostly asks (a question
        and little stated beside it: memory.text.asks) is multiplied by MEMORY_ASKING_WEIGHT. On
        locomo-dev, 12 % of the turns that end in a question are some question's evidence, 28 % of the
        others (docs/decisions.md, "Memory: turns that ask")."""
        if not ranked:
            return ranked
        # read whole, as results are: the `limit` kept need no second read (hydrated)
        self._rows = _by_id(self._timed("asking", cypher.MEMORIES_HYDRATE, ids=[h.chunk_id for h in ranked]))
        asking = {i for i, row in self._rows.items() if message_text.asks(row["text"] or "")}
        weight = settings.MEMORY_ASKING_WEIGHT
        scores = {h.chunk_id: h.score * weight if h.chunk_id in asking else h.score for h in ranked}
        return fusion.ordered(scores)[:limit]

    def hydrated(self, hits: Hits) -> list[tuple[Candidate, dict[str, Any]]]:
        """messages_hydrated for this search's hits, reading only the messages ranking did not."""
        return messages_hydrated(project_id=self.project_id, hits=hits, known=self._rows)

    def ranked(self, mode: str, limit: int) -> Hits:
        """The scope's messages ranked by `mode` (not recency), at most `limit` (hybrid and graph may
        return more)."""
        if mode != "fulltext":
            self.embed_early()  # while the scope's speakers are read
        speaker = self.named_speaker()
        if mode == "fulltext":
            ranked, own = self.fulltext_pair(limit, speaker)
            return speaker_first(own, ranked)[:limit] if speaker else ranked
        if mode == "vector":
            ranked, own = self.vector_pair(limit, speaker)
            return speaker_first(own, ranked)[:limit] if speaker and ranked else ranked
        depth = max(limit, settings.MEMORY_HYBRID_CANDIDATES)
        # the fulltext query runs while the query is embedded and the vectors are scanned
        text_future = _pool.submit(self.fulltext_pair, depth, speaker, context=True)
        vector_hits, own_vector_hits = self.vector_pair(depth, speaker)
        text_hits, own_text_hits = text_future.result()
        if self.off_topic and not self.every_word_found:
            return []  # nothing stored is near the query, and no message holds all of its words
        ranked = fused(vector_hits, text_hits)
        if speaker:
            ranked = speaker_first(fused(own_vector_hits, own_text_hits), ranked)
        if mode == "graph":
            ranked = self.expanded(ranked)
        return ranked

    def expanded(self, ranked: Hits) -> Hits:
        """Graph mode: `ranked` (hybrid's) spread through mentions. Each of the first MEMORY_GRAPH_SEEDS
        hits passes its score, times the mention's rarity (log of scope size over holders), to every
        other scope message holding a mention it holds ("home country", "Sweden": memory.text.
        mention_keys), for mentions held by two to MEMORY_GRAPH_MAX_SHARE of the scope's messages
        (a speaker's own name is too common to link anything). The spread, scaled to its best,
        is added with weight MEMORY_GRAPH_WEIGHT: turns of other sessions about the same thing rise."""
        seeds = ranked[: settings.MEMORY_GRAPH_SEEDS]
        if not seeds:
            return ranked
        row = self._timed(
            "mentions",
            cypher.MENTION_LINKS.format(scope=self._where("m")),
            ids=[h.chunk_id for h in seeds],
            **self._params(),
        )[0]
        keys_of = {seed["id"]: seed["held"] for seed in row["seeds"]}
        wanted = {key for held in keys_of.values() for key in held}
        holders: dict[str, list[str]] = defaultdict(list)
        for memory_id, held in row["keyed"]:
            for key in wanted.intersection(held or ()):
                holders[key].append(memory_id)
        size = len(row["keyed"])
        most = max(2.0, settings.MEMORY_GRAPH_MAX_SHARE * size)
        spread: dict[str, float] = defaultdict(float)
        for seed in seeds:
            for key in keys_of.get(seed.chunk_id, []):
                held_by = holders.get(key, [])
                if not 2 <= len(held_by) <= most:
                    continue
                rarity = math.log(size / len(held_by))
                for memory_id in held_by:
                    if memory_id != seed.chunk_id:
                        spread[memory_id] += seed.score * rarity
        best = max(spread.values(), default=0.0)
        if best <= 0:
            return ranked
        scores = {h.chunk_id: h.score for h in ranked}
        for memory_id, value in spread.items():
            scores[memory_id] = scores.get(memory_id, 0.0) + settings.MEMORY_GRAPH_WEIGHT * value / best
        return fusion.ordered(scores)

    def named_speaker(self) -> str | None:
        """The one author of the scope's messages whom the query names (a word of the author's name
        among the query's words, "What did Caroline say" → "Caroline"), when the scope's messages have
        two or more authors and the request filters on none; else None. Questions about what one
        person said are answered by that person's messages (docs/decisions.md, "Memory: the speaker a
        question names"). The same read gives the scope's size, which the vector search then needs
        not read again."""
        if self.filters.author is not None or self.speaker or settings.MEMORY_SPEAKER_OTHER_WEIGHT >= 1:
            return None
        row = self._timed(
            "speakers",
            cypher.SCOPE_SPEAKERS.format(scope=self._where("m")),
            limit=settings.MEMORY_SPEAKER_MAX_AUTHORS + 1,
            **self._params(),
        )[0]
        self._size = int(row["size"])
        self._per_author = {a["name"]: int(a["messages"]) for a in row["authors"] if a["name"] is not None}
        asked = set(message_text.words(self.query)) - message_text.FUNCTION_WORDS
        if not asked or not 2 <= len(self._per_author) <= settings.MEMORY_SPEAKER_MAX_AUTHORS:
            return None
        named = [name for name in self._per_author if asked & set(message_text.words(name))]
        return named[0] if len(named) == 1 else None

    def narrowed_to(self, author: str) -> MessageSearch:
        """This search ranking `author`'s messages only: the same query, vector, floors and timings."""
        narrowed = copy.copy(self)
        narrowed.speaker = author
        return narrowed

    # --- summaries, facts, preferences ---

    def level(self, label: str, mode: str, scope: Scope, limit: int, extra: str = "", **params: Any) -> Hits:
        """Nodes of `label` in `scope` ranked for the query; `extra` is a fixed `AND n.…` condition.
        Graph mode ranks them as hybrid (mentions link messages only)."""
        mode = "hybrid" if mode == "graph" else mode
        where = scope.visible_where("n")
        if mode == "recency":
            rows = self._timed(
                label,
                cypher.LEVEL_RECENT.format(label=label, scope=where, extra=extra),
                limit=limit,
                **scope.params(),
                **params,
            )
            return [Candidate(r["id"], 1.0 / (1 + i)) for i, r in enumerate(rows)]
        vector_hits: Hits = []
        text_hits: Hits = []
        if mode in ("vector", "hybrid"):
            rows = self._timed(
                label,
                cypher.LEVEL_VECTOR.format(label=label, scope=where, extra=extra),
                vector=self.vector(),
                limit=limit if mode == "vector" else max(limit, settings.MEMORY_HYBRID_CANDIDATES),
                **scope.params(),
                **params,
            )
            vector_hits = _floored(_hits(rows), self.vector_floor)
        if mode in ("fulltext", "hybrid"):
            text_hits = self._fulltext(
                cypher.LEVEL_FULLTEXT_INDEX,
                scope,
                f"AND m:{label} " + extra.replace("n.", "m."),
                limit * 3,
                **params,
            )
        if mode == "vector":
            return vector_hits
        if mode == "fulltext":
            return text_hits[:limit]
        return fused(vector_hits, text_hits)[:limit]


def fused(by_vector: Hits, by_text: Hits) -> Hits:
    """Hybrid memory search's fusion: each side min-max scaled, the vector side weighing
    MEMORY_HYBRID_ALPHA and the fulltext side the rest (chosen on locomo-dev by bench/locomo.py)."""
    alpha = settings.MEMORY_HYBRID_ALPHA
    return fusion.linear([by_vector, by_text], weights=[alpha, 1 - alpha], normalise="minmax")


def speaker_first(own: Hits, ranked: Hits) -> Hits:
    """`own` (the named speaker's messages, ranked among themselves) with their scores, and the rest of
    `ranked` with theirs scaled by MEMORY_SPEAKER_OTHER_WEIGHT; best first."""
    weight = settings.MEMORY_SPEAKER_OTHER_WEIGHT
    scores = {h.chunk_id: h.score for h in own}
    for hit in ranked:
        if hit.chunk_id not in scores:
            scores[hit.chunk_id] = hit.score * weight
    return fusion.ordered(scores)


def message_filters(
    *,
    since: str | None = None,
    until: str | None = None,
    when: str | None = None,
    reference_time: str | None = None,
    roles: list[str] | None = None,
    author: str | None = None,
    as_of: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> MessageFilters:
    """A search's filters from the request: `since` (the start of its span), `until` (the end of its
    span, exclusive) and `when` (its whole span) are ISO-8601 or time expressions resolved against
    `reference_time` (default now; memory.when); several narrow each other. `as_of` is an instant, or
    an expression's last instant ("May 2023": the end of May). `metadata`: keys and the value each
    must have (memory.metadata.filter_check). 400 for a time that does not parse, an empty window, a
    role outside MEMORY_ROLES or a metadata filter that is not one."""
    reference = datetime.now(UTC)
    if reference_time is not None:
        reference = datetime.fromisoformat(normalise_timestamp(reference_time).replace("Z", "+00:00"))
    starts, ends = [], []
    for field, value in (("since", since), ("until", until), ("when", when)):
        if value is None:
            continue
        start, end = when_resolve(value, reference=reference, field=field)
        if field == "when" and start == end:  # an instant: its day
            start, end = when_resolve(value[:10], reference=reference, field=field)
        if field in ("since", "when"):
            starts.append(start)
        if field in ("until", "when"):
            ends.append(end)
    first, last = (max(starts) if starts else None), (min(ends) if ends else None)
    if first is not None and last is not None and first >= last:
        raise InvalidInput(
            "the time filters leave no time: since/when start at or after until/when end",
            details={"field": "until"},
        )
    unknown = sorted(set(roles or ()) - set(settings.MEMORY_ROLES))
    if unknown:
        raise InvalidInput(
            f"roles {unknown} are not roles this platform stores ({', '.join(settings.MEMORY_ROLES)})",
            details={"field": "roles", "allowed": list(settings.MEMORY_ROLES)},
        )
    moment = None
    if as_of is not None:
        start, end = when_resolve(as_of, reference=reference, field="as_of")
        moment = start if start == end else end - timedelta(microseconds=1)
    return MessageFilters(
        since=_stamp(first),
        until=_stamp(last),
        roles=tuple(roles or ()),
        author=author,
        as_of=_stamp(moment),
        metadata=message_metadata.filter_check(metadata) if metadata is not None else (),
    )


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else normalise_timestamp(moment.isoformat())


def _hits(rows: list[dict[str, Any]]) -> Hits:
    return [Candidate(str(r["id"]), float(r["score"])) for r in rows]


def _floored(hits: Hits, floor: float) -> Hits:
    return [h for h in hits if h.score >= floor]


def _scope_of(row: dict[str, Any]) -> dict[str, str | None]:
    return {key: row.get(key) for key in SCOPE_KEYS}


def _owner_scope(scope: Scope) -> Scope:
    """Facts, preferences and the profile belong to the user, not to a thread: when the scope names a
    user they are looked up by application, agent and user; otherwise by the whole scope."""
    if scope.user_id is None:
        return scope
    return Scope(application_id=scope.application_id, agent_id=scope.agent_id, user_id=scope.user_id)


def _with_fields(memory: dict[str, Any]) -> dict[str, Any]:
    """A message as a read returns it: its metadata pairs (cypher.METADATA_PAIRS) become `fields`."""
    pairs = memory.pop("metadata_pairs", None)
    return {**memory, "fields": message_metadata.from_pairs(pairs)}


def _by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """MEMORIES_HYDRATE's rows: each message with its properties and `fields`, by id."""
    return {r["memory"]["id"]: _with_fields(r["memory"]) for r in rows}


def messages_hydrated(
    *, project_id: str, hits: Hits, known: dict[str, dict[str, Any]] | None = None
) -> list[tuple[Candidate, dict[str, Any]]]:
    """Each hit with its message's properties and `fields` (its caller's metadata), in the hits'
    order; hits whose message is gone are left out. Messages in `known` (read by the same search,
    MessageSearch.hydrated) are not read again."""
    known = known or {}
    wanted = [h.chunk_id for h in hits if h.chunk_id not in known]
    read = graph.read(cypher.MEMORIES_HYDRATE, project_id=project_id, ids=wanted) if wanted else []
    by_id = {**known, **_by_id(read)}
    return [(hit, by_id[hit.chunk_id]) for hit in hits if hit.chunk_id in by_id]


def _memory_items(search: MessageSearch, hits: Hits) -> list[MemoryItem]:
    items = []
    for hit, row in search.hydrated(hits):
        items.append(
            MemoryItem(
                id=row["id"],
                level="message",
                text=row["text"],
                score=round(hit.score, 6),
                timestamp=row["timestamp"],
                scope=_scope_of(row),
                role=row["role"],
                conversation_id=row["conversation_id"],
                metadata={k: row[k] for k in ("message_id", "author_name", "seq") if row.get(k) is not None},
                fields=row["fields"],
            )
        )
    return items


_LEVEL_OF = {"ConversationSummary": "summary", "Fact": "fact", "Preference": "preference"}
_LEVEL_METADATA = {
    "summary": ("first_seq", "last_seq", "mode"),
    "fact": (
        "subject",
        "predicate",
        "object",
        "confidence",
        "valid_from",
        "valid_until",
        "superseded_by",
        "mode",
        "source_message_ids",
    ),
    "preference": (
        "category",
        "value",
        "sentiment",
        "valid_from",
        "valid_until",
        "superseded_by",
        "mode",
        "source_message_ids",
    ),
}


def _level_items(project_id: str, hits: Hits) -> list[MemoryItem]:
    if not hits:
        return []
    rows = graph.read(cypher.LEVEL_HYDRATE, project_id=project_id, ids=[h.chunk_id for h in hits])
    by_id = {r["node"]["id"]: r for r in rows}
    items = []
    for hit in hits:
        row = by_id.get(hit.chunk_id)
        if row is None:
            continue
        node = row["node"]
        level = next(_LEVEL_OF[label] for label in row["labels"] if label in _LEVEL_OF)
        items.append(
            MemoryItem(
                id=node["id"],
                level=level,
                text=node["text"] or "",
                score=round(hit.score, 6),
                timestamp=node.get("created_at") or node.get("valid_from"),
                scope=_scope_of(node),
                conversation_id=node.get("conversation_id"),
                metadata={k: node[k] for k in _LEVEL_METADATA[level] if node.get(k) is not None},
            )
        )
    return items


def _profile_item(facts: list[MemoryItem], preferences: list[MemoryItem], scope: Scope) -> MemoryItem | None:
    if scope.user_id is None or not (facts or preferences):
        return None
    likes = sorted({p.metadata["value"] for p in preferences if p.metadata.get("sentiment") == "like"})
    dislikes = sorted({p.metadata["value"] for p in preferences if p.metadata.get("sentiment") == "dislike"})
    parts = []
    if likes:
        parts.append("likes: " + ", ".join(likes))
    if dislikes:
        parts.append("dislikes: " + ", ".join(dislikes))
    for fact in facts:
        if fact.metadata.get("subject") == "user":
            parts.append(f"{fact.metadata.get('predicate')}: {fact.metadata.get('object')}")
    return MemoryItem(
        id=f"profile:{scope.user_id}",
        level="profile",
        text="; ".join(parts),
        score=1.0,
        timestamp=None,
        scope={
            "application_id": scope.application_id,
            "agent_id": scope.agent_id,
            "user_id": scope.user_id,
            "thread_id": None,
        },
    )


def _statements(search: MessageSearch, scope: Scope, mode: str, top_k: int) -> list[MemoryItem]:
    """The owner's facts and preferences ranked for the query (current ones, or with `as_of` those
    valid then), and the profile item they make."""
    owner = _owner_scope(scope)
    valid, as_of = search.filters.valid_where("n"), search.filters.as_of
    project_id = search.project_id
    facts = _level_items(project_id, search.level("Fact", mode, owner, top_k, valid, filter_as_of=as_of))
    preferences = _level_items(
        project_id, search.level("Preference", mode, owner, top_k, valid, filter_as_of=as_of)
    )
    profile = _profile_item(facts, preferences, owner)
    return facts + preferences + ([profile] if profile is not None else [])


def memories_search(
    *,
    project_id: str,
    scope: Scope,
    query: str,
    top_k: int,
    mode: str | None,
    depth: str,
    min_score: float | None = None,
    filters: MessageFilters | None = None,
    vector: list[float] | Future[list[float]] | None = None,
) -> MemorySearchResult:
    """Memories of the scope ranked for `query` (`vector`: its embedding, or the Future of one, when
    the caller has it already); with `depth` "summaries" also the conversation
    summaries (those of the hits' conversations first), with "facts" also the owner's current facts,
    preferences and profile. Items are grouped by level in that order, best first within a level.

    Hits below the mode's relevance floor are not returned: MEMORY_MIN_SCORE_VECTOR for vector scores,
    MEMORY_MIN_SCORE_FULLTEXT for Lucene scores, both sides before hybrid fuses them. `min_score`
    replaces the floor of the asked mode (for hybrid, of its vector side). `filters` (time, role,
    author, as_of) apply to messages; facts and preferences follow only `as_of` (those valid then, else
    the current ones); summaries are not filtered."""
    scope.require()
    started = time.perf_counter()
    if not query.strip():
        if mode not in (None, "recency"):
            raise InvalidInput(
                f"mode {mode} needs a query; leave mode out (or use recency) to list recent memories"
            )
        mode = "recency"
    mode = mode or "hybrid"
    ensure_memory_indexes()
    search = MessageSearch(
        project_id=project_id,
        scope=scope,
        query=query,
        vector_floor=min_score if mode in ("vector", "hybrid", "graph") else None,
        text_floor=min_score if mode == "fulltext" else None,
        filters=filters,
        vector=vector,
    )
    hits = search.memories(mode, top_k)
    items = _memory_items(search, hits)
    if depth in ("summaries", "facts"):
        # walking up from the hits: their conversations' summaries first, ranked for the query (or
        # newest first when the query does not reach them), then other relevant summaries
        conversation_ids = sorted({i.conversation_id for i in items if i.conversation_id})
        walked: Hits = []
        if conversation_ids:
            walked = search.level(
                "ConversationSummary",
                mode,
                scope,
                top_k,
                "AND n.conversation_id IN $conversation_ids",
                conversation_ids=conversation_ids,
            )
            seen = {h.chunk_id for h in walked}
            rows = graph.read(
                cypher.SUMMARIES_OF_CONVERSATIONS, project_id=project_id, conversation_ids=conversation_ids
            )
            walked += [Candidate(r["id"], 0.0) for r in rows if r["id"] not in seen]
        seen = {h.chunk_id for h in walked}
        others = [
            h for h in search.level("ConversationSummary", mode, scope, top_k) if h.chunk_id not in seen
        ]
        items += _level_items(project_id, (walked + others)[:top_k])
    if depth == "facts":
        items += _statements(search, scope, mode, top_k)
    return MemorySearchResult(
        items=items,
        mode=mode,
        depth=depth,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
        timings_ms={k: round(v, 2) for k, v in search.timings_ms.items()},
    )


# --- list / get -------------------------------------------------------------------------------------------


def _cursor_encode(timestamp: str, memory_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([timestamp, memory_id]).encode()).decode()


def _cursor_decode(cursor: str) -> tuple[str, str]:
    try:
        timestamp, memory_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not isinstance(timestamp, str) or not isinstance(memory_id, str):
            raise ValueError
        return timestamp, memory_id
    except (ValueError, TypeError) as exc:
        raise InvalidInput("cursor is not one this API returned", details={"field": "cursor"}) from exc


def memories_list(
    *, project_id: str, scope: Scope, limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """Newest first, `limit` per page; the cursor continues after the last item of a page."""
    scope.require()
    after_ts, after_id = _cursor_decode(cursor) if cursor else (None, None)
    rows = graph.read(
        cypher.LIST.format(scope=scope.visible_where("m")),
        project_id=project_id,
        after_ts=after_ts,
        after_id=after_id,
        limit=limit + 1,
        **scope.params(),
    )
    page = [_with_fields(r["memory"]) for r in rows[:limit]]
    next_cursor = _cursor_encode(page[-1]["timestamp"], page[-1]["id"]) if len(rows) > limit else None
    return page, next_cursor


def memory_get(*, project_id: str, memory_id: str) -> dict[str, Any]:
    rows = graph.read(cypher.GET, project_id=project_id, id=memory_id)
    if not rows:
        raise NotFound("no such memory in this project")
    row = rows[0]
    return {
        **_with_fields(row["memory"]),
        "derived_ids": row["derived_ids"],
        "entities": row["entities"],
        "references": sorted(row["references"], key=lambda r: r["document_id"]),
    }
