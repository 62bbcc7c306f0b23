"""The embedded Neo4j supports the index kinds the platform relies on: vector and fulltext."""

import pytest

from core import graph


@pytest.mark.usefixtures("clean_graph")
def test_vector_and_fulltext_indexes_are_created_and_queried() -> None:
    graph.write(
        "CREATE VECTOR INDEX test_vec IF NOT EXISTS FOR (c:IndexProbe) ON c.embedding "
        "OPTIONS {indexConfig: {`vector.dimensions`: 3, `vector.similarity_function`: 'cosine'}}"
    )
    graph.write("CREATE FULLTEXT INDEX test_ft IF NOT EXISTS FOR (c:IndexProbe) ON EACH [c.text]")
    graph.write(
        "UNWIND $rows AS row CREATE (:IndexProbe {id: row.id, text: row.text, embedding: row.embedding})",
        rows=[
            {"id": "a", "text": "graph databases store nodes", "embedding": [1.0, 0.0, 0.0]},
            {"id": "b", "text": "vector search finds neighbours", "embedding": [0.0, 1.0, 0.0]},
            {"id": "c", "text": "lucene powers fulltext search", "embedding": [0.0, 0.0, 1.0]},
        ],
    )
    graph.write("CALL db.awaitIndexes(60)")

    vector_hits = graph.read(
        "CALL db.index.vector.queryNodes('test_vec', 2, $q) YIELD node, score RETURN node.id AS id, score",
        q=[0.1, 0.9, 0.0],
    )
    assert [h["id"] for h in vector_hits] == ["b", "a"]
    assert vector_hits[0]["score"] > vector_hits[1]["score"]

    text_hits = graph.read(
        "CALL db.index.fulltext.queryNodes('test_ft', $q) YIELD node, score RETURN node.id AS id, score",
        q="fulltext",
    )
    assert [h["id"] for h in text_hits] == ["c"]

    graph.write("DROP INDEX test_vec IF EXISTS")
    graph.write("DROP INDEX test_ft IF EXISTS")
