from io import StringIO

from django.core.management import call_command

from core import graph
from core.graph.schema import all_statements


def _schema_names() -> set[str]:
    constraints = {r["name"] for r in graph.read("SHOW CONSTRAINTS YIELD name RETURN name")}
    indexes = {r["name"] for r in graph.read("SHOW INDEXES YIELD name RETURN name")}
    return constraints | indexes


def test_graph_schema_creates_constraints_and_is_idempotent() -> None:
    out = StringIO()
    call_command("graph_schema", stdout=out)
    first = _schema_names()
    assert "constraint_unique_Project_id" in first
    assert "index_Project_project_id" in first

    call_command("graph_schema", stdout=out)  # second run: no error, nothing new
    assert _schema_names() == first
    assert "graph schema ready" in out.getvalue()


def test_every_statement_is_idempotent_cypher() -> None:
    statements = all_statements()
    assert statements
    assert all("IF NOT EXISTS" in s for s in statements)


def test_unique_id_constraint_is_enforced() -> None:
    call_command("graph_schema", stdout=StringIO())
    graph.write("CREATE (:Project {id: 'dup-probe', project_id: 'dup-probe', name: 'x'})")
    try:
        try:
            graph.write("CREATE (:Project {id: 'dup-probe', project_id: 'dup-probe', name: 'y'})")
        except Exception as exc:  # noqa: BLE001
            assert "already exists" in str(exc)
        else:
            raise AssertionError("duplicate Project id was accepted")
    finally:
        graph.write("MATCH (p:Project {id: 'dup-probe'}) DETACH DELETE p")
