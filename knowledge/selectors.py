"""Reads of the knowledge app."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from core import graph
from core.errors import InvalidInput, NotFound
from core.models import Job
from core.runtime.lost_tasks import ExpectedMessage
from knowledge import cypher
from knowledge.models import IngestBatch
from knowledge.pipeline.parsing import standardise_source_path

INGEST_BATCH_TASK = "knowledge.tasks.ingest_batch"


def _document(row: dict[str, Any]) -> dict[str, Any]:
    doc = dict(row)
    doc["metadata"] = json.loads(doc.pop("metadata_json") or "{}")
    names = {"chunk_count": "chunks", "entity_count": "entities", "relation_count": "relations"}
    doc["counts"] = {name: doc.pop(field) or 0 for field, name in names.items()}
    return doc


def document_get(*, project_id: str, document_id: str) -> dict[str, Any]:
    rows = graph.read(cypher.DOCUMENT_GET, project_id=project_id, id=document_id)
    if not rows:
        raise NotFound("document not found")
    return _document(rows[0]["doc"])


def document_list(
    *, project_id: str, status: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    rows = graph.read(cypher.DOCUMENTS_LIST, project_id=project_id, status=status, limit=limit, offset=offset)
    total = graph.read(cypher.DOCUMENTS_COUNT, project_id=project_id, status=status)[0]["n"]
    return [_document(r["doc"]) for r in rows], total


def chunk_get(*, project_id: str, chunk_id: str) -> dict[str, Any]:
    """One chunk with its document's name; another project's chunk is not found."""
    rows = graph.read(cypher.CHUNK_GET, project_id=project_id, id=chunk_id)
    if not rows:
        raise NotFound("chunk not found")
    return rows[0]


def document_source(*, project_id: str, document_id: str) -> dict[str, Any]:
    """What a document was ingested from: title, text, source path, MIME type, author, metadata."""
    rows = graph.read(cypher.DOCUMENT_SOURCE, project_id=project_id, id=document_id)
    if not rows:
        raise NotFound("no such document in this project")
    doc = dict(rows[0]["doc"])
    doc["metadata"] = json.loads(doc.pop("metadata_json") or "{}")
    return doc


def entities_named(*, project_id: str, grams: list[str]) -> dict[str, list[str]]:
    """The element ids of the project's entities whose normalised name is each gram (grams that name
    no entity are left out). Other apps link to entities by these ids and never by entity keys."""
    if not grams or not graph.read(cypher.ENTITIES_ANY, project_id=project_id):
        return {}
    rows = graph.read(cypher.ENTITIES_NAMED, project_id=project_id, grams=sorted(set(grams)))
    return {r["gram"]: list(r["refs"]) for r in rows if r["refs"]}


@dataclass(frozen=True)
class ResolvedReference:
    """What one caller reference names: a document, and the chunk when the reference was a chunk id.
    `*_ref` are element ids, by which other apps link to these nodes."""

    document_id: str
    document_ref: str
    chunk_id: str | None = None
    chunk_ref: str | None = None


def references_resolve(*, project_id: str, refs: list[str]) -> dict[str, ResolvedReference]:
    """Document ids, chunk ids or source paths of the project → what they name. A source path names
    the most recently updated document ingested from it. References that name nothing in this
    project (unknown, deleted, another project's) are left out: the caller decides what that means."""
    wanted = sorted(set(refs))
    if not wanted:
        return {}
    paths = {}
    for ref in wanted:
        try:
            path = standardise_source_path(ref)
        except InvalidInput:
            continue
        if path and path != ref:
            paths[path] = ref
    rows = graph.read(cypher.REFERENCES_RESOLVE, project_id=project_id, refs=wanted + sorted(paths))
    found: dict[str, ResolvedReference] = {}
    for row in rows:
        resolved = ResolvedReference(
            row["document_id"], row["document_ref"], row["chunk_id"], row["chunk_ref"]
        )
        found.setdefault(row["ref"], resolved)
    for path, ref in paths.items():
        if path in found:
            found.setdefault(ref, found.pop(path))
    return {ref: found[ref] for ref in wanted if ref in found}


def documents_brief(*, project_id: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    """id → {id, title, author, source_path, updated_at} for the ids that are documents of the project."""
    if not ids:
        return {}
    rows = graph.read(cypher.DOCUMENTS_BRIEF, project_id=project_id, ids=sorted(set(ids)))
    return {r["id"]: dict(r) for r in rows}


def document_require(*, project_id: str, document_id: str) -> None:
    if not graph.read(cypher.DOCUMENT_EXISTS, project_id=project_id, id=document_id):
        raise NotFound("document not found")


def document_references(
    *, project_id: str, document_id: str, direction: str, limit: int, offset: int
) -> list[dict[str, Any]]:
    """The documents this one references (`out`), those referencing it (`in`), or both, with the
    reference's type and context."""
    document_require(project_id=project_id, document_id=document_id)
    return graph.read(
        cypher.DOCUMENT_REFERENCES,
        project_id=project_id,
        id=document_id,
        out=direction in ("out", "both"),
        limit=limit,
        offset=offset,
        **{"in": direction in ("in", "both")},
    )


CITATION_MAX_NODES = 500


def citation_graph(*, project_id: str, document_id: str, depth: int) -> dict[str, Any]:
    """Seed 003's citation graph: the documents this one cites and those citing it, each at its
    shortest distance (1..depth) per direction, and the REFERENCES edges among all of them. A
    breadth-first walk of at most CITATION_MAX_NODES documents per direction (`truncated` says so)."""
    document_require(project_id=project_id, document_id=document_id)
    nodes: list[dict[str, Any]] = []
    truncated = False
    for direction in ("cites", "cited_by"):
        seen = {document_id: 0}
        frontier = [document_id]
        for hop in range(1, depth + 1):
            if not frontier:
                break
            step = cypher.CITATION_STEP[direction]
            rows = graph.read(
                step, project_id=project_id, frontier=frontier, limit=CITATION_MAX_NODES + len(seen)
            )
            new = [r["id"] for r in rows if r["id"] not in seen]
            room = CITATION_MAX_NODES - (len(seen) - 1)
            if len(new) > room:
                new, truncated = new[:room], True
            seen.update({fid: hop for fid in new})
            frontier = new
        nodes += [{"id": i, "direction": direction, "depth": d} for i, d in seen.items() if i != document_id]
    briefs = documents_brief(project_id=project_id, ids=[n["id"] for n in nodes] + [document_id])
    ids = sorted(briefs)
    edges = graph.read(cypher.REFERENCE_EDGES, project_id=project_id, ids=ids) if len(ids) > 1 else []
    nodes = [{**briefs[n["id"]], **n} for n in nodes if n["id"] in briefs]
    nodes.sort(key=lambda n: (n["depth"], n["direction"], n.get("title") or "", n["id"]))
    return {
        "document": briefs[document_id],
        "depth": depth,
        "nodes": nodes,
        "edges": edges,
        "truncated": truncated,
    }


_GLOB_MAX_CHARS = 500
_REGEX_SPECIAL = set(".^$+{}[]()|\\")


def glob_pattern(glob: str) -> tuple[str, str]:
    """A source-path glob → (literal prefix, anchored regular expression). `*` matches within one
    path segment, `**` across segments, `?` one character other than '/'; every other character is
    literal. A glob with a '..' segment or a NUL byte is refused: it could only name paths that
    standardised source paths never hold."""
    if not glob or len(glob) > _GLOB_MAX_CHARS or "\x00" in glob:
        raise InvalidInput(
            f"source_path must be a glob of 1 to {_GLOB_MAX_CHARS} characters",
            details={"field": "source_path"},
        )
    if ".." in glob.replace("\\", "/").split("/"):
        raise InvalidInput("source_path may not contain '..' segments", details={"field": "source_path"})
    out: list[str] = []
    prefix: list[str] = []
    literal = True
    i = 0
    while i < len(glob):
        ch = glob[i]
        if glob.startswith("**", i):
            out.append(".*")
            literal = False
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
            literal = False
        elif ch == "?":
            out.append("[^/]")
            literal = False
        else:
            out.append("\\" + ch if ch in _REGEX_SPECIAL else ch)
            if literal:
                prefix.append(ch)
        i += 1
    return "".join(prefix), "(?s)" + "".join(out)


def documents_by_source(
    *, project_id: str, glob: str, status: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    prefix, pattern = glob_pattern(glob)
    params = {"project_id": project_id, "prefix": prefix, "pattern": pattern, "status": status}
    rows = graph.read(cypher.DOCUMENTS_BY_SOURCE, limit=limit, offset=offset, **params)
    total = graph.read(cypher.DOCUMENTS_BY_SOURCE_COUNT, **params)[0]["n"]
    return [_document(r["doc"]) for r in rows], total


def ingest_batches_expected() -> list[ExpectedMessage]:
    """The task message each pending batch of an unfinished ingestion job expects in the broker
    (core.runtime.lost_tasks sends a lost one again; a batch is safe to run again)."""
    rows = IngestBatch.objects.filter(
        status=IngestBatch.Status.PENDING, job__status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
    ).values_list("pk", "job__queue")
    return [ExpectedMessage(INGEST_BATCH_TASK, (pk,), queue) for pk, queue in rows]
