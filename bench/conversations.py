"""Conversations as knowledge (issue 32): a chat turn, conversation-aware search and the reference
queries, with 10,000 conversations in the project.

Against the whole platform (`platform/run.py`) as it is configured by default: memory processing on
store, so the worker processes what the chat turns store (facts, mentions, the reply's embedding) on
the same two cores while later turns run. Not measured (and processed before anything is timed):
200 passages of hotpotqa-100 ingested as documents, the second hundred each citing three of the
first; one user ("reader") with 200 conversations of two messages stored through
the API (real embeddings, each assistant message referencing two documents), and 9,800 conversations
of four messages of 9,800 other users bulk-loaded with the memory app's own properties (random unit
vectors): 10,000 conversations, about 39,600 messages.

Measured over HTTP, one client, after a warm-up, the chat turns last (their processing jobs would
otherwise run beside the other figures):
1. Chat turn (`POST …/conversations:chat`, `rag`, `persist`, extractive: no LLM call, so the whole
   time is the overhead besides the LLM): store the question, conversation-aware retrieval, answer,
   store the reply with its references. Continues the reader's conversations in turn. Each turn
   starts once the previous turn's processing job has run (untimed): with an LLM, its answer and the
   reader's reply come between two turns. Target p95 ≤ 150 ms; the plain hybrid search of the same
   questions in the same run is given for scale. The same turns back to back, each sharing the two
   cores with the jobs of the turns before it, are measured after them and reported beside it
   (no target: a throughput condition).
2. Conversation-aware search (`POST …/search` with `conversation`, hybrid, top_k 5): target p95
   ≤ 200 ms.
3. Reference queries: a conversation's references, a document's references (both directions), its
   citation graph (depth 2) and the conversations that referenced it: target p95 ≤ 50 ms each.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.curation import _step
from bench.ingestion import _issue_key, load_corpus
from bench.memory import _platform
from bench.retrieval import _pct
from bench.rows import row
from bench.startup import PlatformRun

DOCUMENTS = 200
READER_CONVERSATIONS = 200
OTHER_CONVERSATIONS = 9_800
OTHER_MESSAGES = 4
REQUESTS = 100
WARM_UP = 10


class _Client:
    def __init__(self, platform: PlatformRun, admin: str) -> None:
        self.http = httpx.Client(base_url=platform.base, timeout=600)
        self.project = self.http.post(
            "/api/v1/projects",
            json={"name": "conversations bench"},
            headers={"Authorization": f"Bearer {admin}"},
        ).json()["id"]
        self.http.headers["Authorization"] = f"Bearer {_issue_key(self.project, platform.cli_env())}"
        self.base = f"/api/v1/projects/{self.project}"

    def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        response = self.http.request(method, f"{self.base}/{path}", json=body, params=params)
        if response.status_code not in (200, 201, 202):
            raise RuntimeError(f"{method} {path} answered {response.status_code}: {response.text[:500]}")
        return response.json()

    def timed(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> float:
        started = time.perf_counter()
        self.call(method, path, body, params)
        return (time.perf_counter() - started) * 1000

    def wait(self, job_id: str, timeout: float = 1800, poll: float = 0.5) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.http.get(f"/api/v1/jobs/{job_id}").json()
            if job["status"] == "failed":
                raise RuntimeError(f"job {job_id} failed: {job.get('errors')}")
            if job["status"] == "succeeded":
                return
            time.sleep(poll)
        raise RuntimeError(f"job {job_id} did not finish")


def _documents(client: _Client) -> list[dict[str, Any]]:
    docs = load_corpus()[:DOCUMENTS]
    half = DOCUMENTS // 2
    for i, doc in enumerate(docs[half:]):
        doc["references"] = [docs[(i * 7 + k) % half]["source_path"] for k in range(3)]
    for batch in (docs[:half], docs[half:]):
        client.wait(client.call("POST", "documents", {"documents": batch})["job_id"])
    listed = client.call("GET", "documents", params={"limit": 500})["items"]
    by_path = {d["source_path"]: d["id"] for d in listed}
    return [{**doc, "id": by_path[doc["source_path"]]} for doc in docs]


def _reader(client: _Client, docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The reader's conversations: a question about a document, and an answer that references it and
    one it cites or is cited by. Returns (conversation id, a follow-up question)."""
    out, jobs = [], []
    for i in range(READER_CONVERSATIONS):
        doc, other = docs[i % len(docs)], docs[(i * 13 + 5) % len(docs)]
        sentence = doc["text"].split(". ")[1] if ". " in doc["text"] else doc["text"]
        stored = client.call(
            "POST",
            "memories",
            {
                "messages": [
                    {"role": "user", "text": f"What do you know about {doc['title']}?"},
                    {"role": "assistant", "text": sentence[:400], "references": [doc["id"], other["id"]]},
                ],
                "scope": {"user_id": "reader", "thread_id": f"reader-{i}"},
            },
        )
        out.append((stored["conversation_id"], f"Tell me more about {other['title']} and {doc['title']}."))
        jobs.append(stored["job_id"])
    for job_id in jobs:  # processed before anything is timed
        if job_id:
            client.wait(job_id)
    return out


