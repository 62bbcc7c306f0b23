"""Writes of the knowledge app: submitting documents, running ingestion batches, deleting documents."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
import uuid
from collections import defaultdict
from dataclasses import asdict, replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from neo4j import ManagedTransaction
from neo4j.exceptions import ConstraintError

from core import graph
from core.embeddings import get_embedder
from core.errors import InvalidInput, NotFound
from core.graph.schema import ensure_schema
from core.graph.transfer import GraphOwner, module_labels
from core.jobs import broker_ensure, job_create, job_enqueue
from core.llm.usage import usage_meter
from core.models import Job, Project
from core.progress.events import ProgressEvent, job_progress, publish
from core.runtime.redis_client import get_redis
from core.services import project_embedder_check, project_graph_changed
from core.text.metadata import encode_pairs
from core.text.pii import PLACEHOLDERS, anonymise
from knowledge import cypher
from knowledge import nodes as knowledge_nodes
from knowledge.communities import REBUILD_TASK, communities_schedule
from knowledge.dto import DocumentInput, SubmitResult, SubmittedDocument
from knowledge.models import IngestBatch
from knowledge.pipeline.chunking import chunk_text, search_text
from knowledge.pipeline.extraction import ExtractedEntity, ExtractedRelation, Extraction, entity_key, extract
from knowledge.selectors import INGEST_BATCH_TASK
from knowledge.tenancy import chunk_label, project_fulltext_ensure, project_index_ensure
from knowledge.title_links import title_links

logger = logging.getLogger(__name__)

CHUNK_NAMESPACE = uuid.UUID("6f1c7d1e-2d0a-4a59-9d53-0c8a51f0a001")
INGEST_PHASES = ("parsing", "chunking", "embedding", "extracting", "resolving", "writing")


def content_hash(doc: DocumentInput) -> str:
    digest = hashlib.sha256(doc.text.encode())
    if doc.entities is not None or doc.relations is not None:
        graph_part = {
            "entities": [asdict(e) for e in doc.entities or []],
            "relations": [asdict(r) for r in doc.relations or []],
        }
        digest.update(json.dumps(graph_part, sort_keys=True).encode())
    return digest.hexdigest()


def document_redact(doc: DocumentInput) -> DocumentInput:
    """The project redacts PII at ingest: the text and title get placeholders (a name found in one is
    replaced in both) and the author goes, before anything is stored or hashed."""
    author = [doc.author] if doc.author else []
    title = anonymise(doc.title, known_names=author, phone_region=settings.PII_PHONE_REGION)
    text = anonymise(doc.text, known_names=[*author, *title.names], phone_region=settings.PII_PHONE_REGION)
    if text.names - title.names:
        title = anonymise(
            doc.title, known_names=[*author, *text.names], phone_region=settings.PII_PHONE_REGION
        )
    return replace(
        doc, title=title.text, text=text.text, author=PLACEHOLDERS["person"] if doc.author else None
    )


def _document_row(position: int, doc: DocumentInput, references: list[str]) -> dict[str, Any]:
    """A submitted document as DOCUMENTS_SUBMIT writes it; its key is its source path, else its hash."""
    key = f"path:{doc.source_path}" if doc.source_path else f"sha256:{content_hash(doc)}"
    graph_json = None
    if doc.entities is not None or doc.relations is not None:
        graph_json = json.dumps(
            {
                "entities": [asdict(e) for e in doc.entities or []],
                "relations": [asdict(r) for r in doc.relations or []],
            }
        )
    return {
        "position": position,
        "id": str(uuid.uuid4()),
        "doc_key": key,
        "title": doc.title,
        "source_path": doc.source_path,
        "mime_type": doc.mime_type,
        "author": doc.author,
        "metadata_json": json.dumps(doc.metadata, sort_keys=True) if doc.metadata else None,
        "meta_kv": encode_pairs(doc.metadata or {}),
        "content": doc.text,
        "content_hash": content_hash(doc),
        "graph_json": graph_json,
        "references": references,
    }


def documents_submit(*, project_id: str, documents: list[DocumentInput]) -> SubmitResult:
    """Queue documents for ingestion. Same content (hash) as a stored or queued document: a no-op."""
    project = Project.objects.get(pk=project_id)
    project_embedder_check(project=project)
    if not documents:
        raise InvalidInput("no documents given")
    broker_ensure()
    ensure_schema()
    if project.redact_pii_at_ingest:
        documents = [document_redact(doc) for doc in documents]
    references = _resolve_references(project_id, documents)
    rows = [_document_row(position, doc, references[position]) for position, doc in enumerate(documents)]
    with transaction.atomic():
        job = job_create(
            project_id=project_id,
            kind="ingest",
            task="knowledge.tasks.ingest_job_resume",
            queue=settings.INGEST_QUEUE,
            counts={"documents": len(rows)},
        )
        results = graph.write(cypher.DOCUMENTS_SUBMIT, project_id=project_id, docs=rows)
        by_position = {r["position"]: r for r in results}
        submitted = [
            SubmittedDocument(by_position[i]["id"], "unchanged" if by_position[i]["unchanged"] else "queued")
            for i in range(len(rows))
        ]
        queued = list(dict.fromkeys(s.document_id for s in submitted if s.status == "queued"))
        size = settings.INGEST_BATCH_SIZE
        batches = [
            IngestBatch(job=job, index=i, document_ids=queued[start : start + size])
            for i, start in enumerate(range(0, len(queued), size))
        ]
        IngestBatch.objects.bulk_create(batches)
        job.counts = {
            "documents": len(rows),
            "queued": len(queued),
            "unchanged": len(rows) - len(queued),
            "batches": len(batches),
        }
        if not batches:
            job.status, job.phase, job.progress_pct = Job.Status.SUCCEEDED, "done", 100
            job.finished_at = timezone.now()
        job.save()
        if batches:
            for batch_id in (
                IngestBatch.objects.filter(job=job).order_by("index").values_list("pk", flat=True)
            ):
                job_enqueue(task=INGEST_BATCH_TASK, args=(batch_id,), queue=job.queue)
            _progress(job, "parsing", 1, f"Queued {len(queued)} document(s) in {len(batches)} batch(es)")
    return SubmitResult(job_id=job.id, documents=submitted)


def _resolve_references(project_id: str, documents: list[DocumentInput]) -> list[list[str]]:
    """Caller references (document ids or source paths) → document ids; unknown ones are bad input."""
    wanted = sorted({ref for doc in documents for ref in doc.references})
    if not wanted:
        return [[] for _ in documents]
    found = graph.read(cypher.DOCUMENT_IDS_BY_KEY, project_id=project_id, refs=wanted)
    lookup: dict[str, str] = {}
    for row in found:
        lookup[row["id"]] = row["id"]
        if row["source_path"]:
            lookup[row["source_path"]] = row["id"]
    missing = [ref for ref in wanted if ref not in lookup]
    if missing:
        raise InvalidInput("references name unknown documents", details={"unknown_references": missing[:50]})
    return [sorted({lookup[ref] for ref in doc.references}) for doc in documents]


# --- running a batch -----------------------------------------------------------------------------------


def _progress(job: Job, phase: str, pct: int, summary: str, details: str = "") -> None:
    job_progress(
        job, message_type="ingestion_progress", phase=phase, pct=pct, summary=summary, details=details
    )


def _batch_pct(job: Job, batch: IngestBatch, step: int) -> int:
    total = max(1, job.counts.get("batches", 1))
    done = IngestBatch.objects.filter(job=job, status=IngestBatch.Status.DONE).count()
    return int(5 + 85 * (done + step / len(INGEST_PHASES)) / total)


def ingest_batch_run(*, batch_id: int) -> None:
    """Process one batch. Safe to re-run: a finished batch is skipped, a half-written one is redone
    (each document's old chunks and derived data are replaced in the same transaction)."""
    batch = IngestBatch.objects.select_related("job", "job__project").get(pk=batch_id)
    if batch.status != IngestBatch.Status.PENDING:
        return
    job = batch.job
    project_id = job.project_id
    IngestBatch.objects.filter(pk=batch.pk).update(attempts=batch.attempts + 1)
    if job.status == Job.Status.QUEUED:
        Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(
            status=Job.Status.RUNNING, started_at=timezone.now()
        )
    ensure_schema()
    timings: dict[str, float] = {}
    with usage_meter() as usage:
        clock = time.perf_counter()
        docs = graph.write(cypher.BATCH_CLAIM, project_id=project_id, ids=batch.document_ids)
        _progress(
            job, "parsing", _batch_pct(job, batch, 0), f"Batch {batch.index + 1}: {len(docs)} document(s)"
        )
        timings["parsing"] = time.perf_counter() - clock

        clock = time.perf_counter()
        chunks = _chunked(docs, job.project)
        timings["chunking"] = time.perf_counter() - clock
        _progress(job, "chunking", _batch_pct(job, batch, 1), f"{len(chunks)} chunk(s)")

        clock = time.perf_counter()
        embedder = get_embedder()
        for chunk, vector in zip(chunks, embedder.embed([c["search_text"] for c in chunks]), strict=True):
            chunk["embedding"] = vector
        timings["embedding"] = time.perf_counter() - clock
        _progress(job, "embedding", _batch_pct(job, batch, 2), f"Embedded {len(chunks)} chunk(s)")

        clock = time.perf_counter()
        extractions = _extract_batch(docs, chunks)
        timings["extracting"] = time.perf_counter() - clock
        _progress(job, "extracting", _batch_pct(job, batch, 3), "Extracted entities and relations")

        clock = time.perf_counter()
        entities, mentions, relations, per_doc = _resolve(project_id, chunks, extractions, embedder, timings)
        timings["resolving"] = time.perf_counter() - clock
        _progress(job, "resolving", _batch_pct(job, batch, 4), f"{len(entities)} distinct entities")

        clock = time.perf_counter()
        doc_rows = [
            {
                "id": d["id"],
                "source_path": d["source_path"],
                "references": d["references"],
                **per_doc.get(d["id"], {"chunks": 0, "entities": 0, "relations": 0}),
            }
            for d in docs
        ]
        if not _write(project_id, docs, doc_rows, chunks, entities, mentions, relations, timings):
            logger.info("batch %s was written by another run meanwhile", batch.pk)
            return
        timings["writing"] = time.perf_counter() - clock

    counts = {
        "documents": len(docs),
        "chunks": len(chunks),
        "entities": len(entities),
        "mentions": len(mentions),
        "relations": len(relations),
    }
    _batch_done(batch, counts, usage.as_dict(), timings)


def _write(
    project_id: str,
    docs: list[dict[str, Any]],
    doc_rows: list[dict[str, Any]],
    chunks: list[dict[str, Any]],
    entities: list[dict[str, Any]],
    mentions: list[dict[str, str]],
    relations: list[dict[str, Any]],
    timings: dict[str, float],
) -> bool:
    """Write the batch in one transaction, with the title links of its chunks and titles; False when
    another run of the same batch committed it first (its task delivered again while it ran), in
    which case what that run wrote stands."""
    project_fulltext_ensure(project_id)  # before the project's first chunks: online at once when empty
    named = time.perf_counter()
    links = title_links(project_id, docs, chunks)
    timings["title_links"] = time.perf_counter() - named
    try:
        graph.write_tx(
            lambda tx: _write_batch(
                tx, project_id, doc_rows, chunks, entities, mentions, relations, links, timings
            )
        )
    except ConstraintError:
        if _batch_written(project_id, [d["id"] for d in docs]):
            return False
        raise
    project_graph_changed(project_id=project_id)
    return True


def _batch_done(
    batch: IngestBatch, counts: dict[str, int], usage: dict[str, Any], timings: dict[str, float]
) -> None:
    """Record a written batch (once, however often it ran) and finish its job after the last one."""
    job = batch.job
    with transaction.atomic():
        updated = IngestBatch.objects.filter(pk=batch.pk, status=IngestBatch.Status.PENDING).update(
            status=IngestBatch.Status.DONE,
            counts=counts,
            token_usage=usage,
            timings={k: round(v, 4) for k, v in timings.items()},
            finished_at=timezone.now(),
        )
        if updated:
            _progress(
                job,
                "writing",
                _batch_pct(job, batch, 0),
                f"Batch {batch.index + 1} written",
                f"**{counts['chunks']}** chunks, **{counts['entities']}** entities",
            )
            _finish_job_if_done(job.pk)


def _batch_written(project_id: str, document_ids: list[str]) -> bool:
    row = graph.read(cypher.BATCH_WRITTEN, project_id=project_id, ids=document_ids)[0]
    return bool(row["total"]) and row["ready"] == row["total"]


def _extract_batch(docs: list[dict[str, Any]], chunks: list[dict[str, Any]]) -> dict[str, Extraction]:
    """Per chunk: the caller's graph when given with the document, else the extractor's."""
    given: dict[str, dict[str, Any]] = {d["id"]: json.loads(d["graph_json"]) for d in docs if d["graph_json"]}
    out: dict[str, Extraction] = {}
    first_chunk: dict[str, str] = {}
    for chunk in chunks:
        first_chunk.setdefault(chunk["document_id"], chunk["id"])
    for chunk in chunks:
        supplied = given.get(chunk["document_id"])
        if supplied is None:
            out[chunk["id"]] = extract(
                chunk["text"],
                max_entities=settings.EXTRACT_MAX_ENTITIES_PER_CHUNK,
                gleaning_passes=settings.EXTRACT_GLEANING_PASSES,
            )
            continue
        text = chunk["text"].casefold()
        is_first = first_chunk[chunk["document_id"]] == chunk["id"]
        # a supplied entity belongs to the chunks that name it (to the first chunk when none does)
        ents = [e for e in supplied["entities"] if e["name"].casefold() in text or is_first]
        names = {e["name"] for e in ents}
        rels = [r for r in supplied["relations"] if r["source"] in names and r["target"] in names]
        out[chunk["id"]] = Extraction(
            entities=[ExtractedEntity(e["name"], e["type"], e.get("description", "")) for e in ents],
            relations=[
                ExtractedRelation(r["source"], r["target"], r.get("description", ""), r["weight"])
                for r in rels
            ],
            mode="given",
        )
    return out


def _chunked(docs: list[dict[str, Any]], project: Project) -> list[dict[str, Any]]:
    """The batch's chunks, each with a stable id (document, content and position) and the search
    text it is embedded and indexed by."""
    chunks: list[dict[str, Any]] = []
    for doc in docs:
        for piece in chunk_text(
            doc["content"], size=project.chunk_size_tokens, overlap=project.chunk_overlap_tokens
        ):
            chunk_id = str(uuid.uuid5(CHUNK_NAMESPACE, f"{doc['id']}:{doc['content_hash']}:{piece.index}"))
            chunks.append(
                {
                    "id": chunk_id,
                    "document_id": doc["id"],
                    "index": piece.index,
                    "text": piece.text,
                    "search_text": search_text(doc["title"], piece.headings, piece.text),
                    "token_count": piece.token_count,
                }
            )
    return chunks


def _resolve(
    project_id: str,
    chunks: list[dict[str, Any]],
    extractions: dict[str, Extraction],
    embedder: Any,
    timings: dict[str, float],
) -> tuple[list[dict[str, Any]], list[dict[str, str]], list[dict[str, Any]], dict[str, dict[str, int]]]:
    """Entity resolution: normalised name + type first, then embedding similarity for new names."""
    entities: dict[str, dict[str, Any]] = {}
    mentions: set[tuple[str, str]] = set()
    raw_relations: list[tuple[str, str, str, float, str]] = []
    doc_of = {c["id"]: c["document_id"] for c in chunks}
    for chunk_id, extraction in extractions.items():
        names: dict[str, str] = {}
        for ent in extraction.entities:
            key = entity_key(ent.name, ent.type)
            names[ent.name.casefold()] = key
            current = entities.get(key)
            if current is None:
                entities[key] = {
                    "key": key,
                    "id": str(uuid.uuid4()),
                    "name": ent.name,
                    "type": ent.type.upper(),
                    "description": ent.description,
                }
            elif ent.description and ent.description not in current["description"]:
                current["description"] = (current["description"] + "\n" + ent.description).strip()[:2000]
            mentions.add((chunk_id, key))
        for rel in extraction.relations:
            a, b = names.get(rel.source.casefold()), names.get(rel.target.casefold())
            if a and b and a != b:
                raw_relations.append((min(a, b), max(a, b), rel.description, float(rel.weight), chunk_id))

    aliases = _similar_existing(project_id, entities, embedder, timings)
    for new_key, existing_key in aliases.items():
        entities.pop(new_key, None)
        mentions = {(c, existing_key if k == new_key else k) for c, k in mentions}
        raw_relations = [(aliases.get(a, a), aliases.get(b, b), d, w, c) for a, b, d, w, c in raw_relations]
    relations: dict[tuple[str, str, str], dict[str, Any]] = {}
    for a, b, description, weight, chunk_id in raw_relations:
        a, b = min(a, b), max(a, b)
        if a == b:
            continue
        item = relations.setdefault(
            (a, b, chunk_id),
            {"a": a, "b": b, "chunk_id": chunk_id, "weight": 0.0, "description": description},
        )
        item["weight"] += weight
    per_doc: dict[str, dict[str, int]] = defaultdict(lambda: {"chunks": 0, "entities": 0, "relations": 0})
    for chunk in chunks:
        per_doc[chunk["document_id"]]["chunks"] += 1
    doc_entities: dict[str, set[str]] = defaultdict(set)
    for chunk_id, key in mentions:
        doc_entities[doc_of[chunk_id]].add(key)
    for doc_id, keys in doc_entities.items():
        per_doc[doc_id]["entities"] = len(keys)
    for item in relations.values():
        per_doc[doc_of[item["chunk_id"]]]["relations"] += 1
    mention_rows = [{"chunk_id": c, "key": k} for c, k in sorted(mentions)]
    return list(entities.values()), mention_rows, list(relations.values()), dict(per_doc)


def _name_terms(name: str) -> list[str]:
    return [t for t in re.findall(r"[^\W_]+", name.casefold()) if t not in ("and", "or", "not")]


def _lucene_terms(name: str) -> str:
    """A safe Lucene query on the entity name field: plain lowercase terms, no operators."""
    terms = _name_terms(name)
    return f"name:({' '.join(terms)})" if terms else ""


def _similar_existing(
    project_id: str, entities: dict[str, dict[str, Any]], embedder: Any, timings: dict[str, float]
) -> dict[str, str]:
    """Map entities that are new by name onto an existing entity of the same type whose name embedding
    is similar enough. Candidates come from the entity fulltext index, so only names with a lexical
    neighbour are embedded here; the others get their embedding in the enrichment step that follows
    ingestion (with the communities)."""
    keys = list(entities)
    existing = {r["key"] for r in graph.read(cypher.ENTITY_KEYS_EXISTING, project_id=project_id, keys=keys)}
    for entity in entities.values():
        entity["embedding"] = None  # stored entities keep theirs; new ones may get one below
    new = [entities[k] for k in keys if k not in existing]
    if not new or settings.ENTITY_MERGE_THRESHOLD >= 1.0:
        return {}
    clock = time.perf_counter()
    # a one-word name is too ambiguous to fold into a longer one ("Curie": Marie or Pierre?); it merges
    # by its normalised key only
    queries = [
        {"key": e["key"], "type": e["type"], "query": _lucene_terms(e["name"])}
        for e in new
        if len(_name_terms(e["name"])) > 1
    ]
    rows = graph.read(
        cypher.ENTITY_LEXICAL_NEIGHBOURS,
        project_id=project_id,
        candidates=[q for q in queries if q["query"]],
        limit=settings.ENTITY_RESOLUTION_CANDIDATES,
    )
    # Only names that share most of their words are worth an embedding comparison ("Marie Curie" and
    # "Marie Sklodowska Curie" yes; "Marie Curie" and "Pierre Curie" no).
    neighbours = {}
    for row in rows:
        mine = set(_name_terms(entities[row["key"]]["name"]))
        close = [m for m in row["matches"] if _overlap(mine, set(_name_terms(m["name"]))) >= 0.5]
        if close:
            neighbours[row["key"]] = close
    timings["resolving_lookup"] = time.perf_counter() - clock
    if not neighbours:
        return {}
    clock = time.perf_counter()
    texts = sorted(
        {entities[k]["name"] for k in neighbours}
        | {m["name"] for ms in neighbours.values() for m in ms if m["embedding"] is None}
    )
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    timings["resolving_embedding"] = time.perf_counter() - clock
    aliases: dict[str, str] = {}
    for key, matches in neighbours.items():
        mine = vectors[entities[key]["name"]]
        entities[key]["embedding"] = mine
        best, best_score = None, settings.ENTITY_MERGE_THRESHOLD
        for match in matches:
            theirs = match["embedding"] or vectors[match["name"]]
            score = _cosine(mine, theirs)
            if score >= best_score:
                best, best_score = match["key"], score
        if best is not None:
            aliases[key] = best
    return aliases


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _write_batch(
    tx: ManagedTransaction,
    project_id: str,
    docs: list[dict[str, Any]],
    chunks: list[dict[str, Any]],
    entities: list[dict[str, Any]],
    mentions: list[dict[str, Any]],
    relations: list[dict[str, Any]],
    names: list[dict[str, str]],
    timings: dict[str, float],
) -> None:
    """One transaction: the batch's documents are replaced whole or not at all."""

    def run(step: str, query: str, **params: Any) -> Any:
        clock = time.perf_counter()
        result = tx.run(query, project_id=project_id, **params)
        record = result.single() if step == "remove_old" else result.consume()
        timings[f"writing_{step}"] = timings.get(f"writing_{step}", 0.0) + time.perf_counter() - clock
        return record

    removed = run("remove_old", cypher.OLD_CHUNKS_REMOVE, document_ids=[d["id"] for d in docs])
    old_chunk_ids = removed["chunk_ids"] if removed else []
    touched = removed["touched"] if removed else []
    if old_chunk_ids:
        run("prune_related", cypher.RELATED_PRUNE, entity_ids=touched, chunk_ids=old_chunk_ids)
    run("chunks", cypher.CHUNKS_CREATE, chunks=chunks, chunk_label=chunk_label(project_id))
    links = [
        {"from": a["id"], "to": b["id"]}
        for a, b in zip(chunks, chunks[1:], strict=False)
        if a["document_id"] == b["document_id"]
    ]
    run("next_chunk", cypher.NEXT_CHUNK_LINK, links=links)
    run("title_links_old", cypher.TITLE_LINKS_TO_REMOVE, document_ids=[d["id"] for d in docs])
    run("title_links", cypher.TITLE_LINKS_CREATE, links=names)
    run("entities", cypher.ENTITIES_MERGE, entities=entities)
    run("mentions", cypher.MENTIONS_CREATE, mentions=mentions)
    run("related", cypher.RELATED_ADD, relations=relations)
    if touched:
        run("orphans", cypher.ORPHAN_ENTITIES_DELETE, entity_ids=touched)
    run("documents", cypher.DOCUMENTS_FINISH, docs=docs)
    run("stale", cypher.COMMUNITIES_MARK_STALE)


def _finish_job_if_done(job_id: str) -> None:
    job = Job.objects.select_for_update().get(pk=job_id)
    batches = list(IngestBatch.objects.filter(job=job))
    if any(b.status == IngestBatch.Status.PENDING for b in batches) or job.status in (
        Job.Status.SUCCEEDED,
        Job.Status.FAILED,
    ):
        return
    counts = dict(job.counts)
    usage: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "calls": 0}
    timings: dict[str, float] = defaultdict(float)
    for batch in batches:
        for key, value in batch.counts.items():
            if key != "documents":
                counts[key] = counts.get(key, 0) + value
        for key in usage:
            usage[key] += batch.token_usage.get(key, 0)
        for key, value in batch.timings.items():
            timings[key] += value
    failed = [b for b in batches if b.status == IngestBatch.Status.FAILED]
    job.counts = counts
    job.token_usage = usage
    job.timings = {k: round(v, 3) for k, v in timings.items()}
    job.status = Job.Status.FAILED if failed else Job.Status.SUCCEEDED
    job.errors = job.errors + [b.error for b in failed if b.error]
    job.phase, job.progress_pct, job.finished_at = "done", 100, timezone.now()
    if job.started_at:
        job.timings["wall_sec"] = round((job.finished_at - job.started_at).total_seconds(), 3)
    job.save()
    publish(
        ProgressEvent(
            message_type="ingestion_progress",
            project_id=job.project_id,
            job_id=job.id,
            phase="done" if not failed else "failed",
            progress_pct=100,
            thought_summary=f"Ingestion {job.status}",
            details_md=f"**{counts.get('chunks', 0)}** chunks, **{counts.get('entities', 0)}** entities",
        )
    )
    transaction.on_commit(lambda: communities_schedule(project_id=job.project_id))
    transaction.on_commit(lambda: project_index_ensure(job.project_id), robust=True)


