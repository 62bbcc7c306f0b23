"""Results as text for the model, in seed 000's format: `[Score: 0.892] [key: value] text`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from knowledge_platform_client import DriftResult, MemoryHit, SearchHit

# metadata the platform adds to every hit that says nothing to a model
_QUIET_KEYS = frozenset({"document_metadata", "source_path", "chunk_index"})


def _value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_value(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_value(v)}" for k, v in value.items())
    return str(value)


def block(score: float | None, fields: Iterable[tuple[str, Any]], text: str) -> str:
    head = [f"[Score: {score:.3f}]"] if score is not None else []
    head += [f"[{key}: {_value(value)}]" for key, value in fields if value not in (None, "", [], {})]
    return (" ".join(head) + "\n" + text.strip()).strip()


def search_blocks(hits: Iterable[SearchHit]) -> list[str]:
    blocks = []
    for hit in hits:
        extra = [(k, v) for k, v in hit.metadata.items() if k not in _QUIET_KEYS and k != "document_title"]
        blocks.append(block(hit.score, [("document", hit.document_name), *extra], hit.text))
    return blocks


def memory_blocks(hits: Iterable[MemoryHit]) -> list[str]:
    return [
        block(
            hit.score,
            [("memory", hit.level), ("role", hit.role), ("timestamp", hit.timestamp)],
            hit.text,
        )
        for hit in hits
    ]


def drift_block(answer: DriftResult) -> str:
    lines = [f"[DRIFT answer] {answer.final_answer.strip()}"]
    if answer.key_facts:
        lines.append("Key facts:")
        for fact in answer.key_facts:
            sources = ", ".join(
                dict.fromkeys(c.document_name or c.chunk_id for c in fact.citations if c.chunk_id)
            )
            lines.append(f"- {fact.fact.strip()}" + (f" [sources: {sources}]" if sources else ""))
    if answer.residual_uncertainty.strip():
        lines.append(f"Residual uncertainty: {answer.residual_uncertainty.strip()}")
    return "\n".join(lines)


def context_text(prompt: str, knowledge: list[str], memories: list[str]) -> str | None:
    """The one context message: the prompt, then knowledge, then memories; None when both are empty."""
    if not knowledge and not memories:
        return None
    parts = [prompt.strip()]
    if knowledge:
        parts.append("## Knowledge\n\n" + "\n\n".join(knowledge))
    if memories:
        parts.append("## Memories\n\n" + "\n\n".join(memories))
    return "\n\n".join(parts)
