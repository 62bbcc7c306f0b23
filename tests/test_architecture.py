"""Architecture rules (issue 31): every graph label is written by the one app whose nodes.py defines
it, and no function of the server apps is longer than 80 lines. Pure source checks, no services."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
SERVER_APPS = (
    "core",
    "knowledge",
    "memory",
    "retrieval",
    "sessions_graph",
    "curation",
    "mcp_server",
    "portability",
)
MAX_FUNCTION_LINES = 80

_DDL = re.compile(r"\s*(CREATE|DROP)\s+(INDEX|CONSTRAINT|FULLTEXT|VECTOR|RANGE|TEXT|POINT)\b", re.IGNORECASE)
_WRITES = re.compile(r"\b(CREATE|MERGE|SET|DELETE|REMOVE)\b")
_READS_GRAPH = re.compile(r"\b(MATCH|MERGE|CREATE)\b")
# a node pattern's labels: "(x:A:B", "(:A", "( x :A|B" (label expressions included)
_NODE_LABELS = re.compile(r"\(\s*\w*\s*:\s*([A-Za-z_]\w*(?:\s*[:|&]\s*[A-Za-z_]\w*)*)")


def label_owners() -> dict[str, str]:
    """Label → the app whose nodes.py declares a class of that name (core's shared bases excluded)."""
    owners: dict[str, str] = {}
    for nodes in sorted(REPO.glob("*/nodes.py")):
        app = nodes.parent.name
        if app == "core":
            continue
        for node in ast.parse(nodes.read_text()).body:
            if isinstance(node, ast.ClassDef):
                owners[node.name] = app
    return owners


def foreign_label_writes(app: str, text: str, owners: dict[str, str]) -> set[str]:
    """Labels of other apps named in `text` when it is a Cypher statement that writes."""
    if _DDL.match(text) or not (_WRITES.search(text) and _READS_GRAPH.search(text)):
        return set()
    labels = {
        label for group in _NODE_LABELS.findall(text) for label in re.split(r"\s*[:|&]\s*", group) if label
    }
    return {label for label in labels if owners.get(label, app) != app}


def _app_sources() -> list[tuple[str, Path]]:
    return [
        (app, path)
        for app in SERVER_APPS
        for path in sorted((REPO / app).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def test_owners_are_found() -> None:
    owners = label_owners()
    assert owners["Document"] == "knowledge" and owners["Memory"] == "memory"
    assert owners["Session"] == "sessions_graph" and owners["Entity"] == "knowledge"


def test_the_rule_catches_a_foreign_write() -> None:
    owners = label_owners()
    assert foreign_label_writes("curation", "MATCH (m:Memory {id: $id}) SET m.text = $t", owners) == {
        "Memory"
    }
    assert foreign_label_writes("memory", "MATCH (d)-[:X]->(:Memory|Entity) DETACH DELETE d", owners) == {
        "Entity"
    }
    assert foreign_label_writes("memory", "MATCH (m:Memory {id: $id}) SET m.text = $t", owners) == set()
    assert foreign_label_writes("curation", "MATCH (m:Memory) RETURN m.id", owners) == set()
    assert (
        foreign_label_writes("curation", "CREATE INDEX x IF NOT EXISTS FOR (n:Memory) ON (n.a)", owners)
        == set()
    )


def test_each_label_is_written_by_its_own_app_only() -> None:
    owners = label_owners()
    found = []
    for app, path in _app_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for label in sorted(foreign_label_writes(app, node.value, owners)):
                    found.append(
                        f"{path.relative_to(REPO)}:{node.lineno} writes :{label} ({owners[label]}'s)"
                    )
    assert found == [], "call the owning app's services instead:\n" + "\n".join(found)


def test_no_server_function_is_over_80_lines() -> None:
    long = []
    for _app, path in _app_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == [], "split into named steps:\n" + "\n".join(long)
