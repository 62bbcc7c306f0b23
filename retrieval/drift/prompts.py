"""Prompts of DRIFT search: seed 002's HyDE, primer, local executor and aggregator tasks, with the
ids the model may use listed explicitly (citation layer 1: prevention)."""

from __future__ import annotations

import json
from typing import Any

from retrieval.drift.dto import ChunkInfo, Community, Neighbourhood

HYDE = (
    "You are assisting a retrieval system. Write a short, factual paragraph that would likely appear "
    'in an ideal answer to this user question.\n\nQuestion: "{question}"\nHypothetical answer paragraph:'
)

PRIMER_SYSTEM = """You are DRIFT-Search Primer.
Input: user question + community summaries + sample chunks.

Tasks:
- Draft initial answer (note uncertainty if needed).
- Generate 2-{max_followups} follow-up questions with target communities.

Use only community ids from the list of valid community ids.
Return JSON: {{"initial_answer": str,
  "followups": [{{"question": str, "target_communities": [community ids]}}], "rationale": str}}"""

LOCAL_SYSTEM = """You are DRIFT-Search Local Executor.
Input: follow-up question + retrieved chunks + graph neighborhoods.

Tasks:
- Answer follow-up using ONLY provided context.
- Cite chunk IDs where evidence comes from. You MUST use chunk_id values from the list of valid chunk ids.
- Propose 0-3 additional follow-ups (if needed).
- Assign confidence [0..1] and whether to continue.

Return JSON: {"answer": str, "citations": [{"chunk_id": str, "span": str}],
  "new_followups": [{"question": str}], "confidence": float, "should_continue": bool}"""

AGGREGATOR_SYSTEM = """You are DRIFT-Search Aggregator.

Tasks:
1. Produce final concise answer.
2. List key facts with citations (chunk IDs as strings, nested within each fact).
   Use only ids from the list of valid chunk ids.
3. Note any residual uncertainty.

Return JSON: {"final_answer": str,
  "key_facts": [{"fact": str, "citations": ["chunk_id_1", "chunk_id_2"]}], "residual_uncertainty": str}"""

CHUNK_CHARS = 1500  # a chunk's text in a prompt
SUMMARY_CHARS = 1200  # a community summary in a prompt


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def hyde(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": HYDE.format(question=question)}]


def primer(
    question: str, communities: list[Community], samples: dict[str, list[ChunkInfo]], max_followups: int
) -> list[dict[str, str]]:
    lines = [f"User question: {question}", "", "Community details:"]
    for com in communities:
        lines.append(f"[community_id: {com.key}] (level {com.level}) {com.title}")
        lines.append(_cut(com.summary, SUMMARY_CHARS))
    lines += ["", "Sample chunks:"]
    for com in communities:
        for chunk in samples.get(com.id, []):
            lines.append(
                f"[community_id: {com.key}] [chunk_id: {chunk.chunk_id}] {_cut(chunk.text, CHUNK_CHARS)}"
            )
    lines += ["", "Valid community ids: " + ", ".join(c.key for c in communities)]
    return [
        {"role": "system", "content": PRIMER_SYSTEM.format(max_followups=max(2, max_followups))},
        {"role": "user", "content": "\n".join(lines)},
    ]


def local(
    question: str, chunks: list[ChunkInfo], neighbourhoods: list[Neighbourhood]
) -> list[dict[str, str]]:
    lines = [f"Follow-up question: {question}", "", "Retrieved chunks:"]
    for chunk in chunks:
        lines.append(
            f"[chunk_id: {chunk.chunk_id}] (document: {chunk.document_name}) {_cut(chunk.text, CHUNK_CHARS)}"
        )
    graph_lines = []
    for hood in neighbourhoods:
        names = ", ".join(f"{e['name']} ({e.get('type') or 'entity'})" for e in hood.entities)
        rels = "; ".join(
            f"{r['source']} -> {r['target']}"
            + (f": {_cut(r['description'], 200)}" if r["description"] else "")
            for r in hood.relations
        )
        if names or rels:
            graph_lines.append(
                f"[chunk_id: {hood.chunk_id}] entities: {names or '-'}; relations: {rels or '-'}"
            )
    if graph_lines:
        lines += ["", "Graph neighborhoods:", *graph_lines]
    lines += ["", "Valid chunk ids: " + ", ".join(c.chunk_id for c in chunks)]
    return [{"role": "system", "content": LOCAL_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def aggregator(question: str, tree: list[dict[str, Any]], valid_ids: list[str]) -> list[dict[str, str]]:
    body = (
        f"User question: {question}\n\nQ/A tree (primer + follow-ups): {json.dumps(tree, ensure_ascii=False)}"
        f"\n\nValid chunk ids: {', '.join(valid_ids)}"
    )
    return [{"role": "system", "content": AGGREGATOR_SYSTEM}, {"role": "user", "content": body}]
