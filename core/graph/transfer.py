"""Bulk reads and writes of a project's nodes and relationships, for export and import.

Labels and relationship types cannot be query parameters where an index must serve the lookup, so
they are checked against `IDENTIFIER` and put into the query text. Nothing here knows a label: each
app calls these with its own labels (the app that defines a label is the only one that writes it,
docs/architecture.md), and the portability app asks each app in turn.

Values are the property values Neo4j stores: strings, numbers, booleans, lists of them, and temporal
values, which `encode_value` turns into `{"$t": kind, "v": iso}` for JSON and `decode_props` back.
Long lists of floats (embeddings) whose every value is exactly a 32-bit float travel packed:
`pack_props` turns them into `{"$t": "f32", "v": base64 of little-endian float32}`, a third of their
JSON text and no float formatting, and `decode_props` gives back the same doubles. When the server
has the platform's transfer procedure and function (the embedded launcher registers them:
platform/neo4j, TransferProcedures.java), it writes an export's lines itself, a page per record
(`export_pages`), and unpacks an import's float lists (`create_nodes`), so neither an embedding's
384 floats nor a record per row cross Bolt; an external server without them is read and written
through Cypher, to the same archive.
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import neo4j
import neo4j.time

from core import graph
from core.errors import InvalidInput
from core.nodes import TenantNode

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
PACKED_MIN_LENGTH = 16  # float lists at least this long are packed (an embedding); shorter stay JSON

_TEMPORAL: dict[str, Any] = {
    "datetime": neo4j.time.DateTime,
    "date": neo4j.time.Date,
    "time": neo4j.time.Time,
}


def identifier(name: str, *, what: str = "label") -> str:
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise InvalidInput(f"{what} {name!r} is not a plain identifier", details={what: str(name)[:100]})
    return name


def encode_value(value: Any) -> Any:
    """The JSON form of a value JSON has no type for (orjson's `default` hook)."""
    for kind, cls in _TEMPORAL.items():
        if isinstance(value, cls):
            return {"$t": kind, "v": value.iso_format()}
    if isinstance(value, neo4j.time.Duration):
        return {"$t": "duration", "v": [value.months, value.days, value.seconds, value.nanoseconds]}
    raise TypeError(f"a property value of type {type(value).__name__} cannot be exported")


def _packed_floats(values: list[Any]) -> dict[str, str] | None:
    """The packed form of a list of floats, or None unless every value is exactly a float32 (NaN
    never is: it compares unequal to itself)."""
    try:
        single = array("f", values)
    except (TypeError, OverflowError):
        return None
    if single.tolist() != values:
        return None
    if sys.byteorder != "little":
        single.byteswap()
    return {"$t": "f32", "v": base64.b64encode(single.tobytes()).decode("ascii")}


def pack_props(props: dict[str, Any]) -> dict[str, Any]:
    """`props` with its long float lists packed (a new dict when one was; else `props` itself)."""
    packed = props
    for key, value in props.items():
        if type(value) is list and len(value) >= PACKED_MIN_LENGTH and type(value[0]) is float:
            form = _packed_floats(value)
            if form is not None:
                if packed is props:
                    packed = dict(props)
                packed[key] = form
    return packed


def _packed_bytes(raw: str) -> bytes:
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput("a packed float list is not base64") from exc
    if len(data) % 4:
        raise InvalidInput("a packed float list's length is not a multiple of 4 bytes")
    return data


def _unpacked_floats(raw: str) -> list[float]:
    data = _packed_bytes(raw)
    single = array("f")
    single.frombytes(data)
    if sys.byteorder != "little":
        single.byteswap()
    return single.tolist()


def decode_value(value: Any, *, keep_packed: bool = False) -> Any:
    """The stored form of an archive value; with `keep_packed` a packed float list is checked and
    stays packed, for the server's `kp.transfer.unpacked` to unpack."""
    if not isinstance(value, dict):
        return value
    kind, raw = value.get("$t"), value.get("v")
    if kind == "f32" and isinstance(raw, str):
        if keep_packed:
            _packed_bytes(raw)
            return {"$t": "f32", "v": raw}
        return _unpacked_floats(raw)
    if kind in _TEMPORAL and isinstance(raw, str):
        try:
            return _TEMPORAL[kind].from_iso_format(raw)
        except ValueError as exc:
            raise InvalidInput(f"bad {kind} value {raw!r}") from exc
    if kind == "duration" and isinstance(raw, list) and len(raw) == 4:
        months, days, seconds, nanoseconds = raw
        return neo4j.time.Duration(months=months, days=days, seconds=seconds, nanoseconds=nanoseconds)
    raise InvalidInput(
        "a property value is a map, which Neo4j cannot store", details={"value": str(value)[:100]}
    )


def decode_props(props: dict[str, Any], *, keep_packed: bool = False) -> dict[str, Any]:
    return {key: decode_value(value, keep_packed=keep_packed) for key, value in props.items()}


SERVER_EXPORT = "kp.transfer.export"
SERVER_UNPACKED = "kp.transfer.unpacked"
_server_transfer: dict[int, bool] = {}  # id of the driver -> whether its server has them


def server_transfer() -> bool:
    """Whether the server has the platform's transfer procedure and function (asked once per
    driver): the embedded launcher registers them, an external server has them only if installed."""
    driver = graph.get_driver()
    known = _server_transfer.get(id(driver))
    if known is None:
        procedures = graph.read_column(
            "SHOW PROCEDURES YIELD name WHERE name = $name RETURN name", "name", name=SERVER_EXPORT
        )
        functions = graph.read_column(
            "SHOW FUNCTIONS YIELD name WHERE name = $name RETURN name", "name", name=SERVER_UNPACKED
        )
        known = _server_transfer[id(driver)] = bool(procedures) and bool(functions)
    return known


def _records(query: str, params: dict[str, Any]) -> Iterator[list[Any]]:
    """The records of one read transaction, as lists of values. The server streams the whole result
    at once (fetch_size -1, no pause for a pull every 1,000 records: a 100,000-chunk project's reads
    went from 6,166 to 9,464 nodes/s) and the driver reads it off the socket as we go, TCP's flow
    control holding the rest on the server, so memory holds a few records whatever the size of the
    result (bench/portability.py measures the export's peak)."""
    with (
        graph.translate_errors(),
        graph.get_driver().session(
            database=graph.database(), default_access_mode=neo4j.READ_ACCESS, fetch_size=-1
        ) as session,
        session.begin_transaction() as tx,
    ):
        # not record.data(): it walks every value (each float of an embedding) to convert graph
        # types, which made reading 5,000 chunks take 3 s instead of 0.5 s
        yield from (list(record) for record in tx.run(query, params))


def _pages(query: str, params: dict[str, Any], keys: tuple[str, ...], batch: int) -> Iterator[list[Any]]:
    """Records as dicts of `keys`, `batch` at a time."""
    page: list[Any] = []
    for record in _records(query, params):
        page.append(dict(zip(keys, record, strict=True)) if len(keys) > 1 else record[0])
        if len(page) >= batch:
            yield page
            page = []
    if page:
        yield page


def node_pages(label: str, project_id: str, *, batch: int = 1000) -> Iterator[list[dict[str, Any]]]:
    """Every property map of the project's nodes with `label`, in pages."""
    query = f"MATCH (n:{identifier(label)}) WHERE n.project_id = $project_id RETURN properties(n) AS p"
    yield from _pages(query, {"project_id": project_id}, ("p",), batch)


def relationship_pages(
    start_label: str, project_id: str, *, batch: int = 1000
) -> Iterator[list[dict[str, Any]]]:
    """The project's relationships leaving nodes with `start_label`: start id (`s`), type (`t`), the
    end node's labels (`el`) and id (`e`), properties (`p`). Relationships to another project's
    nodes are not the project's."""
    query = (
        f"MATCH (a:{identifier(start_label)})-[r]->(b) WHERE a.project_id = $project_id "
        "AND b.project_id = $project_id "
        "RETURN a.id AS s, type(r) AS t, labels(b) AS el, b.id AS e, properties(r) AS p"
    )
    yield from _pages(query, {"project_id": project_id}, ("s", "t", "el", "e", "p"), batch)


@dataclass(frozen=True)
class ExportPage:
    """A page of `kp.transfer.export`: `count` archive lines of `member` ("nodes" or
    "relationships") as NDJSON bytes; `counts` by label or type (of those lines and of `rows`);
    `rows`, those the server left to the caller's encoder (a value JSON has no type for, such as a
    date), as archive rows; `skipped`, relationships not written as an end was not."""

    member: str
    lines: bytes
    count: int
    counts: dict[str, int]
    rows: list[dict[str, Any]]
    skipped: int


def export_pages(project_id: str, labels: list[str], *, batch: int = 1000) -> Iterator[ExportPage]:
    """The project's nodes with `labels`, then the relationships between them, as archive lines
    written by the server (`server_transfer`), in one read transaction."""
    query = (
        f"CALL {SERVER_EXPORT}($project_id, $labels, $size) "
        "YIELD member, lines, count, counts, rows, skipped "
        "RETURN member, lines, count, counts, rows, skipped"
    )
    params = {"project_id": project_id, "labels": [identifier(x) for x in labels], "size": batch}
    for member, lines, count, counts, rows, skipped in _records(query, params):
        yield ExportPage(member, bytes(lines), count, counts, rows, skipped)


def count_nodes(label: str, project_id: str) -> int:
    rows = graph.read(
        f"MATCH (n:{identifier(label)}) WHERE n.project_id = $project_id RETURN count(n) AS n",
        project_id=project_id,
    )
    return int(rows[0]["n"])


def existing_ids(
    label: str, ids: list[str], *, limit: int = 20, except_project: str | None = None
) -> list[str]:
    """Which of `ids` a node with `label` already has (in any project but `except_project`)."""
    rows = graph.read(
        f"UNWIND $ids AS id MATCH (n:{identifier(label)} {{id: id}}) "
        "WHERE $except IS NULL OR n.project_id <> $except RETURN n.id AS id LIMIT $limit",
        ids=ids,
        limit=limit,
        **{"except": except_project},
    )
    return [str(row["id"]) for row in rows]


def create_nodes(
    labels: list[str], project_id: str, rows: list[dict[str, Any]], *, packed: bool = False
) -> int:
    """Create one node per property map, in one transaction, with `labels` (the first is the one
    its id is unique on) and `project_id` set to the importing project's. With `packed` the maps
    may hold packed float lists, which the server unpacks (`server_transfer`)."""
    label_text = ":".join(identifier(label) for label in labels)
    value = f"{SERVER_UNPACKED}(p)" if packed else "p"
    query = (
        f"UNWIND $rows AS p CREATE (n:{label_text}) SET n = {value}, n.project_id = $project_id "
        "RETURN count(n) AS n"
    )
    return int(graph.write(query, rows=rows, project_id=project_id)[0]["n"])


def create_relationships(
    start_label: str, rel_type: str, end_label: str, project_id: str, rows: list[dict[str, Any]]
) -> int:
    """Create `(start)-[:rel_type]->(end)` for each row `{s, e, p}` between the project's nodes. A row
    whose ends are missing is an error: the count tells the caller how many were made."""
    start, end = identifier(start_label), identifier(end_label)
    # the hints keep the planner on the id lookups: left to itself it may scan the project's nodes
    # by `project_id` for every row (0.9 s per 1,000 relationships in a 3,000-chunk project)
    query = (
        f"UNWIND $rows AS r MATCH (a:{start} {{id: r.s}}) USING INDEX a:{start}(id) "
        f"MATCH (b:{end} {{id: r.e}}) USING INDEX b:{end}(id) "
        "WHERE a.project_id = $project_id AND b.project_id = $project_id "
        f"CREATE (a)-[x:{identifier(rel_type, what='type')}]->(b) SET x = r.p RETURN count(x) AS n"
    )
    return int(graph.write(query, rows=rows, project_id=project_id)[0]["n"])


def delete_project_nodes(label: str, project_id: str, *, batch: int = 5000) -> int:
    """Delete the project's nodes with `label` and their relationships, `batch` per transaction."""
    query = (
        f"MATCH (n:{identifier(label)}) WHERE n.project_id = $project_id "
        "WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS n"
    )
    total = 0
    while True:
        removed = int(graph.write(query, project_id=project_id, batch=batch)[0]["n"])
        total += removed
        if removed < batch:
            return total


def module_labels(module: ModuleType) -> tuple[str, ...]:
    """The labels of the concrete tenant node classes a nodes module defines."""
    found = []
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, TenantNode)
            and value.__module__ == module.__name__
            and "__label__" in value.__dict__  # abstract bases get none
        ):
            found.append(value.__label__)
    return tuple(found)


