"""Per-project names in the graph: every chunk also carries its project's own label, and a project
large enough for it gets its own vector index on that label (DESIGN.md section 3, docs/decisions.md).

Labels and index names cannot be query parameters in a schema statement, so they are built here
from the project id with everything but [0-9a-z] removed.
"""

from __future__ import annotations

import re
import threading


def _token(project_id: str) -> str:
    token = re.sub(r"[^0-9a-z]", "", project_id.lower())
    if not token:
        raise ValueError(f"project id {project_id!r} has no usable characters")
    return token


def chunk_label(project_id: str) -> str:
    return f"Chunk_{_token(project_id)}"


def chunk_vector_index(project_id: str) -> str:
    return f"chunk_embedding_{_token(project_id)}"


# --- a project's own vector index ------------------------------------------------------------------

_online: set[str] = set()
_lock = threading.Lock()


def project_index_create(project_id: str) -> None:
    """Create the project's vector index if it does not exist; Neo4j populates it in the background."""
    from django.conf import settings

    from core import graph

    graph.write_autocommit(
        f"CREATE VECTOR INDEX {chunk_vector_index(project_id)} IF NOT EXISTS "
        f"FOR (c:{chunk_label(project_id)}) ON (c.embedding) "
        f"OPTIONS {{indexConfig: {{`vector.dimensions`: {int(settings.EMBEDDINGS_DIMENSIONS)}, "
        "`vector.similarity_function`: 'cosine'}}"
    )


def project_index_online(project_id: str, *, create: bool = True) -> bool:
    """Whether the project's vector index can answer queries; asks for it to be built when missing."""
    from core import graph

    name = chunk_vector_index(project_id)
    with _lock:
        if name in _online:
            return True
    rows = graph.read("SHOW VECTOR INDEXES YIELD name, state WHERE name = $name RETURN state", name=name)
    if rows and rows[0]["state"] == "ONLINE":
        with _lock:
            _online.add(name)
        return True
    if not rows and create:
        project_index_create(project_id)
    return False


def project_index_forget(project_id: str) -> None:
    """After the index failed a query (dropped, for instance): look it up again next time."""
    with _lock:
        _online.discard(chunk_vector_index(project_id))


def project_index_ensure(project_id: str) -> bool:
    """After ingestion: build the project's index once it has more chunks than an exact scan should
    cover (RETRIEVAL_EXACT_SCAN_MAX_CHUNKS). Returns whether an index was requested."""
    from django.conf import settings

    from core import graph

    size = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN count(c) AS n", p=project_id)[0]["n"]
    if size <= settings.RETRIEVAL_EXACT_SCAN_MAX_CHUNKS:
        return False
    project_index_create(project_id)
    return True