def ingest_batch_fail(*, batch_id: int, error: str) -> None:
    """Give up on a batch: its documents are marked failed with the reason; the job records it."""
    batch = IngestBatch.objects.select_related("job").get(pk=batch_id)
    graph.write(
        cypher.DOCUMENTS_FAIL,
        project_id=batch.job.project_id,
        docs=[{"id": doc_id, "error": error[:500]} for doc_id in batch.document_ids],
    )
    with transaction.atomic():
        IngestBatch.objects.filter(pk=batch_id, status=IngestBatch.Status.PENDING).update(
            status=IngestBatch.Status.FAILED, error=error[:2000], finished_at=timezone.now()
        )
        _finish_job_if_done(batch.job_id)


def ingest_job_resume(*, job_id: str) -> int:
    """Queue a failed ingestion job's failed batches again: their documents that failed are pending
    again (a document changed since keeps its new state). Returns how many batches were queued."""
    job = Job.objects.get(pk=job_id)
    failed = list(IngestBatch.objects.filter(job=job, status=IngestBatch.Status.FAILED).order_by("index"))
    if not failed:
        return 0
    graph.write(
        cypher.DOCUMENTS_RETRY, project_id=job.project_id, ids=[d for b in failed for d in b.document_ids]
    )
    with transaction.atomic():
        IngestBatch.objects.filter(pk__in=[b.pk for b in failed]).update(
            status=IngestBatch.Status.PENDING, error="", finished_at=None
        )
        Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING, finished_at=None)
        for batch in failed:
            job_enqueue(task=INGEST_BATCH_TASK, args=(batch.pk,), queue=job.queue)
    return len(failed)


