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
