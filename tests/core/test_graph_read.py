"""`graph.read`: auto-commit, read-only, and it sees what `graph.write` committed just before."""

from __future__ import annotations

import uuid

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
