"""Helpers of the DRIFT tests: a corpus with communities, a progress listener and an LLM responder
that answers each DRIFT prompt the way a model would (citing ids listed in the prompt)."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from django.test import override_settings

from core import graph
from core.runtime.redis_client import get_redis
from knowledge.communities import communities_rebuild
from knowledge.dto import DocumentInput
from tests.retrieval.corpus import DOCS
from tests.retrieval.helpers import ingest_now
from tests.support.openai_server import Step


def ingest_with_communities(project_id: str, documents: list[DocumentInput] | None = None) -> list[str]:
    """The corpus ingested and clustered extractively (a test's scripted LLM is only for DRIFT)."""
    with override_settings(LLM_PROVIDER="none"):
        ids = ingest_now(project_id, documents or DOCS)
        communities_rebuild(project_id=project_id)
    return ids


def chunk_ids_of(project_id: str) -> set[str]:
    rows = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.id AS id", p=project_id)
    return {r["id"] for r in rows}


def retrieve(client: Any, **body: Any) -> Any:
    return client.post("/retrieve", body, format="json")


class ProgressListener:
    """Collects the retrieval_progress events of one retrieval id from the Redis pub/sub channel."""

    def __init__(self, retrieval_id: str, channel: str = "ui:retrieval_progress") -> None:
        self.retrieval_id = retrieval_id
        self.events: list[dict[str, Any]] = []
        self._pubsub = get_redis().pubsub()
        self._pubsub.subscribe(channel)
        self._pubsub.get_message(timeout=2)  # subscription confirmation
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
            if message and message["type"] == "message":
                event = json.loads(message["data"])
                if event.get("retrieval_id") == self.retrieval_id:
                    self.events.append(event)

    def stop(self, settle_sec: float = 0.3) -> list[dict[str, Any]]:
        time.sleep(settle_sec)
        self._stop.set()
        self._thread.join(timeout=2)
        self._pubsub.close()
        return self.events


_CHUNK_IDS = re.compile(r"Valid chunk ids: (.*)")
_COMMUNITY_IDS = re.compile(r"Valid community ids: (.*)")
_QUESTION = re.compile(r"Follow-up question: (.*)")


def listed(pattern: re.Pattern[str], text: str) -> list[str]:
    match = pattern.search(text)
    return [x.strip() for x in match.group(1).split(",") if x.strip()] if match else []


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def kind_of(body: dict[str, Any]) -> str:
    text = prompt_text(body)
    if "DRIFT-Search Primer" in text:
        return "primer"
    if "DRIFT-Search Local Executor" in text:
        return "local"
    if "DRIFT-Search Aggregator" in text:
        return "aggregator"
    return "hyde"


class DriftModel:
    """A scripted model: valid answers citing the first listed chunk ids; hooks change one kind."""

    def __init__(self, *, followups: int = 3, extra_citations: list[Any] | None = None) -> None:
        self.followups = followups
        self.extra_citations = extra_citations or []
        self.calls: dict[str, int] = {}
        self.override: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Step:
        kind = kind_of(body)
        with self._lock:
            self.calls[kind] = self.calls.get(kind, 0) + 1
        hook = self.override.get(kind)
        if hook is not None:
            step = hook(body)
            if step is not None:
                return step
        text = prompt_text(body)
        if kind == "hyde":
            return Step(content="A hypothetical paragraph about engines, bread and ice.")
        if kind == "primer":
            communities = listed(_COMMUNITY_IDS, text)
            followups = (
                [
                    {
                        "question": f"Follow-up {i} about the question?",
                        "target_communities": communities[i % len(communities) : i % len(communities) + 1],
                    }
                    for i in range(self.followups)
                ]
                if communities
                else []
            )
            return Step(
                content=json.dumps(
                    {"initial_answer": "A first answer.", "followups": followups, "rationale": "r"}
                )
            )
        if kind == "local":
            ids = listed(_CHUNK_IDS, text)
            question = (_QUESTION.search(text) or re.search("(.*)", "")).group(1)  # type: ignore[union-attr]
            citations = [{"chunk_id": i, "span": f"evidence for {question[:30]}"} for i in ids[:2]]
            return Step(
                content=json.dumps(
                    {
                        "answer": f"Local answer to {question}",
                        "citations": citations + self.extra_citations,
                        "new_followups": [],
                        "confidence": 0.8,
                        "should_continue": False,
                    }
                )
            )
        ids = listed(_CHUNK_IDS, text)
        return Step(
            content=json.dumps(
                {
                    "final_answer": "The final answer.",
                    "key_facts": [{"fact": "A key fact.", "citations": ids[:2]}],
                    "residual_uncertainty": "Some doubt.",
                }
            )
        )
