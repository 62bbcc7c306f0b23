"""The two ways DRIFT thinks: with an LLM (seed 002's prompts, `mode: llm`) or extractively without
one (DESIGN.md section 4, `mode: extractive`). Both answer the same four steps of the pipeline:
expand the query, prime on communities, answer a follow-up from its context, aggregate."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from core.llm.client import LLMInvalidOutput, chat, chat_json
from core.llm.usage import usage_meter
from retrieval.drift import citations, prompts
from retrieval.drift.dto import (
    AggregatorResponse,
    ChunkInfo,
    Citation,
    Community,
    Followup,
    FollowupContext,
    FollowupResult,
    LocalExecutorResponse,
    PrimerResponse,
)
from retrieval.lucene import query_terms
from retrieval.sentences import sentences as _sentences
from retrieval.sentences import stem as _stem
from retrieval.sentences import terms as _terms

logger = logging.getLogger("retrieval.drift")


@dataclass
class Aggregate:
    final_answer: str
    facts: list[tuple[str, list[str | None]]]  # (fact, raw chunk ids)
    residual_uncertainty: str


@dataclass
class Primer:
    initial_answer: str
    followups: list[Followup]
    # the question's own graph search (extractive mode), evidence beside the follow-ups' answers
    evidence: list[ChunkInfo] = field(default_factory=list)


@dataclass
class LlmMeter:
    """LLM calls and tokens of one retrieval (follow-ups add from several threads)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def as_dict(self) -> dict[str, int]:
        return {
            "llm_calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


class Strategy(ABC):
    mode: str

    def __init__(self) -> None:
        self.meter = LlmMeter()

    @abstractmethod
    def expand(self, query: str, *, hits: list[ChunkInfo]) -> str: ...

    @abstractmethod
    def primer(
        self,
        query: str,
        communities: list[Community],
        samples: dict[str, list[ChunkInfo]],
        *,
        max_followups: int,
    ) -> Primer: ...

    @abstractmethod
    def local(self, query: str, followup: Followup, context: FollowupContext) -> FollowupResult: ...

    @abstractmethod
    def aggregate(
        self, query: str, primer: Primer, results: list[FollowupResult], *, known: dict[str, ChunkInfo]
    ) -> Aggregate: ...


def _fallback_followups(query: str, communities: list[Community], max_followups: int) -> list[Followup]:
    """One follow-up per primer community (the best first), asking the question inside it."""
    if not communities:
        return [Followup(question=query, targets=[], depth=1, search_text=query)]
    return [
        Followup(question=f"{query} (in: {com.title})", targets=[com.id], depth=1, search_text=query)
        for com in communities[:max_followups]
    ]


# --- with an LLM ----------------------------------------------------------------------------------------


class LlmStrategy(Strategy):
    mode = "llm"

    def _metered(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with usage_meter() as used:
            try:
                return fn(*args, **kwargs)
            finally:
                with self.meter._lock:
                    self.meter.calls += used.calls
                    self.meter.prompt_tokens += used.prompt_tokens
                    self.meter.completion_tokens += used.completion_tokens

    def expand(self, query: str, *, hits: list[ChunkInfo]) -> str:
        return str(self._metered(chat, prompts.hyde(query))).strip()

    def primer(
        self,
        query: str,
        communities: list[Community],
        samples: dict[str, list[ChunkInfo]],
        *,
        max_followups: int,
    ) -> Primer:
        try:
            out: PrimerResponse = self._metered(
                chat_json, prompts.primer(query, communities, samples, max_followups), PrimerResponse
            )
        except LLMInvalidOutput as exc:
            logger.warning(
                "drift_primer_invalid",
                extra={"drift": {"event": "drift_primer_invalid", "error": exc.message}},
            )
            return Primer(initial_answer="", followups=_fallback_followups(query, communities, max_followups))
        by_key = {c.key: c.id for c in communities}
        followups: list[Followup] = []
        for spec in out.followups:
            targets = [by_key[t] for t in spec.target_communities if t in by_key]
            unknown = [t for t in spec.target_communities if t not in by_key]
            if unknown:
                logger.warning(
                    "drift_unknown_target_community",
                    extra={"drift": {"event": "drift_unknown_target_community", "targets": unknown[:5]}},
                )
            followups.append(
                Followup(question=spec.question, targets=targets or [c.id for c in communities], depth=1)
            )
        if not followups:
            followups = _fallback_followups(query, communities, max_followups)
        return Primer(initial_answer=out.initial_answer, followups=followups[:max_followups])

    def local(self, query: str, followup: Followup, context: FollowupContext) -> FollowupResult:
        shown = context.chunks[: settings.MAX_CHUNKS_FOR_PROMPT]
        shown_ids = {c.chunk_id for c in shown}
        hoods = [h for h in context.neighbourhoods if h.chunk_id in shown_ids]
        out: LocalExecutorResponse = self._metered(
            chat_json, prompts.local(followup.question, shown, hoods), LocalExecutorResponse
        )
        known = {c.chunk_id: c for c in context.chunks}
        # citations map on the full retrieved set, not only on the chunks the prompt showed
        cited = citations.validate_local(
            out.citations, valid_ids=context.valid_ids, known=known, stage="followup"
        )
        new = [
            Followup(question=f.question, targets=followup.targets, depth=followup.depth + 1)
            for f in out.new_followups[:3]
        ]
        return FollowupResult(
            followup=followup,
            answer=out.answer,
            citations=cited,
            confidence=out.confidence,
            should_continue=out.should_continue,
            new_followups=new if out.should_continue else [],
        )

    def aggregate(
        self, query: str, primer: Primer, results: list[FollowupResult], *, known: dict[str, ChunkInfo]
    ) -> Aggregate:
        tree: list[dict[str, Any]] = [{"stage": "primer", "question": query, "answer": primer.initial_answer}]
        tree += [
            {
                "stage": f"follow-up (depth {r.followup.depth})",
                "question": r.followup.question,
                "answer": r.answer,
                "citations": [c["chunk_id"] for c in r.citations],
                "confidence": r.confidence,
            }
            for r in results
        ]
        valid = list(dict.fromkeys(c["chunk_id"] for r in results for c in r.citations))
        try:
            out: AggregatorResponse = self._metered(
                chat_json, prompts.aggregator(query, tree, valid), AggregatorResponse
            )
        except LLMInvalidOutput as exc:
            logger.warning(
                "drift_aggregation_invalid",
                extra={"drift": {"event": "drift_aggregation_invalid", "error": exc.message}},
            )
            return _answers_as_facts(primer, results)
        return Aggregate(
            final_answer=out.final_answer,
            facts=[(f.fact, list(f.citations)) for f in out.key_facts],
            residual_uncertainty=out.residual_uncertainty,
        )


def _answers_as_facts(primer: Primer, results: list[FollowupResult]) -> Aggregate:
    """When the aggregator cannot be used: the follow-ups' own answers, best first, are the facts."""
    ranked = sorted((r for r in results if r.answer), key=lambda r: -r.confidence)
    facts: list[tuple[str, list[str | None]]] = [
        (r.answer, [c["chunk_id"] for c in r.citations]) for r in ranked[: settings.DRIFT_KEY_FACTS]
    ]
    final = ranked[0].answer if ranked else primer.initial_answer
    return Aggregate(
        final_answer=final,
        facts=facts,
        residual_uncertainty="The aggregation step failed; these are the follow-ups' own answers.",
    )


# --- without an LLM -------------------------------------------------------------------------------------


def _words_missing(query: str, covered: set[str]) -> list[str]:
    """The question's own words (not their stems) that nothing in `covered` matches."""
    return [t for t in query_terms(query, max_terms=256) if _stem(t) not in covered]


@dataclass
class _Sentence:
    text: str
    chunk: ChunkInfo
    score: float


def _best_sentences(query_terms_: set[str], chunks: list[ChunkInfo], limit: int) -> list[_Sentence]:
    """Sentences of the chunks ranked by the share of query terms they contain, then by chunk score."""
    scored: list[_Sentence] = []
    top = max((c.score for c in chunks), default=0.0) or 1.0
    for chunk in chunks:
        for sentence in _sentences(chunk.text):
            overlap = len(query_terms_ & _terms(sentence)) / max(1, len(query_terms_))
            scored.append(_Sentence(sentence, chunk, overlap + 0.25 * chunk.score / top))
    scored.sort(key=lambda s: -s.score)
    out: list[_Sentence] = []
    seen: set[str] = set()
    for s in scored:
        if s.text.lower() not in seen:
            seen.add(s.text.lower())
            out.append(s)
        if len(out) >= limit:
            break
    return out


# What a follow-up's citation and the share of the question's terms add to a key fact's support.
FOLLOWUP_WEIGHT = 0.1
QUESTION_WEIGHT = 0.5


class ExtractiveStrategy(Strategy):
    """No LLM: HyDE becomes pseudo-relevance feedback, answers are the best-matching sentences of
    the retrieved chunks (with their real chunk ids), follow-ups go after entities the evidence
    connects to (a second hop), and the aggregate keeps the best sentences as key facts."""

    mode = "extractive"

    def expand(self, query: str, *, hits: list[ChunkInfo]) -> str:
        return " ".join(s.text for s in _best_sentences(_terms(query), hits, 2))

    def primer(
        self,
        query: str,
        communities: list[Community],
        samples: dict[str, list[ChunkInfo]],
        *,
        max_followups: int,
    ) -> Primer:
        chunks = [c for com in communities for c in samples.get(com.id, [])]
        best = _best_sentences(_terms(query), chunks, 1)
        return Primer(
            initial_answer=best[0].text if best else "",
            followups=_fallback_followups(query, communities, max_followups),
        )

    def local(self, query: str, followup: Followup, context: FollowupContext) -> FollowupResult:
        wanted = _terms(query) | _terms(followup.text)
        best = _best_sentences(wanted, context.chunks, 2)
        cited = [
            {"chunk_id": s.chunk.chunk_id, "span": s.text, "document_name": s.chunk.document_name}
            for s in best
        ]
        covered = set().union(*(_terms(s.text) for s in best)) if best else set()
        confidence = round(len(wanted & covered) / max(1, len(wanted)), 3)
        new: list[Followup] = []
        if best and followup.depth == 1:
            # a second hop: entities of the best chunk that the question does not name
            top_id = best[0].chunk.chunk_id
            hood = next((h for h in context.neighbourhoods if h.chunk_id == top_id), None)
            for entity in (hood.entities if hood else [])[:8]:
                name = str(entity.get("name") or "")
                if name and not (_terms(name) <= wanted) and entity.get("community"):
                    new.append(
                        Followup(
                            question=f"What is known about {name}?",
                            targets=[entity["community"]],
                            depth=followup.depth + 1,
                            search_text=f"{query} {name}",
                        )
                    )
                if len(new) >= 1:
                    break
        return FollowupResult(
            followup=followup,
            answer=" ".join(s.text for s in best),
            citations=cited,
            confidence=confidence,
            should_continue=confidence < 1.0,
            new_followups=new,
        )

    def aggregate(
        self, query: str, primer: Primer, results: list[FollowupResult], *, known: dict[str, ChunkInfo]
    ) -> Aggregate:
        """Key facts: the best sentence of each chunk the question's own search found and the
        sentences the follow-ups cited, ordered by support. A sentence's support adds what found it:
        1 / (1 + rank) for the search's chunk at that rank (as reciprocal-rank fusion weighs ranks),
        FOLLOWUP_WEIGHT x the coverage of each follow-up that cited it; then QUESTION_WEIGHT x the
        share of the question's terms it holds. The search walks the passage graph, so its second
        chunk is often the second hop, whose sentences need not share a word with the question."""
        wanted = _terms(query)
        found_by: dict[str, dict[str, float]] = {}  # sentence -> what found it -> its weight
        cited: dict[str, list[str | None]] = {}
        for rank, chunk in enumerate(primer.evidence):
            for s in _best_sentences(wanted, [chunk], 1):
                found_by.setdefault(s.text, {})["search"] = 1.0 / (1 + rank)
                cited.setdefault(s.text, []).append(chunk.chunk_id)
        for n, result in enumerate(results):
            for citation in result.citations:
                sentence = citation["span"]
                found_by.setdefault(sentence, {})[f"followup {n}"] = FOLLOWUP_WEIGHT * result.confidence
                cited.setdefault(sentence, []).append(citation["chunk_id"])

        def support(sentence: str) -> float:
            overlap = len(wanted & _terms(sentence)) / max(1, len(wanted))
            return sum(found_by[sentence].values()) + QUESTION_WEIGHT * overlap

        ranked = sorted(found_by, key=lambda sentence: -support(sentence))[: settings.DRIFT_KEY_FACTS]
        facts = [(sentence, list(dict.fromkeys(cited[sentence]))) for sentence in ranked]
        final = " ".join(text for text, _ids in facts[:2]) or primer.initial_answer
        covered = set().union(*(_terms(text) for text, _ids in facts)) if facts else set()
        missing = _words_missing(query, covered)
        residual = (
            "Extractive answer (no LLM configured): the key facts are sentences quoted from the sources."
            + (f" Not found in the evidence: {', '.join(missing[:10])}." if missing else "")
        )
        return Aggregate(final_answer=final, facts=facts, residual_uncertainty=residual)


def strategy_for(*, llm: bool) -> Strategy:
    return LlmStrategy() if llm else ExtractiveStrategy()


__all__ = ["Aggregate", "Citation", "ExtractiveStrategy", "LlmStrategy", "Primer", "Strategy", "strategy_for"]
