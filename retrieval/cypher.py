"""Cypher of the retrieval app. Always parameterised."""

# Constraints and indexes this app needs beyond its neomodel classes (applied by graph_schema).
SCHEMA: list[str] = []
