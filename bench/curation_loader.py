"""Bulk loaders and in-process steps of the curation benchmark, run inside the platform's Django
(`manage.py shell -c`, against the benchmark's running platform) so nodes carry exactly the
properties, scope tokens and relationships the memory app writes. Not measured, except where the
benchmark samples this process's memory (the retention run and its naive peer).

    BENCH_STEP=<step> BENCH_ARGS='{"…": …}' \
        python manage.py shell -c "from bench.curation_loader import main; main()"
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

LOAD = """
UNWIND $conversations AS conv
CREATE (c:Conversation {id: conv.id, project_id: $project_id, key: conv.key, user_id: conv.user_id,
                        application_id: $application_id, thread_id: conv.thread_id,
                        scope_tokens: conv.tokens, started_at: conv.rows[0].timestamp,
                        ended_at: conv.rows[-1].timestamp, message_count: size(conv.rows),
                        last_seq: size(conv.rows), summarized_seq: 0, accessibility: 'shared',
                        anonymize: false})
WITH c, conv
UNWIND range(0, size(conv.rows) - 1) AS i
WITH c, conv, i, conv.rows[i] AS row
CREATE (m:Memory {id: row.id, project_id: $project_id, text: row.text, role: row.role,
                  search_text: row.search_text, timestamp: row.timestamp,
                  application_id: $application_id, user_id: conv.user_id,
                  thread_id: conv.thread_id, scope_tokens: conv.tokens, conversation_id: c.id,
                  seq: i + 1, token_count: 12, processed: true, accessibility: 'shared'})
SET m.embedding = row.embedding
CREATE (m)-[:PART_OF]->(c)
"""

_WORDS = [
    "harbour",
    "crane",
    "invoice",
    "meeting",
    "garden",
    "ticket",
    "river",
    "budget",
    "lantern",
    "orchard",
]
_WORDS += ["violin", "desk", "kettle", "sunrise", "carpet", "window", "railway", "market", "bakery", "museum"]


def _unit(rng: random.Random, dims: int) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(dims)]
    norm = sum(x * x for x in v) ** 0.5
    return [round(x / norm, 6) for x in v]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + "."


class _Loader:
    """Conversations written `tx_rows` messages per transaction, each with the memory app's scope
    key and tokens."""

    def __init__(self, project_id: str, application_id: str, tx_rows: int) -> None:
        self.project_id, self.application_id, self.tx_rows = project_id, application_id, tx_rows
        self.batch: list[dict[str, Any]] = []
        self.loaded = 0

    def add(self, user_id: str, thread_id: str, rows: list[dict[str, Any]]) -> None:
        from memory.scope import Scope, conversation_key, node_tokens
        from memory.text import search_text

        for row in rows:  # the indexed form the memory app writes (memory.text)
            row["search_text"] = search_text(
                text=row["text"], role=row["role"], author_name=None, timestamp=row["timestamp"]
            )
        scope = Scope(application_id=self.application_id, user_id=user_id, thread_id=thread_id)
        self.batch.append(
            {
                "id": str(uuid.uuid4()),
                "key": conversation_key(scope),
                "user_id": user_id,
                "thread_id": thread_id,
                "tokens": node_tokens(self.project_id, scope),
                "rows": rows,
            }
        )
        if sum(len(c["rows"]) for c in self.batch) >= self.tx_rows:
            self.flush()

    def flush(self) -> int:
        from core import graph

        if self.batch:
            graph.write(
                LOAD, project_id=self.project_id, application_id=self.application_id, conversations=self.batch
            )
            self.loaded += sum(len(c["rows"]) for c in self.batch)
            self.batch = []
        return self.loaded


def load_users(args: dict[str, Any]) -> dict[str, Any]:
    """`users` users with `per_user` messages each (one conversation per user), random unit vectors."""
    from django.conf import settings

    rng = random.Random(args.get("seed", 7))
    dims = int(settings.EMBEDDINGS_DIMENSIONS)
    loader = _Loader(args["project_id"], args.get("application_id", "bench"), args.get("tx_rows", 10_000))
    start = datetime.now(UTC) - timedelta(days=args.get("days", 10))
    started = time.perf_counter()
    for u in range(args["users"]):
        user_id = f"{args.get('prefix', 'user')}-{u}"
        rows = [
            {
                "id": str(uuid.uuid4()),
                "text": _text(rng, 10),
                "role": "user" if i % 2 == 0 else "assistant",
                "timestamp": (start + timedelta(minutes=u + i)).strftime(TIMESTAMP_FORMAT),
                "embedding": _unit(rng, dims) if args.get("vectors", True) else None,
            }
            for i in range(args["per_user"])
        ]
        loader.add(user_id, f"{user_id}-t", rows)
    return {"messages": loader.flush(), "load_s": round(time.perf_counter() - started, 1)}


def load_retention(args: dict[str, Any]) -> dict[str, Any]:
    """`conversations` conversations of `per_conversation` messages without vectors; in every
    conversation the first `expired_per_conversation` messages are `age_days` old, the rest recent."""
    rng = random.Random(11)
    loader = _Loader(args["project_id"], "bench", 20_000)
    now = datetime.now(UTC)
    old = now - timedelta(days=args["age_days"])
    started = time.perf_counter()
    per, n_old = args["per_conversation"], args["expired_per_conversation"]
    for c in range(args["conversations"]):
        rows = []
        for i in range(per):
            when = (old if i < n_old else now - timedelta(days=1)) + timedelta(seconds=i)
            rows.append(
                {
                    "id": str(uuid.uuid4()),
                    "text": f"Reach me at user{c}-{i}@example.org. " + _text(rng, 8)
                    if i < n_old
                    else _text(rng, 10),
                    "role": "user",
                    "timestamp": when.strftime(TIMESTAMP_FORMAT),
                    "embedding": None,
                }
            )
        loader.add(f"ret-{c % 1000}", f"ret-t{c}", rows)
    return {
        "messages": loader.flush(),
        "expired": n_old * args["conversations"],
        "load_s": round(time.perf_counter() - started, 1),
    }


def derive(args: dict[str, Any]) -> dict[str, Any]:
    """Facts, preferences, mentions and summaries of one user's messages (what processing would do)."""
    from core import graph
    from memory.services import conversation_summarize, memories_derive

    project_id, user_id = args["project_id"], args["user_id"]
    ids = [
        r["id"]
        for r in graph.read(
            "MATCH (m:Memory {project_id: $p}) WHERE m.user_id = $u RETURN m.id AS id",
            p=project_id,
            u=user_id,
        )
    ]
    totals: dict[str, int] = {}
    for start in range(0, len(ids), 500):
        for key, value in memories_derive(project_id=project_id, memory_ids=ids[start : start + 500]).items():
            totals[key] = totals.get(key, 0) + value
    conversations = graph.read(
        "MATCH (c:Conversation {project_id: $p}) WHERE c.user_id = $u RETURN c.id AS id",
        p=project_id,
        u=user_id,
    )
    for row in conversations:
        conversation_summarize(project_id=project_id, conversation_id=row["id"], force=True)
    totals["summarised_conversations"] = len(conversations)
    return totals


