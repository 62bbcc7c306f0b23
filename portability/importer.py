"""Import: an archive (portability.archive) loaded into one project, through the apps that own its
labels (portability.owners), in batches of PORTABILITY_BATCH rows per transaction, written by
PORTABILITY_IMPORT_THREADS threads at once while this thread reads the archive ahead: one transaction
at a time left Neo4j idle while the worker parsed and packed the next batch, and the worker idle while
Neo4j wrote. Every node is written before the first relationship. Two relationship batches can lock
the same nodes (an entity many chunks mention) in opposite orders; Neo4j then aborts one as a
deadlock and the driver runs it again (a transient error).

All or nothing: the project is empty before (the request checks it, and a run starts by erasing what
an interrupted run of the same job left), and any failure erases everything the run wrote before
it is reported. A node keeps its id; its `project_id` (and what was derived from it) becomes the
importing project's.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

from django.conf import settings

from core.graph.schema import ensure_schema
from core.graph.transfer import IDENTIFIER, count_nodes, existing_ids
from portability import archive
from portability.archive import ArchiveInvalid
from portability.owners import OWNERS, owner_of

Progress = Callable[[str, int], None]
MAX_REPORTED_IDS = 20


def _node_row(row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    label, props = row.get("label"), row.get("props")
    if not isinstance(props, dict) or not isinstance(props.get("id"), str) or not props["id"]:
        raise ArchiveInvalid(f"{archive.NODES}: a node has no properties with a string id")
    owner_of(label)
    return str(label), props


def _relationship_key(row: dict[str, Any]) -> tuple[str, str, str]:
    keys = (row.get("start_label"), row.get("type"), row.get("end_label"))
    if not all(isinstance(key, str) for key in keys) or not isinstance(row.get("props", {}), dict):
        raise ArchiveInvalid(f"{archive.RELATIONSHIPS}: a relationship lacks its type, labels or properties")
    owner_of(keys[0])
    owner_of(keys[2])
    if not IDENTIFIER.match(str(keys[1])):
        raise ArchiveInvalid(f"{archive.RELATIONSHIPS}: {str(keys[1])[:100]!r} is not a relationship type")
    return str(keys[0]), str(keys[1]), str(keys[2])


def preflight(source: IO[bytes], *, replacing: str | None = None) -> tuple[dict[str, Any], list[str], int]:
    """Read the whole archive: its manifest, checksums and rows are checked, and its node ids looked
    up in the database; ids the project `replacing` holds do not count (the load erases its graph
    first). Returns the manifest, up to 20 ids that exist already, and how many do."""
    ensure_schema()  # the id lookups below go through each label's uniqueness constraint
    manifest: dict[str, Any] = {}
    pending: dict[str, list[str]] = defaultdict(list)
    found: list[str] = []
    clashes = 0

    def flush(label: str) -> None:
        nonlocal clashes
        hits = existing_ids(
            label, pending.pop(label), limit=settings.PORTABILITY_BATCH * 5, except_project=replacing
        )
        clashes += len(hits)
        found.extend(hits[: MAX_REPORTED_IDS - len(found)])

    for kind, value in archive.read(source):
        if kind == "manifest":
            manifest = value
            continue
        member, line = value
        row = archive.parse_line(member, line)
        if member == archive.NODES:
            label, props = _node_row(row)
            pending[label].append(props["id"])
            if len(pending[label]) >= settings.PORTABILITY_BATCH * 5:
                flush(label)
        else:
            _relationship_key(row)
    for label in list(pending):
        flush(label)
    return manifest, found, clashes


def erase(project_id: str) -> int:
    return sum(owner.erase(project_id=project_id) for owner in OWNERS)


class _Loader:
    """Rows gathered into batches and written through their owners, on `pool`."""

    def __init__(
        self,
        source_project_id: str,
        project_id: str,
        progress: Progress,
        pool: ThreadPoolExecutor,
        read_ahead: int,
    ) -> None:
        self.source, self.project_id, self.progress = source_project_id, project_id, progress
        self.nodes: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.rels: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        self.written = {"nodes": 0, "relationships": 0}
        self.relating = False  # every node written, relationships under way
        # (phase, what, rows sent, rows written): settled in order, a failure raising where it is settled
        self.pool, self.in_flight = pool, deque[tuple[str, str, int, Future[int]]]()
        self.max_in_flight = read_ahead  # batches read from the archive ahead of the writes

    def add(self, member: str, row: dict[str, Any]) -> None:
        if member == archive.NODES:
            label, props = _node_row(row)
            self.nodes[label].append(props)
            if len(self.nodes[label]) >= settings.PORTABILITY_BATCH:
                self.flush_nodes(label)
        else:
            if not self.relating:  # the relationships name the nodes: all of them written first
                self.nodes_done()
                self.relating = True
            key = _relationship_key(row)
            self.rels[key].append({"s": row.get("start"), "e": row.get("end"), "p": row.get("props") or {}})
            if len(self.rels[key]) >= settings.PORTABILITY_BATCH:
                self.flush_relationships(key)

    def flush_nodes(self, label: str) -> None:
        rows = self.nodes.pop(label, [])
        if rows:
            self._submit(
                "nodes",
                label,
                len(rows),
                owner_of(label).import_nodes,
                label=label,
                source_project_id=self.source,
                project_id=self.project_id,
                rows=rows,
            )

    def _submit(self, phase: str, what: str, sent: int, write: Callable[..., int], **batch: Any) -> None:
        self.in_flight.append((phase, what, sent, self.pool.submit(write, **batch)))
        while len(self.in_flight) >= self.max_in_flight:
            self._settle_oldest()

    def _settle_oldest(self) -> None:
        phase, what, sent, future = self.in_flight.popleft()
        made = future.result()  # a batch's failure raises here
        if phase == "relationships" and made != sent:
            raise ArchiveInvalid(
                f"{archive.RELATIONSHIPS}: {sent - made} {what} relationships name nodes the archive lacks"
            )
        self.written[phase] += made
        self.progress(phase, self.written[phase])

    def nodes_done(self) -> None:
        """Every node batch gathered so far written (before relationships can name them)."""
        for label in list(self.nodes):
            self.flush_nodes(label)
        while self.in_flight:
            self._settle_oldest()

    def flush_relationships(self, key: tuple[str, str, str]) -> None:
        rows = self.rels.pop(key, [])
        if rows:
            start_label, rel_type, end_label = key
            self._submit(
                "relationships",
                rel_type,
                len(rows),
                owner_of(start_label).import_relationships,
                start_label=start_label,
                rel_type=rel_type,
                end_label=end_label,
                project_id=self.project_id,
                rows=rows,
            )

    def finish(self) -> None:
        self.nodes_done()
        for key in list(self.rels):
            self.flush_relationships(key)
        while self.in_flight:
            self._settle_oldest()


def _check_counts(manifest: dict[str, Any], project_id: str) -> None:
    expected = manifest["counts"].get("nodes") or {}
    for label, count in expected.items():
        have = count_nodes(owner_of(label).check(label), project_id)
        if have != count:
            raise ArchiveInvalid(f"the archive's manifest counts {count} {label} nodes, its data {have}")


def load(source: IO[bytes], *, project_id: str, progress: Progress) -> dict[str, int]:
    """Load the archive into the (empty) project; on any failure the project is emptied again."""
    ensure_schema()  # ids unique per label, and the lookups of relationship ends by id
    erase(project_id)
    loader: _Loader | None = None
    threads = max(1, settings.PORTABILITY_IMPORT_THREADS)
    pool = ThreadPoolExecutor(threads, thread_name_prefix="import")
    try:
        for kind, value in archive.read(source):
            if kind == "manifest":
                manifest = value
                source_id = str(manifest["source"].get("project_id") or "")
                loader = _Loader(source_id, project_id, progress, pool, read_ahead=2 * threads)
                continue
            member, line = value
            assert loader is not None  # noqa: S101 - archive.read yields the manifest first
            loader.add(member, archive.parse_line(member, line))
        assert loader is not None  # noqa: S101
        loader.finish()
        _check_counts(manifest, project_id)
        for owner in OWNERS:
            owner.after_import(project_id)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # no batch may land after the erase
        erase(project_id)
        raise
    finally:
        pool.shutdown(wait=True)
    return loader.written
