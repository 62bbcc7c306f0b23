"""Typed values of DRIFT search: the LLM's structured outputs (validated with pydantic, seed 002
section 2) and the pipeline's own records."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, field_validator

logger = logging.getLogger("retrieval.drift.citations")


def _clean_id(value: Any) -> str | None:
    if value is None:
        return None
    return " ".join(str(value).split())


class Citation(BaseModel):
    """A local executor's citation. A missing or blank chunk id is logged here (the model stays
    valid) and filtered later against the retrieved set."""

    chunk_id: str | None = None
    span: str = ""
    document_name: str = ""

    @field_validator("chunk_id", mode="before")
    @classmethod
    def _chunk_id(cls, value: Any) -> str | None:
        if value is None:
            logger.warning(
                "citation_model_null_chunk_id", extra={"drift": {"event": "citation_model_null_chunk_id"}}
            )
            return None
        cleaned = _clean_id(value)
        if not cleaned:
            logger.warning(
                "citation_model_empty_chunk_id", extra={"drift": {"event": "citation_model_empty_chunk_id"}}
            )
        return cleaned

    @field_validator("span", "document_name", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return "" if value is None else " ".join(str(value).split())


class FollowupSpec(BaseModel):
    question: str = Field(min_length=1, max_length=2000)
    target_communities: list[str] = Field(default_factory=list, max_length=20)

    @field_validator("target_communities", mode="before")
    @classmethod
    def _targets(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str | int):
            value = [value]
        return [str(v).strip() for v in value if v is not None and str(v).strip()]


class PrimerResponse(BaseModel):
    initial_answer: str = ""
    followups: list[FollowupSpec] = Field(default_factory=list, max_length=20)
    rationale: str = ""


class NewFollowup(BaseModel):
    question: str = Field(min_length=1, max_length=2000)


class LocalExecutorResponse(BaseModel):
    answer: str
    citations: list[Citation] = Field(default_factory=list, max_length=50)
    new_followups: list[NewFollowup] = Field(default_factory=list, max_length=10)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    should_continue: bool = True

    @field_validator("new_followups", mode="before")
    @classmethod
    def _followups(cls, value: Any) -> list[Any]:
        # models often answer with bare strings
        if value is None:
            return []
        return [{"question": v} if isinstance(v, str) else v for v in value]


class AggregatedFact(BaseModel):
    fact: str = Field(min_length=1)
    citations: list[str | None] = Field(default_factory=list, max_length=50)

    @field_validator("citations", mode="before")
    @classmethod
    def _citations(cls, value: Any) -> list[str | None]:
        if value is None:
            return []
        out: list[str | None] = []
        for item in value:
            if isinstance(item, dict):  # {"chunk_id": …} instead of the asked-for string
                item = item.get("chunk_id")
            out.append(_clean_id(item))
        return out


class AggregatorResponse(BaseModel):
    final_answer: str
    key_facts: list[AggregatedFact] = Field(default_factory=list, max_length=50)
    residual_uncertainty: str = ""


# --- the pipeline's records -------------------------------------------------------------------------


@dataclass
class Community:
    id: str
    key: str
    level: int
    title: str
    summary: str
    score: float


@dataclass
class ChunkInfo:
    chunk_id: str
    document_id: str
    document_name: str
    text: str
    score: float = 0.0


@dataclass
class Neighbourhood:
    chunk_id: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)
    neighbour_chunk_ids: list[str] = field(default_factory=list)


@dataclass
class Followup:
    question: str
    targets: list[str]  # community ids; empty: the whole project
    depth: int
    search_text: str = ""  # what is embedded and searched; the question when empty
    vector: list[float] | None = None

    @property
    def text(self) -> str:
        """What is embedded and searched."""
        return self.search_text or self.question


@dataclass
class FollowupContext:
    """What a follow-up retrieved: hits first, then neighbour chunks; the full set maps citations."""

    chunks: list[ChunkInfo]
    neighbourhoods: list[Neighbourhood]
    valid_ids: set[str]  # every retrieved chunk id, hydrated or not


@dataclass
class FollowupResult:
    followup: Followup
    answer: str
    citations: list[dict[str, str]]  # {chunk_id, span, document_name}, validated
    confidence: float
    should_continue: bool
    new_followups: list[Followup]


@dataclass
class DriftOutcome:
    final_answer: str
    key_facts: list[dict[str, Any]]
    residual_uncertainty: str
    mode: str
    no_data_found: bool = False
    stats: dict[str, Any] = field(default_factory=dict)
