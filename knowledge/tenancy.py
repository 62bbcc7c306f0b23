"""Per-project names of the knowledge graph: every chunk also carries its project's own label; every project
gets its own fulltext index on that label (so its BM25 statistics are its own), and a project large
enough for it its own vector index (DESIGN.md section 3, docs/decisions.md).

Labels and index names cannot be query parameters in a schema statement, so they are built here
from the project id with everything but [0-9a-z] removed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from django.conf import settings
from neo4j.exceptions import ClientError
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from core import graph
from core.errors import DependencyUnavailable


def _token(project_id: str) -> str:
    token = re.sub(r"[^0-9a-z]", "", project_id.lower())
    if not token:
        raise ValueError(f"project id {project_id!r} has no usable characters")
    return token


def chunk_label(project_id: str) -> str:
    return f"Chunk_{_token(project_id)}"


def chunk_vector_index(project_id: str) -> str:
    return f"chunk_embedding_{_token(project_id)}"


def chunk_fulltext_index(project_id: str) -> str:
    return f"chunk_search_{_token(project_id)}"


_online: set[str] = set()  # names of per-project indexes seen ONLINE by this process
_lock = threading.Lock()


def _index_state(name: str) -> str | None:
    rows = graph.read("SHOW INDEXES YIELD name, state WHERE name = $name RETURN state", name=name)
    return str(rows[0]["state"]) if rows else None


def _seen_online(name: str) -> bool:
    with _lock:
        if name in _online:
            return True
    if _index_state(name) == "ONLINE":
        with _lock:
            _online.add(name)
        return True
    return False


def _online_or_requested(name: str, create: Callable[[], None] | None) -> bool:
    """Whether index `name` can answer queries; when it does not exist, `create` asks for it."""
    if _seen_online(name):
        return True
    if create is not None and _index_state(name) is None:
        create()
    return False


EQUIVALENT_INDEX = "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists"


@retry(
    retry=retry_if_exception_type(DependencyUnavailable),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.5, max=4),
    reraise=True,
)
def _create_index(statement: str) -> None:
    """Run a `CREATE … INDEX … IF NOT EXISTS`. Two processes creating the same index at once (two
    ingestion batches of a new project) both pass IF NOT EXISTS, and the later commit fails as
    an equivalent rule: the index they asked for exists, which is what was wanted. The statement is
    idempotent, so a connection refused or lost on the way (a loaded server answering a burst of new
    connections late) is tried again."""
    try:
        graph.write_autocommit(statement)
    except ClientError as exc:
        if exc.code != EQUIVALENT_INDEX:
            raise


def _forget(name: str) -> None:
    """After the index failed a query (dropped, for instance): look it up again next time."""
    with _lock:
        _online.discard(name)


# --- a project's own fulltext index ----------------------------------------------------------------


def fulltext_analyzer() -> str:
    return str(settings.RETRIEVAL_FULLTEXT_ANALYZER)


def fulltext_index_statement(project_id: str, analyzer: str) -> str:
    """The project's fulltext index: its chunks' `search_text` and `document_id`, by `analyzer`."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", analyzer):
        raise ValueError(f"{analyzer!r} is not an analyzer name")
    return (
        f"CREATE FULLTEXT INDEX {chunk_fulltext_index(project_id)} IF NOT EXISTS "
        f"FOR (c:{chunk_label(project_id)}) ON EACH [c.search_text, c.document_id] "
        f"OPTIONS {{indexConfig: {{`fulltext.analyzer`: '{analyzer}'}}}}"
    )


def project_fulltext_create(project_id: str) -> None:
    """Create the project's fulltext index (analysed by RETRIEVAL_FULLTEXT_ANALYZER) if it does not
    exist; Neo4j populates it in the background."""
    _create_index(fulltext_index_statement(project_id, fulltext_analyzer()))


def project_fulltext_ensure(project_id: str, *, wait_sec: float = 60.0) -> bool:
    """Before a project's chunks are written: its fulltext index exists, and is waited for up to
    `wait_sec` (an index created on an empty project is online at once). Returns whether it is online."""
    name = chunk_fulltext_index(project_id)
    with _lock:
        if name in _online:
            return True
    project_fulltext_create(project_id)
    try:
        graph.write_autocommit("CALL db.awaitIndex($name, $sec)", name=name, sec=int(max(1, wait_sec)))
    except Exception:  # still populating (a large project's first index): queries fall back meanwhile
        return False
    return _seen_online(name)


def project_fulltext_online(project_id: str, *, create: bool = True) -> bool:
    """Whether the project's fulltext index can answer queries; asks for it to be built when missing."""
    build = (lambda: project_fulltext_create(project_id)) if create else None
    return _online_or_requested(chunk_fulltext_index(project_id), build)


def project_fulltext_forget(project_id: str) -> None:
    _forget(chunk_fulltext_index(project_id))


# --- a project's own vector index ------------------------------------------------------------------


def project_index_create(project_id: str) -> None:
    """Create the project's vector index if it does not exist; Neo4j populates it in the background."""
    _create_index(
        f"CREATE VECTOR INDEX {chunk_vector_index(project_id)} IF NOT EXISTS "
        f"FOR (c:{chunk_label(project_id)}) ON (c.embedding) "
        f"OPTIONS {{indexConfig: {{`vector.dimensions`: {int(settings.EMBEDDINGS_DIMENSIONS)}, "
        "`vector.similarity_function`: 'cosine'}}"
    )


def project_index_online(project_id: str, *, create: bool = True) -> bool:
    """Whether the project's vector index can answer queries; asks for it to be built when missing."""
    build = (lambda: project_index_create(project_id)) if create else None
    return _online_or_requested(chunk_vector_index(project_id), build)


def project_index_forget(project_id: str) -> None:
    _forget(chunk_vector_index(project_id))


def project_index_ensure(project_id: str) -> bool:
    """After ingestion: build the project's index once it has more chunks than an exact scan should
    cover (RETRIEVAL_EXACT_SCAN_MAX_CHUNKS). Returns whether an index was requested."""
    size = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN count(c) AS n", p=project_id)[0]["n"]
    if size <= settings.RETRIEVAL_EXACT_SCAN_MAX_CHUNKS:
        return False
    project_index_create(project_id)
    return True
