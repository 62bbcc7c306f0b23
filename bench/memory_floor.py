"""Calibration of memory search's vector relevance floor (`MEMORY_MIN_SCORE_VECTOR`).

A vector search always has a nearest neighbour, so without a floor a question about nothing stored
still returns the top k. The floor is a score below which a memory is not returned, on the scale the
API returns (Neo4j's cosine score, (1 + cosine) / 2, between 0 and 1). It is
chosen on locomo-dev (the five development conversations of LoCoMo; the other five are held out):
every turn is a memory of its conversation's user, embedded by the platform's local embedder from the
line the server embeds (memory.text: speaker, day, text; the same model and normalisation, so cosines
are the server's), and each question of
categories 1-4 searches its conversation's memories.

For each candidate floor the run reports:
- evidence recall@10 of the questions (what the floor costs on questions that have answers);
- the share of off-topic questions that get nothing back: HotpotQA-100's Wikipedia questions asked of
  the same conversations (a domain none of them talks about).
The default is the highest floor that keeps recall@10 within 0.005 of no floor at all.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import django_setup
from bench.rows import row

DATA = Path(__file__).resolve().parent / "data"  # vendored: locomo-dev and hotpotqa-100, see their READMEs
FLOORS = [round(0.5 + 0.025 * i, 3) for i in range(0, 13)]
K = 10
RECALL_TOLERANCE = 0.005
# the relevance gate (MEMORY_MIN_SCORE_QUERY): the nearest message's score a query needs for vector and
# hybrid to return anything; the chosen gate is the lowest that answers at most OFF_TOPIC_TARGET of
# off-topic questions (issue 34: unrelated-query false positives <= 5 %)
GATES = [round(0.6 + 0.01 * i, 2) for i in range(0, 21)]
OFF_TOPIC_TARGET = 0.05


def _embed(texts: list[str]) -> np.ndarray:
    from core.embeddings.base import get_embedder

    vectors = np.asarray(get_embedder().embed(texts), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _conversations() -> list[dict[str, Any]]:
    """Each locomo-dev conversation's turns as the server embeds them (memory.text.line: speaker,
    the session's day, the text, as bench/locomo.py stores them), with their ids, and its questions."""
    from bench.locomo import _turn_text, conversations
    from memory.text import line

    out = []
    for conv in conversations():
        turns = [
            {
                "dia_id": t["dia_id"],
                "line": line(text=_turn_text(t), role="", author_name=t["speaker"], timestamp=stamp),
            }
            for _key, stamp, session in conv["sessions"]
            for t in session
        ]
        out.append({"turns": turns, "questions": conv["questions"]})
    return out


def _measure() -> dict[str, Any]:
    off_topic = [q["question"] for q in json.loads((DATA / "hotpotqa-100" / "questions.json").read_text())]
    off_vectors = _embed(off_topic)
    hits = {f: 0.0 for f in FLOORS}
    empty_on = {f: 0 for f in FLOORS}
    empty_off = {f: 0 for f in FLOORS}
    asked = asked_off = 0
    best_on: list[float] = []
    best_off_all: list[float] = []
    for conv in _conversations():
        ids = [t["dia_id"] for t in conv["turns"]]
        memory = _embed([t["line"] for t in conv["turns"]])
        questions = _embed([q["question"] for q in conv["questions"]])
        for question, vector in zip(conv["questions"], questions, strict=True):
            scores = (1 + memory @ vector) / 2  # Neo4j's vector.similarity.cosine
            best_on.append(float(scores.max()))
            top = np.argsort(-scores)[:K]
            evidence = set(question["evidence"])
            for floor in FLOORS:
                kept = [i for i in top if scores[i] >= floor]
                found = {ids[i] for i in kept} & evidence
                hits[floor] += len(found) / len(evidence)
                empty_on[floor] += not kept
            asked += 1
        best_off = ((1 + memory @ off_vectors.T) / 2).max(axis=0)
        best_off_all += best_off.tolist()
        for floor in FLOORS:
            empty_off[floor] += int((best_off < floor).sum())
        asked_off += len(off_topic)
    table = [
        {
            "floor": f,
            "recall_at_10": round(hits[f] / asked, 4),
            "on_topic_empty": round(empty_on[f] / asked, 4),
            "off_topic_empty": round(empty_off[f] / asked_off, 4),
        }
        for f in FLOORS
    ]
    baseline = table[0]["recall_at_10"]
    chosen = max(
        (r for r in table if baseline - r["recall_at_10"] <= RECALL_TOLERANCE), key=lambda r: r["floor"]
    )
    on, off = np.asarray(best_on), np.asarray(best_off_all)
    gates = [
        {
            "gate": g,
            "off_topic_answered": round(float((off >= g).mean()), 4),
            "on_topic_empty": round(float((on < g).mean()), 4),
        }
        for g in GATES
    ]
    gate = min((r for r in gates if r["off_topic_answered"] <= OFF_TOPIC_TARGET), key=lambda r: r["gate"])
    return {
        "table": table,
        "chosen": chosen,
        "gates": gates,
        "chosen_gate": gate,
        "questions": asked,
        "off_topic_questions": asked_off,
    }


def run() -> dict[str, Any]:
    started = time.perf_counter()
    django_setup()
    from django.conf import settings

    figures = _measure()
    figures["configured_floor"] = settings.MEMORY_MIN_SCORE_VECTOR
    figures["configured_gate"] = settings.MEMORY_MIN_SCORE_QUERY
    figures["embedder"] = f"{settings.EMBEDDINGS_PROVIDER}:{settings.EMBEDDINGS_MODEL}"
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    figures["notes"] = (
        "In-process, the server's local embedder; evidence recall@10 over locomo-dev categories 1-4 "
        "(each question searches its own conversation); off-topic: HotpotQA-100 questions asked of every "
        f"locomo-dev conversation. Chosen: the highest floor within {RECALL_TOLERANCE} recall of no floor."
    )
    return {"rows": _rows(figures), "figures": figures}


def _gate_rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    gate = next(r for r in f["gates"] if r["gate"] == f["configured_gate"])
    lowest = f["chosen_gate"]["gate"]
    label = f"gate {f['configured_gate']} (MEMORY_MIN_SCORE_QUERY; lowest meeting the target: {lowest})"
    return [
        row(
            f"memory vector/hybrid search, {label}: off-topic questions answered",
            round(100 * gate["off_topic_answered"], 1),
            "%",
            target=("<=", 100 * OFF_TOPIC_TARGET),
        ),
        row(
            f"memory vector/hybrid search, {label}: on-topic questions answered with nothing",
            round(100 * gate["on_topic_empty"], 1),
            "%",
        ),
    ]


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    none = f["table"][0]
    configured = next(r for r in f["table"] if r["floor"] == f["configured_floor"])
    label = f"floor {f['configured_floor']} (MEMORY_MIN_SCORE_VECTOR)"
    return _gate_rows(f) + [
        row(
            f"memory vector search, {label}: evidence recall@10, locomo-dev",
            configured["recall_at_10"],
            "",
            peer=("no floor, same run", none["recall_at_10"]),
        ),
        row(
            f"memory vector search, {label}: off-topic questions answered with nothing",
            round(100 * configured["off_topic_empty"], 1),
            "%",
            peer=("no floor, same run", round(100 * none["off_topic_empty"], 1)),
        ),
        row(
            f"memory vector search, {label}: on-topic questions answered with nothing",
            round(100 * configured["on_topic_empty"], 1),
            "%",
            peer=("no floor, same run", round(100 * none["on_topic_empty"], 1)),
        ),
    ]