@dataclass(frozen=True)
class GraphOwner:
    """What one app owns of the graph, as export and import see it: its labels (those its nodes.py
    defines), the labels a node gets beside its own on import (a chunk's per-project label), how a
    node's properties that were derived from its project's id change when it moves to another
    project (`rewrite(props, source_project_id, project_id)`), and what to do once the project's
    nodes are in (its per-project indexes)."""

    app: str
    labels: tuple[str, ...]
    extra_labels: Callable[[str, str], list[str]] = field(default=lambda label, project_id: [])
    rewrite: Callable[[dict[str, Any], str, str], dict[str, Any]] = field(
        default=lambda props, source, target: props
    )
    after_import: Callable[[str], None] = field(default=lambda project_id: None)

    def check(self, label: str) -> str:
        if label not in self.labels:
            raise InvalidInput(f"{self.app} does not own the label {label!r}", details={"label": label})
        return label

    def import_nodes(
        self, *, label: str, source_project_id: str, project_id: str, rows: list[dict[str, Any]]
    ) -> int:
        self.check(label)
        labels = [label, *self.extra_labels(label, project_id)]
        packed = server_transfer()
        props = [
            self.rewrite(decode_props(row, keep_packed=packed), source_project_id, project_id) for row in rows
        ]
        return create_nodes(labels, project_id, props, packed=packed)

    def import_relationships(
        self, *, start_label: str, rel_type: str, end_label: str, project_id: str, rows: list[dict[str, Any]]
    ) -> int:
        self.check(start_label)
        decoded = [{"s": row["s"], "e": row["e"], "p": decode_props(row.get("p") or {})} for row in rows]
        return create_relationships(start_label, rel_type, end_label, project_id, decoded)

    def erase(self, *, project_id: str) -> int:
        return sum(delete_project_nodes(label, project_id) for label in self.labels)