def policy(args: dict[str, Any]) -> dict[str, Any]:
    from curation.models import RetentionPolicy

    created = RetentionPolicy.objects.create(
        name=args["name"],
        project_id=args["project_id"],
        kind=args["kind"],
        age_days=args.get("age_days"),
        action=args["action"],
        enabled=False,  # run by the benchmark, not by beat
    )
    return {"policy_id": created.pk}


def naive_retention(args: dict[str, Any]) -> dict[str, Any]:
    """The peer: read every message of the project into this process and filter the expired ones
    here (what a job without a streaming cutoff query does), then anonymise and embed them in one go
    (everything the run does but the writes)."""
    from core import graph
    from core.embeddings import get_embedder
    from core.text.pii import anonymise

    started = time.perf_counter()
    cutoff = (datetime.now(UTC) - timedelta(days=args["age_days"])).strftime(TIMESTAMP_FORMAT)
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p}) RETURN m.id AS id, m.text AS text, m.timestamp AS ts",
        p=args["project_id"],
    )
    expired = [r for r in rows if r["ts"] < cutoff]
    texts = [anonymise(r["text"]).text for r in expired]
    vectors = get_embedder().embed(texts)  # the same work as the run, minus the writes
    return {
        "read": len(rows),
        "expired": len(expired),
        "anonymised": len(texts),
        "embedded": len(vectors),
        "took_s": round(time.perf_counter() - started, 1),
    }


def baseline(args: dict[str, Any]) -> dict[str, Any]:
    """Django with the embedder loaded and nothing else (the memory floor of both retention runs)."""
    from core.embeddings import get_embedder

    get_embedder().embed(["warm up"] * 64)
    time.sleep(1.0)
    return {}


STEPS = {
    "load_users": load_users,
    "load_retention": load_retention,
    "derive": derive,
    "policy": policy,
    "naive_retention": naive_retention,
    "baseline": baseline,
}


def main() -> None:
    result = STEPS[os.environ["BENCH_STEP"]](json.loads(os.environ.get("BENCH_ARGS", "{}")))
    print("BENCH_RESULT " + json.dumps(result), flush=True)
