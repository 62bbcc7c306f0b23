"""Lazy, idempotent creation of the memory indexes (seed 001, Phase 1B).

The first memory operation of a process creates the vector index on `Memory.embedding`, the
fulltext indexes on memory, summary, fact and preference text, and range indexes on the scope
properties, all `IF NOT EXISTS`; later calls return at once. A server too old for vector indexes
(before Neo4j 5.11) gets a clear error instead of a Cypher syntax error.
"""

from __future__ import annotations

import re
import threading

from core import graph
from core.errors import PlatformError
from memory import cypher

MIN_VECTOR_VERSION = (5, 11)

_ready = False
_lock = threading.Lock()


class MemoryIndexUnavailable(PlatformError):
    status_code = 503
    code = "memory_index_unavailable"


def version_supports_vectors(version: str) -> bool:
    """Whether a Neo4j version string (e.g. "5.26.3", "2025.01.0", "4.4.30") has vector indexes."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    if not match:
        return False
    return (int(match.group(1)), int(match.group(2))) >= MIN_VECTOR_VERSION


def check_version(version: str) -> None:
    if not version_supports_vectors(version):
        raise MemoryIndexUnavailable(
            f"memory needs Neo4j {MIN_VECTOR_VERSION[0]}.{MIN_VECTOR_VERSION[1]} or later for its vector "
            f"index; this server is {version or 'of unknown version'}. Upgrade Neo4j (5.26 LTS is "
            "supported) or point NEO4J_URI at a newer server.",
            details={"server_version": version, "required": "5.11"},
        )


def ensure_memory_indexes(*, overwrite: bool = False) -> list[str]:
    """Create what is missing (all of it again with `overwrite`), once per process."""
    global _ready
    if _ready and not overwrite:
        return []
    with _lock:
        if _ready and not overwrite:
            return []
        check_version(str(graph.ping().get("version") or ""))
        statements = cypher.index_statements()
        if overwrite:
            for name in (cypher.VECTOR_INDEX, cypher.FULLTEXT_INDEX, cypher.LEVEL_FULLTEXT_INDEX):
                graph.write(f"DROP INDEX {name} IF EXISTS")
        for statement in statements:
            graph.write(statement)
        graph.write("CALL db.awaitIndexes(300)")
        _ready = True
        return statements


def forget_ready() -> None:
    """Check again on next use (tests that drop indexes)."""
    global _ready
    with _lock:
        _ready = False
