"""LoCoMo answer accuracy with an LLM (issue 34, item 6): optional, reported apart from evidence recall.

Runs only when an LLM is configured for the benchmark (`LLM_API_KEY` or `LLM_BASE_URL`, and
`LLM_MODEL`, the platform's own setting names); otherwise it records that it did not run. The
conversations are stored as in bench/locomo.py (the platform itself runs with `LLM_PROVIDER=none`,
so what is stored is what the recall benchmark measures). For each question of categories 1-4 the
platform's `POST …/memories/context` gives one token-budgeted block (turns, summaries and facts with
their times), the LLM answers from that block alone, and the LLM as judge compares the answer with
the gold one (CORRECT or WRONG; a date in another format counts when it is the same time). Accuracy
is the share judged correct, per category and over all.

Settings (environment): LOCOMO_ANSWER_MODES (default "hybrid,graph"), LOCOMO_ANSWER_QUESTIONS (at
most this many questions per conversation; 0, the default, asks them all), LOCOMO_ANSWER_MAX_TOKENS
(the context budget, default 1,500), LOCOMO_JUDGE_MODEL (default: LLM_MODEL). Never part of the test
suite: LLM answers are not deterministic enough to assert on.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.conversations import _Client
from bench.locomo import CATEGORIES, _store, conversations
from bench.memory import _platform
from bench.rows import row

REPEATS_INSIDE = True  # one run: the LLM's calls are the cost
REPEATS = 1

ANSWER_PROMPT = (
    "You answer a question about a long chat between {a} and {b}, using only the memories below. Each "
    "memory starts with when it was said. Resolve relative times ('last week') against that date. "
    "Answer in as few words as the question allows; if the memories do not say, answer 'unknown'.\n\n"
    "Memories:\n{context}\n\nQuestion: {question}\nAnswer:"
)
JUDGE_PROMPT = (
    "You grade an answer against the gold answer of a question about a conversation. The answer is "
    "CORRECT when it says what the gold answer says (other words, more detail, or a date in another "
    "format that is the same time are fine) and WRONG when it contradicts it, misses it or says it is "
    "unknown.\n\nQuestion: {question}\nGold answer: {gold}\nAnswer: {answer}\n\n"
    "Reply with one word: CORRECT or WRONG."
)


def _llm() -> tuple[Any, str, str] | None:
    """The OpenAI-compatible client, answer model and judge model, or None when none is configured."""
    key, base = os.environ.get("LLM_API_KEY", ""), os.environ.get("LLM_BASE_URL", "")
    if not key and not base:
        return None
    from openai import OpenAI

    client = OpenAI(api_key=key or "none", base_url=base or None, timeout=120, max_retries=3)
    model = os.environ.get("LLM_MODEL", "gpt-4o-mini")
    return client, model, os.environ.get("LOCOMO_JUDGE_MODEL", model)


def _ask(llm: Any, model: str, prompt: str) -> str:
    answer = llm.chat.completions.create(
        model=model, temperature=0, messages=[{"role": "user", "content": prompt}]
    )
    return (answer.choices[0].message.content or "").strip()


def _answer_all(
    client: _Client, conv: dict[str, Any], llm: tuple[Any, str, str], modes: list[str], limit: int
) -> dict[str, list[tuple[int, bool]]]:
    """Each mode's (category, judged correct) per question of the conversation."""
    chat, model, judge = llm
    questions = conv["questions"][:limit] if limit else conv["questions"]
    budget = int(os.environ.get("LOCOMO_ANSWER_MAX_TOKENS", "1500"))
    out: dict[str, list[tuple[int, bool]]] = {mode: [] for mode in modes}
    for q in questions:
        for mode in modes:
            body = {
                "query": q["question"],
                "scope": {"user_id": conv["id"]},
                "mode": mode,
                "max_tokens": budget,
            }
            context = client.call("POST", "memories/context", body)["context"]
            prompt = ANSWER_PROMPT.format(
                a=conv["speaker_a"], b=conv["speaker_b"], context=context, question=q["question"]
            )
            answer = _ask(chat, model, prompt)
            verdict = _ask(
                chat, judge, JUDGE_PROMPT.format(question=q["question"], gold=q["answer"], answer=answer)
            )
            out[mode].append((q["category"], verdict.upper().startswith("CORRECT")))
    return out


def run() -> dict[str, Any]:
    llm = _llm()
    if llm is None:
        print("  not run: no LLM configured (LLM_API_KEY or LLM_BASE_URL)", flush=True)
        return {"rows": [], "figures": {"not_run": "no LLM configured (LLM_API_KEY or LLM_BASE_URL)"}}
    modes = [m.strip() for m in os.environ.get("LOCOMO_ANSWER_MODES", "hybrid,graph").split(",") if m.strip()]
    limit = int(os.environ.get("LOCOMO_ANSWER_QUESTIONS", "0"))
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-locomo-answers-"))
    judged: dict[str, list[tuple[int, bool]]] = {mode: [] for mode in modes}
    try:
        with _platform(tmp, "locomo-answers", LLM_PROVIDER="none") as (platform, admin):
            client = _Client(platform, admin)
            for conv in conversations():
                _store(client, conv)
                for mode, verdicts in _answer_all(client, conv, llm, modes, limit).items():
                    judged[mode].extend(verdicts)
            client.http.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    accuracy = {
        mode: {
            "all": round(statistics.fmean(ok for _c, ok in v), 4) if v else 0.0,
            **{
                name: round(statistics.fmean(ok for c, ok in v if c == cat), 4)
                for cat, name in CATEGORIES.items()
                if any(c == cat for c, _ok in v)
            },
        }
        for mode, v in judged.items()
    }
    figures = {
        "answer_model": llm[1],
        "judge_model": llm[2],
        "questions": {mode: len(v) for mode, v in judged.items()},
        "accuracy": accuracy,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    rows = [
        row(f"locomo-dev answer accuracy (LLM-as-judge, {llm[1]}), {key}, memory context {mode}", value, "")
        for mode, values in accuracy.items()
        for key, value in values.items()
    ]
    return {"rows": rows, "figures": figures}
