"""Every memory query is planned with index seeks: none scans all nodes of the database (a label-
less id lookup does, and the cost then grows with everything else the database holds)."""

from __future__ import annotations

import re

import pytest

from core import graph
from memory import cypher
from memory.indexes import ensure_memory_indexes
from memory.scope import Scope

pytestmark = pytest.mark.django_db

SCOPE = Scope(user_id="u", thread_id="t")
LISTS = {
    "keys",
    "preference_ids",
    "ids",
    "rows",
    "hits",
    "links",
    "memory_ids",
    "message_ids",
    "sources",
    "conversation_ids",
    "summaries",
    "vector",
    "embedding",
    "exclude",
}
INTS = {
    "limit",
    "offset",
    "batch",
    "fetch",
    "first_seq",
    "last_seq",
    "summarized_seq",
    "tokens",
    "neighbours",
    "dims",
}
BOOLS = {"force_anonymise", "only_plain", "set_retention", "set_expires"}


def _dummy(name: str) -> object:
    if name in LISTS:
        return []
    if name in INTS:
        return 1
    if name in BOOLS:
        return False
    return {} if name == "props" else "x"


def _queries() -> dict[str, str]:
    found = {}
    for name in dir(cypher):
        value = getattr(cypher, name)
        if (
            name.startswith("_")
            or not name.isupper()
            or not isinstance(value, str)
            or "MATCH" not in value
            and "CREATE (" not in value
        ):
            continue
        if "{label}" in value:
            for label in ("Memory", "ConversationSummary", "Fact", "Preference"):
                found[f"{name}[{label}]"] = value.format(label=label, scope=SCOPE.where("n"), extra="")
        elif "{scope}" in value:
            var = re.search(r"\((\w+):\w+ \{\{project_id", value)
            found[name] = value.format(
                scope=SCOPE.where(var.group(1) if var else "m"),
                next_scope=SCOPE.where("n"),
                extra="",
            )
        else:
            found[name] = value
    return found


def _operators(plan) -> list[str]:  # type: ignore[no-untyped-def]
    ops = [plan["operatorType"].split("@")[0]]
    for child in plan.get("children", []):
        ops += _operators(child)
    return ops


@pytest.mark.parametrize("name", sorted(_queries()))
def test_no_query_scans_every_node(name: str) -> None:
    ensure_memory_indexes()
    query = _queries()[name]
    params = {p: _dummy(p) for p in set(re.findall(r"\$(\w+)", query))}
    with graph.get_driver().session(database=graph.database()) as session:
        plan = session.run("EXPLAIN " + query, params).consume().plan
    assert plan is not None
    operators = _operators(plan)
    assert "AllNodesScan" not in operators, (name, operators)
