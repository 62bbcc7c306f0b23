"""Cypher of the core app. Always parameterised."""

# Constraints and indexes beyond what neomodel derives from the node classes (apps add theirs
# in their own cypher.SCHEMA; `manage.py graph_schema` applies them all).
SCHEMA: list[str] = []
