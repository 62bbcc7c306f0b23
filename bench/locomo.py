"""LoCoMo evidence recall of memory search (issue 34), on locomo-dev (bench/data/locomo-dev: five of
LoCoMo's ten conversations; the other five are held out and never read here).

Scored as the data set's README says: every turn is stored through the API as a message of one user
per conversation (one thread per session, the session's date as the message's time, the speaker as
`author_name`; speaker A's turns as role `user`, speaker B's as `assistant`; a shared photo's caption
is part of the turn's text, "[photo: …]"), then each question of categories 1–4 searches its user's
memory and the question's evidence turns found in the top k are counted (evidence recall@k, averaged
over questions). Every memory mode is measured, with the in-process baselines on the same texts
beside them (bench/baselines.py: BM25, MiniLM and their reciprocal-rank fusion, each turn's speaker as
its title). Also measured: search latency over HTTP per mode, and how many off-topic questions
(HotpotQA-100's, asked of every conversation) get anything back at the default floors (the issue's
"unrelated-query false positives").
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.baselines import encoder, rank
from bench.conversations import _Client
from bench.memory import _platform
from bench.retrieval import _pct
from bench.rows import row

DATA = Path(__file__).resolve().parent / "data"
MODES = ("vector", "fulltext", "hybrid", "graph")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
TARGETS = {"all": 0.70, 1: 0.45, 2: 0.75}
P95_TARGET_MS = 80.0
FALSE_POSITIVE_TARGET = 5.0


def _turn_text(turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f"{turn['text']} [photo: {caption}]" if caption else turn["text"]


def _session_time(value: str) -> str:
    """ "1:56 pm on 8 May, 2023" → ISO-8601."""
    return datetime.strptime(value, "%I:%M %p on %d %B, %Y").isoformat() + "Z"


def conversations() -> list[dict[str, Any]]:
    out = []
    for item in json.loads((DATA / "locomo-dev" / "locomo-dev.json").read_text()):
        conv = item["conversation"]
        sessions = []
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list) and turns:
                stamp = _session_time(conv[f"{key}_date_time"])
                sessions.append((key, stamp, turns))
        questions = [q for q in item["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]
        out.append(
            {
                "id": item.get("sample_id") or f"conv-{len(out)}",
                "speaker_a": conv["speaker_a"],
                "speaker_b": conv["speaker_b"],
                "sessions": sessions,
                "questions": questions,
            }
        )
    return out


def session_messages(conv: dict[str, Any], stamp: str, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A session's turns as memory messages: the first speaker is the user, the speaker the author,
    the session's date the time, the dialogue id the message id."""
    return [
        {
            "role": "user" if t["speaker"] == conv["speaker_a"] else "assistant",
            "text": _turn_text(t),
            "author_name": t["speaker"],
            "timestamp": stamp,
            "message_id": t["dia_id"],
        }
        for t in turns
    ]


def _store(client: _Client, conv: dict[str, Any]) -> dict[str, str]:
    """Every turn of the conversation, one request per session; memory id → dia_id."""
    by_id, jobs = {}, []
    for key, stamp, turns in conv["sessions"]:
        messages = session_messages(conv, stamp, turns)
        stored = client.call(
            "POST", "memories", {"messages": messages, "scope": {"user_id": conv["id"], "thread_id": key}}
        )
        by_id.update({s["id"]: turns[s["index"]]["dia_id"] for s in stored["stored"]})
        if stored.get("job_id"):
            jobs.append(stored["job_id"])
    for job_id in jobs:  # derivation done before anything is searched or timed
        client.wait(job_id)
    return by_id


def _recall(found: list[str], evidence: list[str], k: int) -> float:
    return len(set(found[:k]) & set(evidence)) / len(set(evidence))


class _Scores:
    def __init__(self) -> None:
        self.values: dict[str, dict[str, list[float]]] = {}

    def add(self, system: str, category: int, found: list[str], evidence: list[str]) -> None:
        for k in KS:
            for key in (f"all@{k}", f"{category}@{k}"):
                self.values.setdefault(system, {}).setdefault(key, []).append(_recall(found, evidence, k))

    def table(self) -> dict[str, dict[str, float]]:
        return {
            system: {key: round(statistics.fmean(v), 4) for key, v in sorted(keys.items())}
            for system, keys in self.values.items()
        }


def _search(
    client: _Client, conv: dict[str, Any], by_id: dict[str, str], scores: _Scores
) -> dict[str, list[float]]:
    took: dict[str, list[float]] = {mode: [] for mode in MODES}
    for q in conv["questions"]:
        for mode in MODES:
            body = {"query": q["question"], "scope": {"user_id": conv["id"]}, "top_k": 10, "mode": mode}
            started = time.perf_counter()
            items = client.call("POST", "memories/search", body)["items"]
            took[mode].append((time.perf_counter() - started) * 1000)
            found = [by_id[i["id"]] for i in items if i["level"] == "message" and i["id"] in by_id]
            scores.add(f"platform {mode}", q["category"], found, q["evidence"])
    return took


