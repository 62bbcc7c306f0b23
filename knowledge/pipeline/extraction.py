"""Entities and relations from chunk text.

- `llm`: structured output (pydantic-validated) per chunk plus GraphRAG-style gleaning passes.
- `extractive` (no LLM): YAKE keyphrases as entities, typed `NAME` when every word is capitalised and
  `CONCEPT` otherwise; relations from co-occurrence in the same sentence, weighted by count.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from core.llm.client import chat_json, llm_configured


@dataclass
class ExtractedEntity:
    name: str
    type: str
    description: str = ""


@dataclass
class ExtractedRelation:
    source: str
    target: str
    description: str = ""
    weight: float = 1.0


@dataclass
class Extraction:
    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    mode: str = "extractive"


def normalise_name(name: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s&+.-]", " ", name.casefold())).strip(" .-")


def entity_key(name: str, type_: str) -> str:
    return f"{normalise_name(name)}|{type_.strip().upper()}"


# --- extractive ------------------------------------------------------------------------------------

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")


@functools.lru_cache(maxsize=4)
def _yake(max_entities: int):
    import yake  # only extractive mode needs it; it loads its stop-word lists on import

    return yake.KeywordExtractor(lan="en", n=3, top=max_entities * 2, dedupLim=0.8)


def _is_name(phrase: str) -> bool:
    words = [w for w in phrase.split() if w]
    return bool(words) and all(w[0].isupper() or w[0].isdigit() for w in words)


def extract_extractive(text: str, *, max_entities: int = 8) -> Extraction:
    candidates = _yake(max_entities).extract_keywords(text)
    phrases: list[tuple[str, bool]] = []
    for phrase, _score in candidates:
        phrase = phrase.strip(" .,;:'\"()[]")
        if len(phrase) < 2 or phrase.isdigit():
            continue
        words = phrase.split()
        is_name = _is_name(phrase)
        all_lower = all(w.islower() for w in words)
        # names (every word capitalised) or multi-word lowercase concepts; a mix such as
        # "Alan Turing broke" straddles a name and a verb and a lone common word is too vague
        if not is_name and not (all_lower and len(words) > 1):
            continue
        phrases.append((phrase, is_name))
    entities: dict[str, ExtractedEntity] = {}
    for phrase, is_name in phrases:
        key = normalise_name(phrase)
        # a one-word name that is part of a longer name found here ("Alan" of "Alan Turing") is dropped
        if (
            is_name
            and " " not in phrase
            and any(other != phrase and phrase in other.split() for other, _ in phrases)
        ):
            continue
        if not key or key in entities:
            continue
        entities[key] = ExtractedEntity(name=phrase, type="NAME" if is_name else "CONCEPT")
        if len(entities) >= max_entities:
            break
    sentences = [s.strip() for s in _SENTENCE_SPLIT.split(text) if s.strip()]
    pair_weight: dict[tuple[str, str], float] = defaultdict(float)
    pair_sentence: dict[tuple[str, str], str] = {}
    for sentence in sentences:
        lowered = sentence.casefold()
        present = [k for k, e in entities.items() if e.name.casefold() in lowered]
        for entity_key_ in present:
            if not entities[entity_key_].description:
                entities[entity_key_].description = sentence[:300]
        for i, a in enumerate(present):
            for b in present[i + 1 :]:
                pair = (a, b) if a < b else (b, a)
                pair_weight[pair] += 1.0
                pair_sentence.setdefault(pair, sentence[:300])
    relations = [
        ExtractedRelation(entities[a].name, entities[b].name, pair_sentence[(a, b)], weight)
        for (a, b), weight in pair_weight.items()
    ]
    return Extraction(entities=list(entities.values()), relations=relations, mode="extractive")


# --- LLM ----------------------------------------------------------------------------------------------


class _LLMEntity(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    type: str = Field(min_length=1, max_length=50)
    description: str = Field(default="", max_length=2000)


class _LLMRelation(BaseModel):
    source: str = Field(min_length=1, max_length=200)
    target: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)
    weight: float = Field(default=1.0, ge=0.0, le=10.0)


class _LLMExtraction(BaseModel):
    entities: list[_LLMEntity] = Field(default_factory=list)
    relations: list[_LLMRelation] = Field(default_factory=list)


EXTRACT_PROMPT = """You extract a knowledge graph from text.
Return JSON: {{"entities": [{{"name", "type", "description"}}], "relations": [{{"source", "target", "description", "weight"}}]}}.
- type is one of: PERSON, ORGANIZATION, LOCATION, EVENT, WORK, CONCEPT, OTHER.
- description: one or two sentences, from the text only.
- relations connect entities you listed (source and target are entity names); weight 1-10 is the strength.

Text:
{text}"""

GLEAN_PROMPT = """Many entities and relations were missed in the last extraction.
Return JSON in the same format with ONLY the additional entities and relations found in the text."""


def extract_llm(text: str, *, gleaning_passes: int = 1) -> Extraction:
    messages: list[dict[str, str]] = [{"role": "user", "content": EXTRACT_PROMPT.format(text=text)}]
    result = chat_json(messages, _LLMExtraction)
    merged = _LLMExtraction(entities=list(result.entities), relations=list(result.relations))
    for _ in range(gleaning_passes):
        messages += [
            {"role": "assistant", "content": result.model_dump_json()},
            {"role": "user", "content": GLEAN_PROMPT},
        ]
        result = chat_json(messages, _LLMExtraction)
        if not result.entities and not result.relations:
            break
        merged.entities.extend(result.entities)
        merged.relations.extend(result.relations)
    entities: dict[str, ExtractedEntity] = {}
    for e in merged.entities:
        key = normalise_name(e.name)
        if key and key not in entities:
            entities[key] = ExtractedEntity(e.name.strip(), e.type.strip().upper(), e.description.strip())
    relations = [
        ExtractedRelation(r.source.strip(), r.target.strip(), r.description.strip(), r.weight)
        for r in merged.relations
        # an LLM relation to an entity it did not list is dropped, never trusted
        if normalise_name(r.source) in entities
        and normalise_name(r.target) in entities
        and normalise_name(r.source) != normalise_name(r.target)
    ]
    return Extraction(entities=list(entities.values()), relations=relations, mode="llm")


def extract(text: str, *, max_entities: int, gleaning_passes: int) -> Extraction:
    if llm_configured():
        return extract_llm(text, gleaning_passes=gleaning_passes)
    return extract_extractive(text, max_entities=max_entities)
