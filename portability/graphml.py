"""Export in GraphML (http://graphml.graphdrawing.org/) for graph tools such as Gephi, yEd or
NetworkX: one `<node>` per node (its label in the `labels` attribute, as Neo4j's own GraphML export
writes it), one `<edge>` per relationship, each property a `<data>` element. GraphML has no list or
date types, so lists (embeddings) and temporal values are written as their JSON text.

GraphML declares every key before the graph, so the graph is written to a scratch file first while
the keys and their types are collected; memory holds one page of rows and the set of node ids.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from typing import IO, Any
from xml.sax.saxutils import escape, quoteattr

import orjson

from core.graph.transfer import encode_value
from core.models import Project
from portability.exporter import Progress, Walk, project_nodes, project_relationships

# characters XML 1.0 does not allow, even escaped
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_TYPES = ((bool, "boolean"), (int, "long"), (float, "double"), (str, "string"))


def _kind(value: Any) -> str:
    for cls, name in _TYPES:
        if isinstance(value, cls):
            return name
    return "string"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return _NOT_XML.sub("\ufffd", str(value))
    return _NOT_XML.sub("\ufffd", orjson.dumps(value, default=encode_value).decode())


class _Keys:
    """The `<key>` declarations seen so far: one per (element, property), its type the first seen
    (a property seen with two types is declared a string; every value is text in the file anyway)."""

    def __init__(self) -> None:
        self.types: dict[tuple[str, str], str] = {}

    def data(self, element: str, props: dict[str, Any]) -> str:
        parts = []
        for name, value in props.items():
            if value is None:
                continue
            kind = _kind(value)
            seen = self.types.setdefault((element, name), kind)
            if seen != kind:
                self.types[(element, name)] = "string"
            parts.append(f"<data key={quoteattr(self.key_id(element, name))}>{escape(_text(value))}</data>")
        return "".join(parts)

    @staticmethod
    def key_id(element: str, name: str) -> str:
        return f"{element[0]}_{name}"

    def declarations(self) -> str:
        return "".join(
            f'<key id={quoteattr(self.key_id(element, name))} for="{element}" attr.name={quoteattr(name)} '
            f'attr.type="{kind}"/>\n'
            for (element, name), kind in sorted(self.types.items())
        )


def export_graphml(project: Project, target: IO[bytes], progress: Progress) -> Walk:
    walk, ids, keys = Walk(), set[str](), _Keys()
    with tempfile.TemporaryFile(prefix="kp-graphml-") as body:
        for label, props in project_nodes(project.id, walk, ids):
            attrs = f"id={quoteattr(props['id'])} labels={quoteattr(':' + label)}"
            body.write(f"<node {attrs}>{keys.data('node', props)}</node>\n".encode())
            if len(ids) % 10_000 == 0:
                progress("nodes", len(ids))
        for n, row in enumerate(project_relationships(project.id, walk, ids), start=1):
            ends = f"source={quoteattr(row['start'])} target={quoteattr(row['end'])}"
            attrs = f'id="e{n}" {ends} label={quoteattr(row["type"])}'
            body.write(f"<edge {attrs}>{keys.data('edge', row['props'])}</edge>\n".encode())
        head = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
            'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
            f"{keys.declarations()}"
            f'<graph id={quoteattr(project.id)} edgedefault="directed">\n'
        )
        target.write(head.encode())
        body.seek(0)
        shutil.copyfileobj(body, target, 1 << 20)
        target.write(b"</graph>\n</graphml>\n")
    return walk