def communities_rebuild_submit(*, project_id: str) -> tuple[Job, bool]:
    """The project's queued or running community rebuild, or a new one queued after the commit
    (created: True). Two concurrent requests never both create one (a short Redis lock)."""
    with communities_job_lock(project_id=project_id), transaction.atomic():
        job, created = communities_job_get_or_create(project_id=project_id)
        if created:
            job_enqueue(task=job.task, args=(job.id,), queue=job.queue)
    return job, created


def document_delete(*, project_id: str, document_id: str) -> None:
    """Remove a document and what only it supports: chunks, mentions, entities, relations."""
    rows = graph.read(cypher.DOCUMENT_GET, project_id=project_id, id=document_id)
    if not rows:
        raise NotFound("document not found")

    def work(tx: ManagedTransaction) -> None:
        removed = tx.run(cypher.OLD_CHUNKS_REMOVE, project_id=project_id, document_ids=[document_id]).single()
        if removed and removed["chunk_ids"]:
            tx.run(
                cypher.RELATED_PRUNE,
                project_id=project_id,
                entity_ids=removed["touched"],
                chunk_ids=removed["chunk_ids"],
            ).consume()
            tx.run(
                cypher.ORPHAN_ENTITIES_DELETE, project_id=project_id, entity_ids=removed["touched"]
            ).consume()
        tx.run(cypher.DOCUMENT_DELETE, project_id=project_id, id=document_id).consume()
        tx.run(cypher.COMMUNITIES_MARK_STALE, project_id=project_id).consume()

    graph.write_tx(work)
    project_graph_changed(project_id=project_id)


