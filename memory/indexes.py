"""Lazy, idempotent creation of the memory indexes (seed 001, Phase 1B).

The first memory operation of a process creates the vector index on `Memory.embedding`, the
fulltext indexes on memory, summary, fact and preference text, and range indexes on the scope
properties, all `IF NOT EXISTS`; later calls return at once. A server too old for vector indexes
(before Neo4j 5.11) gets a clear error instead of a Cypher syntax error.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from core import graph
from core.errors import PlatformError
from memory import cypher
from memory import text as message_text

MIN_VECTOR_VERSION = (5, 11)
logger = logging.getLogger("memory.indexes")

_ready = False
_filtered = False  # the vector index carries cypher.VECTOR_INDEX_FILTERS (Neo4j 2026.01+)
_lock = threading.Lock()


class MemoryIndexUnavailable(PlatformError):
    status_code = 503
    code = "memory_index_unavailable"


def _version(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def version_supports_vectors(version: str) -> bool:
    """Whether a Neo4j version string (e.g. "5.26.3", "2025.01.0", "4.4.30") has vector indexes."""
    return _version(version) >= MIN_VECTOR_VERSION


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
    global _ready, _filtered
    if _ready and not overwrite:
        return []
    with _lock:
        if _ready and not overwrite:
            return []
        version = str(graph.ping().get("version") or "")
        check_version(version)
        hnsw_options = _version(version) >= cypher.HNSW_OPTIONS_SINCE
        filters = _version(version) >= cypher.FILTERED_VECTOR_SINCE
        statements = cypher.index_statements(hnsw_options=hnsw_options, filters=filters)
        if overwrite:
            for name in (cypher.VECTOR_INDEX, cypher.FULLTEXT_INDEX, cypher.LEVEL_FULLTEXT_INDEX):
                graph.write(f"DROP INDEX {name} IF EXISTS")
        else:
            _drop_fulltext_of_another_definition()
            if filters:
                _drop_unfiltered_vector_index()
        for statement in statements:
            graph.write(statement)
        graph.write("CALL db.awaitIndexes(300)")
        _backfill_indexed_forms()
        _report_config_drift(hnsw_options)
        _filtered = filters
        _ready = True
        return statements


def filtered_vector_index() -> bool:
    """Whether user-filtered vector searches can go through the index (cypher.USER_VECTOR_SEARCH)."""
    ensure_memory_indexes()
    return _filtered


def _drop_fulltext_of_another_definition() -> None:
    """A memory fulltext index built with another analyzer than cypher.FULLTEXT_ANALYZER (before text
    was case- and accent-folded) or on other properties (the message index before it indexed
    `search_text`, memory.text) is dropped here and built again by the caller."""
    rows = graph.read(
        "SHOW FULLTEXT INDEXES YIELD name, properties, options WHERE name IN $names "
        "RETURN name, properties, options.indexConfig['fulltext.analyzer'] AS analyzer",
        names=list(cypher.FULLTEXT_PROPERTIES),
    )
    for row in rows:
        wanted = list(cypher.FULLTEXT_PROPERTIES[row["name"]])
        if row["analyzer"] != cypher.FULLTEXT_ANALYZER or list(row["properties"]) != wanted:
            logger.warning(
                "the memory fulltext index %s is rebuilt with the %s analyzer on %s (it had %s on %s)",
                row["name"],
                cypher.FULLTEXT_ANALYZER,
                ", ".join(wanted),
                row["analyzer"],
                ", ".join(row["properties"]),
            )
            graph.write(f"DROP INDEX {row['name']} IF EXISTS")


def _backfill_indexed_forms(batch: int = 5000) -> int:
    """Messages stored before messages had an indexed form (`search_text`) or mention keys
    (`mention_keys`, memory.text) get them, in batches; returns how many. Their embeddings stay those of
    their text."""
    done = 0
    while rows := graph.read(cypher.INDEXED_FORM_MISSING, limit=batch):
        graph.write(
            cypher.INDEXED_FORM_SET,
            rows=[{"id": r["id"], **message_text.indexed(**r["message"])} for r in rows],
        )
        done += len(rows)
    if done:
        logger.warning("the indexed form and mention keys of %d stored messages were written", done)
    return done


def _drop_unfiltered_vector_index() -> None:
    """A vector index built before the platform filtered by user inside it (or on an older Neo4j) is
    rebuilt with the filter properties: dropped here, created again by the caller. Searches scan
    exactly while it populates."""
    rows = graph.read(
        "SHOW VECTOR INDEXES YIELD name, properties WHERE name = $name RETURN properties",
        name=cypher.VECTOR_INDEX,
    )
    if rows and not set(cypher.VECTOR_INDEX_FILTERS) <= set(rows[0]["properties"]):
        logger.warning(
            "the memory vector index %s is rebuilt with its filter properties (%s); searches of large "
            "scopes scan exactly while it populates",
            cypher.VECTOR_INDEX,
            ", ".join(cypher.VECTOR_INDEX_FILTERS),
        )
        graph.write(f"DROP INDEX {cypher.VECTOR_INDEX} IF EXISTS")


def _report_config_drift(hnsw_options: bool) -> None:
    """An index built before a setting changed keeps its old build options (CREATE … IF NOT EXISTS
    leaves it alone): say so once per process, with what to do."""
    if not hnsw_options:
        logger.warning(
            "this Neo4j predates 5.26: the memory vector index is built with its defaults, not "
            "MEMORY_VECTOR_INDEX_M/EF_CONSTRUCTION/QUANTIZATION"
        )
        return
    built = built_vector_index_config()
    wanted = cypher.vector_index_config()
    differ = {
        key: (built.get(key), value)
        for key, value in wanted.items()
        if key.startswith(("vector.hnsw.", "vector.quantization.")) and built.get(key) != value
    }
    if differ:
        logger.warning(
            "the memory vector index %s was built with other options than the settings ask (%s); they "
            "apply when it is created: DROP INDEX %s and restart the platform, whose first memory "
            "operation recreates it (searches of large scopes scan exactly while it populates)",
            cypher.VECTOR_INDEX,
            ", ".join(f"{k}: built {b!r}, setting {w!r}" for k, (b, w) in differ.items()),
            cypher.VECTOR_INDEX,
        )


def built_vector_index_config() -> dict[str, Any]:
    """The memory vector index's `indexConfig` as the server reports it ({} without the index). Neo4j
    2026 reports quantization as `vector.quantization.type` (NONE, or BINARY when enabled at creation);
    it is read back as the `vector.quantization.enabled` that 5.26 reports and the settings use."""
    rows = graph.read(cypher.VECTOR_INDEX_CONFIG, name=cypher.VECTOR_INDEX)
    built = dict((rows[0]["config"] or {}) if rows else {})
    kind = built.pop("vector.quantization.type", None)
    if kind is not None and "vector.quantization.enabled" not in built:
        built["vector.quantization.enabled"] = str(kind).upper() != "NONE"
    return built


def forget_ready() -> None:
    """Check again on next use (tests that drop indexes)."""
    global _ready
    with _lock:
        _ready = False
