"""`graph.read`: auto-commit, read-only, and it sees what `graph.write` committed just before."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from neo4j.exceptions import ClientError

from core import graph


def test_read_refuses_to_write_and_writes_nothing() -> None:
    marker = f"read-only-{uuid.uuid4().hex}"
    with pytest.raises(ClientError):
        graph.read("CREATE (n:ReadProbe {marker: $marker}) RETURN n.marker AS marker", marker=marker)
    rows = graph.write("MATCH (n:ReadProbe {marker: $marker}) RETURN count(n) AS n", marker=marker)
    assert rows == [{"n": 0}]


def test_read_sees_the_write_before_it() -> None:
    marker = f"causal-{uuid.uuid4().hex}"
    try:
        for i in range(20):
            graph.write("CREATE (:ReadProbe {marker: $marker, i: $i})", marker=marker, i=i)
            rows = graph.read("MATCH (n:ReadProbe {marker: $marker}) RETURN count(n) AS n", marker=marker)
            assert rows == [{"n": i + 1}]
            column = graph.read_column(
                "MATCH (n:ReadProbe {marker: $marker}) RETURN n.i AS i ORDER BY i", "i", marker=marker
            )
            assert column == list(range(i + 1))
    finally:
        graph.write("MATCH (n:ReadProbe {marker: $marker}) DELETE n", marker=marker)


def test_a_vector_parameter_is_a_list_to_neo4j_with_a_short_repr(caplog) -> None:  # type: ignore[no-untyped-def]
    values = [(-1) ** i * i / 383 for i in range(384)]
    vector = graph.Vector(values)
    assert repr(vector) == "<vector of 384 floats>" and vector == values
    marker = f"vector-{uuid.uuid4().hex}"
    try:
        # with the driver's debug log on, its RUN line carries the short form
        with caplog.at_level("DEBUG", logger="neo4j"):
            graph.write("CREATE (:VectorProbe {marker: $marker, v: $v})", marker=marker, v=vector)
        assert "<vector of 384 floats>" in caplog.text and repr(values[1]) not in caplog.text
        row = graph.read(
            "MATCH (n:VectorProbe {marker: $marker}) RETURN n.v AS v, valueType(n.v) AS type, "
            "vector.similarity.cosine(n.v, $v) AS self",
            marker=marker,
            v=vector,
        )[0]
        assert row["v"] == values and row["type"] == "LIST<FLOAT NOT NULL> NOT NULL"
        assert row["self"] == pytest.approx(1.0)
    finally:
        graph.write("MATCH (n:VectorProbe {marker: $marker}) DELETE n", marker=marker)


def test_a_write_whose_match_vanished_is_run_again_and_other_errors_are_not() -> None:
    """A transaction that fails because a node it matched was deleted by another transaction in the
    meantime (Neo4j's EntityNotFound) is rolled back whole and run again; what it wrote in the failed
    attempt is not kept. Any other client error is raised at once."""
    from neo4j.exceptions import Neo4jError

    marker = f"vanished-{uuid.uuid4().hex}"
    attempts: list[int] = []

    def work(tx: Any) -> int:
        attempts.append(1)
        tx.run("CREATE (:ReadProbe {marker: $marker})", marker=marker).consume()
        if len(attempts) == 1:  # what the server answers when a matched node was deleted concurrently
            raise Neo4jError.hydrate(code=graph.ENTITY_VANISHED, message="Unable to load NODE 4:x:60.")
        return len(attempts)

    try:
        assert graph.write_tx(work) == 2
        assert graph.read("MATCH (n:ReadProbe {marker: $marker}) RETURN count(n) AS n", marker=marker) == [
            {"n": 1}
        ]
        attempts.clear()

        def bad(tx: Any) -> None:
            attempts.append(1)
            tx.run("THIS IS NOT CYPHER").consume()

        with pytest.raises(ClientError):
            graph.write_tx(bad)
        assert len(attempts) == 1
    finally:
        graph.write("MATCH (n:ReadProbe {marker: $marker}) DETACH DELETE n", marker=marker)