def communities_job_lock(*, project_id: str) -> Any:
    """A short Redis lock around looking for and creating a project's rebuild job, so two concurrent
    requests cannot both create one (SQLite does not lock rows for a read)."""
    return get_redis().lock(f"lock:communities-job:{project_id}", timeout=30, blocking_timeout=10)


def communities_job_get_or_create(*, project_id: str) -> tuple[Job, bool]:
    """The project's queued or running community rebuild, or a new queued one (created: True).

    A running job older than CELERY_TASK_TIME_LIMIT is taken as dead and not coalesced with."""
    oldest_live = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    live = (
        Job.objects.filter(project_id=project_id, kind="communities", created_at__gte=oldest_live)
        .filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING])
        .order_by("-created_at")
        .first()
    )
    if live is not None:
        return live, False
    job = job_create(
        project_id=project_id, kind="communities", task=REBUILD_TASK, queue=settings.INGEST_QUEUE
    )
    return job, True


# --- export and import (portability/) ----------------------------------------------------------------


def _import_finished(project_id: str) -> None:
    """After an import: the project's fulltext index (and its vector index when it is large) exist."""
    project_fulltext_ensure(project_id, wait_sec=settings.PORTABILITY_INDEX_WAIT_SEC)
    project_index_ensure(project_id)


GRAPH = GraphOwner(
    app="knowledge",
    labels=module_labels(knowledge_nodes),
    extra_labels=lambda label, project_id: [chunk_label(project_id)] if label == "Chunk" else [],
    after_import=_import_finished,
)