def _p(values: list[float]) -> dict[str, float]:
    return {"p50": round(_pct(values, 50), 2), "p95": round(_pct(values, 95), 2), "n": len(values)}


def _measure(
    client: _Client, conversations: list[tuple[str, str]], docs: list[dict[str, Any]]
) -> dict[str, Any]:
    stages: dict[str, list[float]] = {}

    def turn(i: int, settle: bool = True) -> float:
        cid, question = conversations[i % len(conversations)]
        body = {"message": question, "user_id": "reader", "conversation_id": cid, "mode": "extractive"}
        started = time.perf_counter()
        answer = client.call("POST", "conversations:chat", body)
        took = (time.perf_counter() - started) * 1000
        for stage, ms in answer["timings_ms"].items():
            stages.setdefault(stage, []).append(ms)
        if settle and answer["job_id"]:  # not timed: the turn's processing, as during an LLM's answer
            client.wait(answer["job_id"], poll=0.02)
        return took

    def aware(i: int) -> float:
        cid, question = conversations[(i * 3 + 1) % len(conversations)]
        conversation = {"conversation_id": cid, "user_id": "reader"}
        return client.timed("POST", "search", {"query": question, "top_k": 5, "conversation": conversation})

    def plain(i: int) -> float:
        _cid, question = conversations[(i * 3 + 1) % len(conversations)]
        return client.timed("POST", "search", {"query": question, "top_k": 5})

    def doc(i: int) -> str:
        return str(docs[(i * 11) % len(docs)]["id"])

    queries = {
        "conversation_search": aware,
        "plain_search": plain,
        "conversation_references": lambda i: client.timed(
            "GET", f"conversations/{conversations[i % len(conversations)][0]}/references"
        ),
        "document_references": lambda i: client.timed("GET", f"documents/{doc(i)}/references"),
        "citation_graph": lambda i: client.timed(
            "GET", f"documents/{doc(i)}/citation-graph", params={"depth": 2}
        ),
        "document_conversations": lambda i: client.timed("GET", f"documents/{doc(i)}/conversations"),
        # last: each turn queues a processing job. `chat_turn` starts each turn once the previous
        # turn's job has run (in use, the LLM's answer and the reader's reply come between);
        # `chat_turn_back_to_back` does not wait, so every turn shares the cores with earlier jobs
        "chat_turn": turn,
        "chat_turn_back_to_back": lambda i: turn(i, settle=False),
    }
    out = {}
    for name, query in queries.items():
        for i in range(WARM_UP):
            query(REQUESTS + i)
        stages.clear()
        out[name] = _p([query(i) for i in range(REQUESTS)])
        print(f"  {name}: {out[name]}", flush=True)
        if stages:  # the chat turns' own stage timings (server side), medians
            out[f"{name}_stages_p50"] = {stage: round(_pct(ms, 50), 2) for stage, ms in stages.items()}
            print(f"  {name} stages: {out[f'{name}_stages_p50']}", flush=True)
    return out


def run() -> dict[str, Any]:
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-conversations-"))
    figures: dict[str, Any] = {}
    try:
        with _platform(tmp, "conversations") as (platform, admin):
            client = _Client(platform, admin)
            docs = _documents(client)
            conversations = _reader(client, docs)
            loaded, _peak, _took = _step(
                platform,
                "load_users",
                project_id=client.project,
                users=OTHER_CONVERSATIONS,
                per_user=OTHER_MESSAGES,
                prefix="other",
            )
            counted = client.call("GET", "conversations", params={"limit": 1})["total"]
            figures["setup"] = {"documents": len(docs), "conversations": counted, "bulk": loaded}
            print(f"  setup: {figures['setup']}", flush=True)
            figures["latency_ms"] = _measure(client, conversations, docs)
            client.http.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    return {"rows": _rows(figures), "figures": figures}


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    lat, n = f["latency_ms"], f["setup"]["conversations"]
    plain = ("plain hybrid search of the same questions, p95", lat["plain_search"]["p95"])
    rows = [
        row(
            f"chat turn overhead besides the LLM (extractive, rag, persist, memory processing on; each "
            f"turn after the previous turn's processing job), p95, {n:,} conversations",
            lat["chat_turn"]["p95"],
            "ms",
            target=("<=", 150),
            context=plain,
        ),
        row(
            f"chat turns back to back (each turn beside earlier turns' processing jobs on the same two "
            f"cores), p95, {n:,} conversations",
            lat["chat_turn_back_to_back"]["p95"],
            "ms",
            context=("the same turns, each after the previous turn's job, p95", lat["chat_turn"]["p95"]),
        ),
        row(
            f"conversation-aware search (hybrid, top_k 5), p95, {n:,} conversations",
            lat["conversation_search"]["p95"],
            "ms",
            target=("<=", 200),
            context=plain,
        ),
    ]
    names = {
        "conversation_references": "a conversation's referenced documents",
        "document_references": "a document's references, both directions",
        "citation_graph": "citation graph, depth 2",
        "document_conversations": "conversations that referenced a document",
    }
    rows += [row(f"{label}, p95", lat[key]["p95"], "ms", target=("<=", 50)) for key, label in names.items()]
    return rows
