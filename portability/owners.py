"""The apps that own the graph, as export and import see them (core.graph.transfer.GraphOwner): each
label is read and written through the app that defines it."""

from __future__ import annotations

from core.graph.transfer import GraphOwner
from knowledge.services import GRAPH as KNOWLEDGE_GRAPH
from memory.services import GRAPH as MEMORY_GRAPH
from portability.archive import ArchiveInvalid
from sessions_graph.services import GRAPH as SESSIONS_GRAPH

OWNERS: tuple[GraphOwner, ...] = (KNOWLEDGE_GRAPH, MEMORY_GRAPH, SESSIONS_GRAPH)
LABELS: tuple[str, ...] = tuple(label for owner in OWNERS for label in owner.labels)
_BY_LABEL = {label: owner for owner in OWNERS for label in owner.labels}


def owner_of(label: object) -> GraphOwner:
    owner = _BY_LABEL.get(label) if isinstance(label, str) else None
    if owner is None:
        raise ArchiveInvalid(
            f"the archive holds the unknown label {label!r}", details={"label": str(label)[:100]}
        )
    return owner


def canonical_label(labels: list[str]) -> str | None:
    """The label a node is known by among all it carries (a chunk's per-project label is not it)."""
    return next((label for label in labels if label in _BY_LABEL), None)
