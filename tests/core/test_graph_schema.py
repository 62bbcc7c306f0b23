from io import StringIO

from django.core.management import call_command

from core import graph
from core.graph.schema import all_statements
from tests.support.processes import manage, platform_env


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
    assert all("IF NOT EXISTS" in s or s.startswith("DROP INDEX") and "IF EXISTS" in s for s in statements)


def test_a_fresh_process_creates_every_apps_constraints_and_indexes() -> None:
    """The node classes of every app count, not only those some earlier import happened to load."""
    graph.write_autocommit("DROP CONSTRAINT constraint_unique_Chunk_id IF EXISTS")
    graph.write_autocommit("DROP INDEX index_Chunk_project_id IF EXISTS")
    manage("graph_schema", env=platform_env())
    names = _schema_names()
    for label in ("Chunk", "Document", "Entity", "Community", "Source"):
        assert f"constraint_unique_{label}_id" in names
        assert f"index_{label}_project_id" in names
    assert {"entity_text", "community_embedding", "index_Chunk_document_id"} <= names
    assert "chunk_embedding" not in names  # chunks are scanned exactly or searched in their project's index
    assert "chunk_fulltext" not in names  # each project's chunks have a fulltext index of their own
    assert "chunk_text" not in names
    assert "entity_embedding" not in names  # nothing searches entities by vector


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