def _baselines(conv: dict[str, Any], model: Any, scores: _Scores) -> None:
    turns = [t for _key, _stamp, session in conv["sessions"] for t in session]
    ids = [t["dia_id"] for t in turns]
    ranked = rank(
        [t["speaker"] for t in turns],
        [_turn_text(t) for t in turns],
        [q["question"] for q in conv["questions"]],
        model,
    )
    for qi, q in enumerate(conv["questions"]):
        for name, ranking in (
            ("BM25", ranked.bm25),
            ("MiniLM", ranked.dense),
            ("BM25 + MiniLM RRF", ranked.fused),
        ):
            scores.add(f"in-process {name}", q["category"], [ids[i] for i in ranking[qi][:10]], q["evidence"])


def _off_topic(client: _Client, convs: list[dict[str, Any]]) -> dict[str, float]:
    """Share (%) of off-topic questions answered with at least one message, per mode, default floors."""
    questions = [q["question"] for q in json.loads((DATA / "hotpotqa-100" / "questions.json").read_text())]
    answered = {mode: 0 for mode in MODES}
    for conv in convs:
        for question in questions:
            for mode in MODES:
                body = {"query": question, "scope": {"user_id": conv["id"]}, "top_k": 10, "mode": mode}
                answered[mode] += bool(client.call("POST", "memories/search", body)["items"])
    asked = len(questions) * len(convs)
    return {mode: round(100 * n / asked, 1) for mode, n in answered.items()}


def run() -> dict[str, Any]:
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-locomo-"))
    convs = conversations()
    scores = _Scores()
    took: dict[str, list[float]] = {mode: [] for mode in MODES}
    figures: dict[str, Any] = {}
    try:
        with _platform(tmp, "locomo") as (platform, admin):
            client = _Client(platform, admin)
            stored_at = time.perf_counter()
            maps = [_store(client, conv) for conv in convs]
            figures["stored"] = {
                "messages": sum(len(m) for m in maps),
                "s": round(time.perf_counter() - stored_at, 1),
            }
            print(f"  stored: {figures['stored']}", flush=True)
            for conv, by_id in zip(convs, maps, strict=True):
                for mode, values in _search(client, conv, by_id, scores).items():
                    took[mode].extend(values)
            figures["off_topic_answered_pct"] = _off_topic(client, convs)
            client.http.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    model = encoder()
    for conv in convs:
        _baselines(conv, model, scores)
    figures["recall"] = scores.table()
    figures["questions"] = sum(len(c["questions"]) for c in convs)
    figures["latency_ms"] = {
        m: {"p50": round(_pct(v, 50), 1), "p95": round(_pct(v, 95), 1)} for m, v in took.items()
    }
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    print(f"  {json.dumps(figures, indent=1)}", flush=True)
    return {"rows": _rows(figures), "figures": figures}


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    recall, peer = f["recall"], f["recall"]["in-process BM25 + MiniLM RRF"]
    peer_label = "in-process BM25 + MiniLM RRF, same texts"
    out = []
    for mode in MODES:
        got = recall[f"platform {mode}"]
        for key, label in (("all", "categories 1-4"), *CATEGORIES.items()):
            target = TARGETS.get(key) if mode in ("hybrid", "graph") else None
            out.append(
                row(
                    f"locomo-dev evidence recall@10, {label}, memory search {mode}",
                    got[f"{key}@10"],
                    "",
                    peer=(peer_label, peer[f"{key}@10"]),
                    target=(">=", target) if target else None,
                )
            )
        out.append(
            row(
                f"locomo-dev evidence recall@5, categories 1-4, memory search {mode}",
                got["all@5"],
                "",
                peer=(peer_label, peer["all@5"]),
            )
        )
    for name in ("BM25", "MiniLM"):
        out.append(
            row(
                f"locomo-dev evidence recall@10, categories 1-4, in-process {name} (baseline)",
                recall[f"in-process {name}"]["all@10"],
                "",
            )
        )
    for mode in MODES:
        lat = f["latency_ms"][mode]
        out.append(
            row(
                f"memory search {mode} over HTTP, locomo-dev questions, p50 / p95",
                [lat["p50"], lat["p95"]],
                "ms",
                target=("<=", P95_TARGET_MS),
            )
        )
    for mode in MODES:
        out.append(
            row(
                f"off-topic questions (HotpotQA-100's, of each conversation) answered with anything, {mode}",
                f["off_topic_answered_pct"][mode],
                "%",
                target=("<=", FALSE_POSITIVE_TARGET),
            )
        )
    return out
