"""Enrichment profiles: checking a `retrieval_query` before it is stored, and running one.

A profile is Cypher that runs for every hit with `node` (the chunk) and `score` bound, and returns
`text`, `score` and extra columns (seed 000's retrieval query pattern). The checks on save:

1. text rules, on the query with string literals and comments removed: no `LOAD CSV`, no `USE`, no
   write clause, procedures only from `RETRIEVAL_PROFILE_PROCEDURES`, namespaced functions only
   from Cypher's built-in namespaces (so no plugin function can reach the outside);
2. `EXPLAIN` of the profile and of the wrapper it runs in, in a read transaction: it must compile,
   be read-only (`query_type == "r"`), contain no ProcedureCall outside the allow-list and no LoadCSV
   operator, and return `text` and `score`.

Whatever got stored, a profile only ever runs in a read-only transaction with a timeout, so it
cannot write even if a row was put in the table by other means.
"""

from __future__ import annotations

import re
from typing import Any

import neo4j
from django.conf import settings
from neo4j.exceptions import ClientError, CypherSyntaxError, Neo4jError

from core import graph
from core.errors import InvalidInput, PlatformError
from retrieval import cypher

MAX_PROFILE_CHARS = 20_000
REQUIRED_COLUMNS = ("text", "score")
# Namespaced functions that ship with Cypher itself.
BUILTIN_FUNCTION_NAMESPACES = (
    "vector.similarity.",
    "point.",
    "date.",
    "datetime.",
    "localdatetime.",
    "localtime.",
    "time.",
    "duration.",
)
# A keyword is a clause only where it is not a property or variable name (`node.set`, `$use`).
_KEYWORD = r"(?<![.\w$`])"
WRITE_CLAUSES = re.compile(
    _KEYWORD + r"(CREATE|MERGE|DELETE|DETACH|SET|REMOVE|FOREACH|DROP|ALTER|GRANT|DENY|REVOKE)\b", re.I
)
_LITERALS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|//[^\n]*|/\*.*?\*/", re.S)
_PROCEDURE = re.compile(r"\bCALL\s+([A-Za-z_][\w.]*)", re.I)
_FUNCTION = re.compile(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\s*\(")


class ProfileFailed(PlatformError):
    """A stored profile failed at run time (for example a type error on some data)."""

    status_code = 422
    code = "profile_failed"


def _allowed_procedures() -> set[str]:
    return {p.strip().lower() for p in settings.RETRIEVAL_PROFILE_PROCEDURES if p.strip()}


def _text_problems(query: str) -> list[str]:
    bare = _LITERALS.sub(" '' ", query).replace("`", "")
    problems = []
    if re.search(_KEYWORD + r"LOAD\s+CSV\b", bare, re.I):
        problems.append("LOAD CSV is not allowed")
    if re.search(_KEYWORD + r"USE\s+\w", bare, re.I):
        problems.append("USE (another database) is not allowed")
    writes = sorted({m.upper() for m in WRITE_CLAUSES.findall(bare)})
    if writes:
        problems.append(f"write clauses are not allowed: {', '.join(writes)}")
    allowed = _allowed_procedures()
    procedures = {name.lower() for name in _PROCEDURE.findall(bare)}
    problems.extend(f"procedure {name} is not in the allow-list" for name in sorted(procedures - allowed))
    for name in sorted({n.lower() for n in _FUNCTION.findall(bare)} - procedures):
        if not name.startswith(BUILTIN_FUNCTION_NAMESPACES):
            problems.append(f"function {name} is not a built-in Cypher function")
    return problems


def _quote(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def wrap(body: str, columns: list[str]) -> str:
    """The query that runs `body` once per hit and returns the item fields plus its columns."""
    return cypher.PROFILE_WRAPPER.format(body=body, columns=", ".join(_quote(c) for c in columns))


def _walk(plan: Any) -> list[dict[str, Any]]:
    if plan is None:
        return []
    node = plan if isinstance(plan, dict) else getattr(plan, "__dict__", {})
    found = [node]
    for child in node.get("children", []) or []:
        found.extend(_walk(child))
    return found


def _explain(query: str, params: dict[str, Any]) -> tuple[list[str], str, list[dict[str, Any]]]:
    def work(tx: neo4j.ManagedTransaction) -> tuple[list[str], str, list[dict[str, Any]]]:
        result = tx.run("EXPLAIN " + query, params)
        keys = list(result.keys())
        summary = result.consume()
        return keys, summary.query_type or "", _walk(summary.plan)

    return graph.read_tx(work)


def _plan_problems(operators: list[dict[str, Any]]) -> list[str]:
    allowed = _allowed_procedures()
    problems = []
    for op in operators:
        kind = str(op.get("operatorType", ""))
        details = str((op.get("args") or {}).get("Details", ""))
        if kind.startswith("LoadCSV"):
            problems.append("LOAD CSV is not allowed")
        if kind.startswith("ProcedureCall"):
            name = details.split("(", 1)[0].strip().lower()
            if name not in allowed:
                problems.append(f"procedure {name or '?'} is not in the allow-list")
    return problems


def profile_check(query: str) -> list[str]:
    """Validate a retrieval_query; returns its extra output columns or raises InvalidInput."""
    body = query.strip().rstrip(";").strip()
    if not body:
        raise InvalidInput("retrieval_query is empty")
    if len(body) > MAX_PROFILE_CHARS:
        raise InvalidInput(f"retrieval_query is longer than {MAX_PROFILE_CHARS} characters")
    problems = _text_problems(body)
    if problems:
        raise InvalidInput(
            "retrieval_query is not allowed: " + "; ".join(problems), details={"problems": problems}
        )
    params = {"project_id": "", "hits": []}
    try:
        keys, query_type, operators = _explain("MATCH (node:Chunk) WITH node, 0.0 AS score\n" + body, params)
    except (CypherSyntaxError, ClientError) as exc:
        raise InvalidInput(
            f"retrieval_query does not compile: {exc.message or exc}", details={"neo4j_code": exc.code}
        ) from exc
    problems = _plan_problems(operators)
    if query_type != "r":
        problems.append(f"retrieval_query must be read-only (query type {query_type!r})")
    missing = [c for c in REQUIRED_COLUMNS if c not in keys]
    if missing:
        problems.append(f"retrieval_query must return {' and '.join(missing)} (it returns {', '.join(keys)})")
    if any(k.startswith("__") for k in keys):
        problems.append("column names starting with __ are reserved")
    if problems:
        raise InvalidInput(
            "retrieval_query is not allowed: " + "; ".join(problems), details={"problems": problems}
        )
    try:
        _explain(wrap(body, keys), params)
    except (CypherSyntaxError, ClientError) as exc:
        raise InvalidInput(
            f"retrieval_query cannot run per hit: {exc.message or exc}", details={"neo4j_code": exc.code}
        ) from exc
    return keys


def profile_run(
    *, body: str, columns: list[str], project_id: str, hits: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Run a stored profile over the hits. The text rules are checked again (a row may have reached
    the table without `profile_save`), then it runs in a read-only transaction with a timeout."""
    problems = _text_problems(body)
    if problems:
        raise ProfileFailed(
            "enrichment profile refused: " + "; ".join(problems), details={"problems": problems}
        )
    return execute_read_only(body=body, columns=columns, project_id=project_id, hits=hits)


def execute_read_only(
    *, body: str, columns: list[str], project_id: str, hits: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    query = wrap(body, columns)

    @neo4j.unit_of_work(timeout=settings.RETRIEVAL_PROFILE_TIMEOUT_SEC)
    def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
        return [record.data() for record in tx.run(query, {"project_id": project_id, "hits": hits})]

    try:
        return graph.read_tx(work)
    except Neo4jError as exc:
        if isinstance(exc, graph.UNAVAILABLE_ERRORS):
            raise
        raise ProfileFailed(
            f"enrichment profile failed: {exc.message or exc}", details={"neo4j_code": exc.code}
        ) from exc
