"""Enrichment profiles: checking a `retrieval_query` before it is stored, and running one.

A profile is Cypher that runs for every hit with `node` (the chunk) and `score` bound, and returns
`text`, `score` and extra columns (seed 000's retrieval query pattern). It is curator code, but it
runs with the read key of whichever project searches, so it must never see another project's nodes
(unconfined, `MATCH (m:Memory) RETURN m.text AS text, score` would return every tenant's private
messages). Neo4j Community has no per-tenant access control and no views, so the profile is
confined here, by four independent barriers:

1. **Its own tokens.** The query is split by a Cypher lexer (strings, backtick-quoted names,
   comments, parameters; anything else outside a string, a quoted name or a comment must be ASCII,
   so no Unicode dash or arrow can form a pattern the checks do not see) and is *re-emitted from
   those tokens* with comments dropped: what Neo4j runs is exactly what was checked. Text rules on
   the tokens: no write clause, no `LOAD CSV`, no `USE`, no `UNION`, procedures only from
   `RETRIEVAL_PROFILE_PROCEDURES` and never `db.index.*` or `db.stats.*` (they read every
   project), namespaced functions only Cypher's own, no names starting with `__` (the wrapper's
   and the rewrite's), brackets nested at most MAX_NESTING deep.
2. **Every pattern is tenant-bound.** A small parser follows the clauses (`MATCH`, `OPTIONAL MATCH`,
   `WITH`, `RETURN`, `UNWIND`, `CALL (…) { … }` and `CALL { … }` subqueries, procedure calls,
   `ORDER BY`/`SKIP`/`LIMIT`) and the variables each one binds, and finds every graph pattern:
   in `MATCH`/`OPTIONAL MATCH`, pattern comprehensions `[(a)-->(b) | …]`, `EXISTS`/`COUNT`/
   `COLLECT { … }` subqueries, `shortestPath(…)`. Each path of a pattern must contain a variable
   already bound (`node` or something reached from it), be joined to such a path, or carry the
   predicate `x.project_id = $project_id` (`= node.project_id` too) as a property (`{project_id:
   $project_id}`) or as a top-level `AND` term of its `WHERE`; `… OR true`, `<>` and `NOT` do not
   count. `node` may not be declared again (`… AS node`), so `= node.project_id` stays the hit's
   project. Pattern predicates (`WHERE (a)-->(b)`) are refused: `EXISTS { (a)-->(b) }` says the
   same and is checked like any pattern. Any clause the parser does not know is refused.
3. **The body runs on the project's subgraph.** The re-emitted body gets
   `WHERE x.project_id = $project_id` inside *every* node pattern it has (anonymous nodes are named
   `__pvN`), also on nodes reached by traversal from `node`: a node of another project cannot
   match even through an edge between projects (none should exist) or past a mistake of barrier
   2. Relationships carry no `project_id`; they are only matched between filtered nodes. Only the
   inner nodes of a variable-length relationship (`-[*1..3]-`) are not filtered: they are reached
   by traversal from filtered ones.
4. **Neo4j's plan of the query that runs is checked.** `EXPLAIN` of the wrapped, rewritten query:
   every leaf of the plan must be an argument (the bound `node`) or a node scan or seek (label,
   index, id or all nodes) whose node is filtered by `project_id = $project_id` before anything is
   derived from it, or is found by an index seek on that property; a relationship scan needs both
   ends filtered; count-store reads and unknown leaves are refused, and so are procedures that
   return nodes, relationships, paths, maps or `ANY`. Subqueries the planner keeps inside an
   expression (they do not show as plan operators) are read back from the plan text and must have
   the project filter on each of their node patterns. This does not depend on the parser: it
   catches a pattern barriers 2 and 3 did not see.

Barrier 2 gives curators a refusal at save time that names the pattern; barriers 1, 3 and 4 make
the confinement hold at run time whatever got into the table: a stored profile is checked again
(1, 2, cached per text) and rewritten (3) before every run, and its plan is checked (4) the first
time a process runs it. Barrier 3 alone keeps every node pattern it rewrote in the project; 2 and 4
make a mistake of one of them visible instead of silent. It then runs in a read-only transaction
with a timeout, so it cannot write even if a row was put in the table by other means.

Rejected alternatives: checking returned values (a profile can return `m.text`, a plain string); a
regular expression over the text (backticks, comments, strings and Unicode dashes defeat it); the
plan alone (subqueries inside expressions are invisible there, and plans change with statistics).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import neo4j
from django.conf import settings
from neo4j.exceptions import ClientError, CypherSyntaxError, Neo4jError

from core import graph
from core.errors import InvalidInput, PlatformError
from retrieval import cypher

MAX_PROFILE_CHARS = 20_000
MAX_NESTING = 64  # brackets inside brackets: bounds the checker's recursion and work
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
# Procedures that read indexes of every project: refused even when an operator allow-lists them.
FORBIDDEN_PROCEDURE_NAMESPACES = ("db.index.", "db.stats.")
WRITE_CLAUSES = frozenset(
    {"CREATE", "MERGE", "DELETE", "DETACH", "NODETACH", "SET", "REMOVE", "FOREACH", "INSERT"}
    | {"DROP", "ALTER", "GRANT", "DENY", "REVOKE"}
)
# Variables bound when the body starts (PROFILE_WRAPPER).
BOUND_AT_START = frozenset({"node", "score"})
PROJECT_PARAMETER = "project_id"
PROJECT_PROPERTY = "project_id"


class ProfileFailed(PlatformError):
    """A stored profile failed at run time (for example a type error on some data)."""

    status_code = 422
    code = "profile_failed"


def _allowed_procedures() -> frozenset[str]:
    return frozenset(p.strip().lower() for p in settings.RETRIEVAL_PROFILE_PROCEDURES if p.strip())


# --- lexer -----------------------------------------------------------------------------------------


class _Unreadable(Exception):
    """The text cannot be split into Cypher tokens this module understands."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # name | string | number | punct
    value: str  # a name unquoted; otherwise the text
    text: str  # as written (quoted names keep their backticks)
    quoted: bool = False


_SPACE = " \t\r\n\f\v"
_PUNCT2 = ("..", "<>", "<=", ">=", "=~", "::", "+=", "!=", "||")
_PUNCT1 = "()[]{},.:;|&!%*+-/^=<>$"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(
    r"0[xX][0-9A-Fa-f_]+|0[oO][0-7_]+|(?:[0-9][0-9_]*)?(?:\.[0-9][0-9_]*)?(?:[eE][+-]?[0-9][0-9_]*)?"
)


def _tokenize(query: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in _SPACE:
            i += 1
        elif query.startswith("//", i):
            end = min((j for j in (query.find("\n", i), query.find("\r", i)) if j >= 0), default=n)
            i = end
        elif query.startswith("/*", i):
            end = query.find("*/", i + 2)
            if end < 0:
                raise _Unreadable("a /* comment is not closed")
            i = end + 2
        elif c in "'\"":
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if query[j] == "\\" else 1
            if j >= n:
                raise _Unreadable("a string is not closed")
            tokens.append(_Tok("string", query[i : j + 1], query[i : j + 1]))
            i = j + 1
        elif c == "`":
            j, parts = i + 1, []
            while True:
                k = query.find("`", j)
                if k < 0:
                    raise _Unreadable("a `quoted name` is not closed")
                parts.append(query[j:k])
                if query.startswith("``", k):
                    parts.append("`")
                    j = k + 2
                    continue
                break
            tokens.append(_Tok("name", "".join(parts), query[i : k + 1], quoted=True))
            i = k + 1
        elif c.isascii() and (
            c.isdigit() or (c == "." and query[i + 1 : i + 2].isdigit() and not _after_value(tokens))
        ):
            m = _NUMBER.match(query, i)
            end = m.end() if m and m.end() > i else i + 1
            tokens.append(_Tok("number", query[i:end], query[i:end]))
            i = end
        elif (m := _NAME.match(query, i)) is not None:
            tokens.append(_Tok("name", m.group(), m.group()))
            i = m.end()
        elif query[i : i + 2] in _PUNCT2:
            tokens.append(_Tok("punct", query[i : i + 2], query[i : i + 2]))
            i += 2
        elif c in _PUNCT1:
            tokens.append(_Tok("punct", c, c))
            i += 1
        elif not c.isascii():
            raise _Unreadable(
                f"character {c!r} outside a string, a `quoted name` or a comment (write names in backticks)"
            )
        else:
            raise _Unreadable(f"unexpected character {c!r}")
    return tokens


def _after_value(tokens: list[_Tok]) -> bool:
    """Whether a `.` here follows a value (property access) rather than starting a number."""
    if not tokens:
        return False
    last = tokens[-1]
    return last.kind in ("name", "number", "string") or last.value in (")", "]", "}")


def _render(tokens: list[_Tok], before: dict[int, list[str]], after: dict[int, list[str]]) -> str:
    parts: list[str] = []
    for i, tok in enumerate(tokens):
        parts.extend(before.get(i, ()))
        parts.append(tok.text)
        parts.extend(after.get(i, ()))
    return " ".join(parts)


# --- text rules ------------------------------------------------------------------------------------


# Clause words that are also natural variable names (`next`, `filter`, `load`…): keywords only when
# what follows cannot follow a variable.
_SOFT_WORDS = frozenset({"NEXT", "LET", "FILTER", "SEARCH", "USE", "LOAD"})
_AFTER_A_VALUE = frozenset(
    {"AS", "AND", "OR", "XOR", "IN", "IS", "CONTAINS", "STARTS", "ENDS", "ASC", "DESC", "ASCENDING"}
    | {"DESCENDING"}
)


def _keyword(tokens: list[_Tok], i: int) -> str:
    """The keyword at i, upper case, or "": an unquoted name that is not a property key (`node.set`),
    a parameter (`$use`), a label or type (`:Set`), a map key (`{create: 1}`) or an alias
    (`AS limit`)."""
    if i < 0 or i >= len(tokens):
        return ""
    tok = tokens[i]
    if tok.kind != "name" or tok.quoted:
        return ""
    if i > 0 and tokens[i - 1].value in (".", "$", ":"):
        return ""
    if (
        i > 0
        and tokens[i - 1].kind == "name"
        and not tokens[i - 1].quoted
        and tokens[i - 1].value.upper() == "AS"
    ):
        return ""
    if i + 1 < len(tokens) and tokens[i + 1].value == ":":
        return ""
    word = tok.value.upper()
    if word in _SOFT_WORDS:
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if nxt is None:
            return ""
        if nxt.kind == "name" and (nxt.quoted or nxt.value.upper() not in _AFTER_A_VALUE):
            return word
        return word if nxt.kind in ("string", "number") or nxt.value in ("$", "(") else ""
    return word


def _dotted_name(tokens: list[_Tok], i: int) -> tuple[str, int]:
    """A name like `db.index.fulltext.queryNodes` (any part may be backtick-quoted) starting at i:
    the lower-cased name and the index after it."""
    parts = []
    while i < len(tokens) and tokens[i].kind == "name":
        parts.append(tokens[i].value)
        if i + 2 < len(tokens) and tokens[i + 1].value == "." and tokens[i + 2].kind == "name":
            i += 2
            continue
        i += 1
        break
    return ".".join(parts).lower(), i


def _text_problems(tokens: list[_Tok], allowed: frozenset[str]) -> list[str]:
    problems: list[str] = []
    writes: set[str] = set()
    procedures: set[str] = set()
    in_procedure_name: set[int] = set()
    for i, tok in enumerate(tokens):
        word = _keyword(tokens, i)
        if word == "LOAD" and _keyword(tokens, i + 1) == "CSV":
            problems.append("LOAD CSV is not allowed")
        elif word == "USE" and i + 1 < len(tokens) and tokens[i + 1].kind == "name":
            problems.append("USE (another database) is not allowed")
        elif word in WRITE_CLAUSES:
            writes.add(word)
        elif word == "UNION":
            problems.append("UNION is not allowed (its second part would not start from `node`)")
        elif word == "TRANSACTIONS" and _keyword(tokens, i - 1) in ("IN", "CONCURRENT"):
            problems.append("CALL … IN TRANSACTIONS is not allowed")
        elif word == "CALL" and i + 1 < len(tokens) and tokens[i + 1].kind == "name":
            name, end = _dotted_name(tokens, i + 1)
            procedures.add(name)
            in_procedure_name.update(range(i + 1, end))
        if (
            tok.kind == "name"
            and tok.value.startswith("__")
            and (i == 0 or tokens[i - 1].value not in (".", ":"))
        ):
            problems.append(f"names starting with __ are reserved ({tok.text})")
    if writes:
        problems.append(f"write clauses are not allowed: {', '.join(sorted(writes))}")
    for name in sorted(procedures):
        if name.startswith(FORBIDDEN_PROCEDURE_NAMESPACES):
            problems.append(f"procedure {name} reads every project's index and is never allowed")
        elif name not in allowed:
            problems.append(f"procedure {name} is not in the allow-list")
    functions = set()
    for i, tok in enumerate(tokens):
        if tok.kind != "name" or i in in_procedure_name or i + 1 >= len(tokens) or tokens[i + 1].value != "(":
            continue
        start = i
        while start >= 2 and tokens[start - 1].value == "." and tokens[start - 2].kind == "name":
            start -= 2
        name, _ = _dotted_name(tokens, start)
        if "." in name:
            functions.add(name)
    for name in sorted(functions):
        if not name.startswith(BUILTIN_FUNCTION_NAMESPACES):
            problems.append(f"function {name} is not a built-in Cypher function")
    return list(dict.fromkeys(problems))


# --- patterns --------------------------------------------------------------------------------------

_CLAUSE_WORDS = frozenset(
    {"MATCH", "OPTIONAL", "WITH", "UNWIND", "RETURN", "CALL", "ORDER", "SKIP", "OFFSET", "LIMIT"}
    | {"WHERE", "YIELD", "UNION", "LET", "FILTER", "FINISH", "NEXT", "USE", "LOAD", "SEARCH"}
    | WRITE_CLAUSES
)
_QUERY_START = frozenset({"MATCH", "OPTIONAL", "WITH", "UNWIND", "RETURN", "CALL", "LET", "FILTER", "FINISH"})
# Words before a `(` that make it a parenthesised expression, not a function's arguments.
_OPERATOR_WORDS = frozenset(
    {"AND", "OR", "XOR", "NOT", "IN", "IS", "CASE", "WHEN", "THEN", "ELSE", "AS", "DISTINCT"}
    | {"STARTS", "ENDS", "CONTAINS", "WHERE", "BY", "ASC", "DESC", "ASCENDING", "DESCENDING"}
    | _CLAUSE_WORDS
)
_PATH_SELECTOR_WORDS = frozenset({"ANY", "ALL", "SHORTEST", "GROUP", "GROUPS", "PATH", "PATHS"})
_MATCH_MODE_WORDS = frozenset(
    {"REPEATABLE", "DIFFERENT", "ELEMENT", "ELEMENTS", "RELATIONSHIP", "RELATIONSHIPS"}
)


@dataclass
class _Path:
    start: int
    end: int
    variables: set[str] = field(default_factory=set)
    confined: set[str] = field(default_factory=set)  # node variables with a project predicate
    nodes: list[str] = field(default_factory=list)  # node variables in order, "" when anonymous


class _Analysis:
    """Walks the clauses of a profile body: records problems (unanchored patterns, unknown clauses)
    and, for every node pattern, the text that adds `WHERE x.project_id = $project_id` to it."""

    def __init__(self, tokens: list[_Tok], *, strict: bool = False) -> None:
        self.t = tokens
        self.n = len(tokens)
        # strict: every node pattern itself must carry the project predicate (plan text, barrier 4)
        self.strict = strict
        self.problems: list[str] = []
        self.before: dict[int, list[str]] = defaultdict(list)
        self.after: dict[int, list[str]] = defaultdict(list)
        self.generated = 0
        self.close = self._brackets()

    # -- helpers

    def _brackets(self) -> dict[int, int]:
        pairs = {"(": ")", "[": "]", "{": "}"}
        stack: list[int] = []
        close: dict[int, int] = {}
        for i, tok in enumerate(self.t):
            if tok.kind != "punct":
                continue
            if tok.value in pairs:
                stack.append(i)
                if len(stack) > MAX_NESTING:
                    raise _Unreadable(f"brackets are nested more than {MAX_NESTING} deep")
            elif tok.value in (")", "]", "}"):
                if not stack or pairs[self.t[stack[-1]].value] != tok.value:
                    raise _Unreadable(f"unbalanced {tok.value!r}")
                close[stack.pop()] = i
            elif tok.value == ";":
                raise _Unreadable("only one statement is allowed (no ';')")
        if stack:
            raise _Unreadable(f"unbalanced {self.t[stack[-1]].value!r}")
        return close

    def kw(self, i: int) -> str:
        return _keyword(self.t, i)

    def p(self, i: int, value: str) -> bool:
        return 0 <= i < self.n and self.t[i].kind == "punct" and self.t[i].value == value

    def name(self, i: int) -> bool:
        return 0 <= i < self.n and self.t[i].kind == "name"

    def snippet(self, i: int, j: int) -> str:
        text = " ".join(tok.text for tok in self.t[i:j])
        return text if len(text) <= 80 else text[:77] + "…"

    def _word(self, i: int) -> str:
        tok = self.t[i]
        return tok.value.upper() if tok.kind == "name" and not tok.quoted else ""

    def declare(self, i: int) -> str:
        """The name declared by the token at i (`AS x`, `UNWIND … AS x`, `x IN list`…); `node` may not
        be declared again: `x.project_id = node.project_id` counts as the project filter."""
        name = self.t[i].value
        if name == "node" and not self.strict:
            self.problem("`node` is the hit's chunk: the profile may not declare another `node`")
        return name

    def problem(self, message: str) -> None:
        if message not in self.problems:
            self.problems.append(message)

    def skip(self, i: int) -> int:
        """The index after the token at i, jumping over a bracketed group."""
        return self.close[i] + 1 if i in self.close else i + 1

    def boundary(self, i: int, end: int) -> int:
        """The first clause word at bracket depth 0 in [i, end), or end."""
        while i < end:
            word = self.kw(i)
            if word in _CLAUSE_WORDS and not (word == "WITH" and self.kw(i - 1) in ("STARTS", "ENDS")):
                return i
            i = self.skip(i)
        return end

    def split(self, i: int, j: int, sep: str = ",") -> list[tuple[int, int]]:
        parts, start = [], i
        while i < j:
            if self.p(i, sep):
                parts.append((start, i))
                start = i + 1
            i = self.skip(i)
        parts.append((start, j))
        return parts

    def find(self, i: int, j: int, *, word: str = "", punct: str = "") -> int:
        """The first depth-0 keyword `word` or punctuation `punct` in [i, j), or j."""
        while i < j:
            if (word and self.kw(i) == word) or (punct and self.p(i, punct)):
                return i
            i = self.skip(i)
        return j

    # -- queries and clauses

    def run(self) -> None:
        self.query(0, self.n, set(BOUND_AT_START))

    def query(self, i: int, end: int, bound: set[str]) -> tuple[set[str], set[str]]:
        """Clauses in [i, end); returns the variables bound at the end and the RETURN's names."""
        returned: set[str] = set()
        while i < end and not self.problems:
            word = self.kw(i)
            if word == "OPTIONAL" and self.kw(i + 1) in ("MATCH", "CALL"):
                i += 1
                word = self.kw(i)
            if word == "MATCH":
                i, bound = self.match(i + 1, end, bound)
            elif word in ("WITH", "RETURN"):
                i, bound = self.projection(i + 1, end, bound)
                if word == "RETURN":
                    returned = set(bound)
            elif word == "UNWIND":
                j = self.boundary(i + 1, end)
                if j - i < 4 or self.kw(j - 2) != "AS" or not self.name(j - 1):
                    self.problem(f"cannot read `{self.snippet(i, j)}`")
                    return bound, returned
                self.expr(i + 1, j - 2, bound)
                bound = bound | {self.declare(j - 1)}
                i = j
            elif word == "CALL":
                i, bound = self.call(i + 1, end, bound)
            elif word in ("WHERE", "FILTER", "ORDER", "SKIP", "OFFSET", "LIMIT"):
                start = i + 2 if word == "ORDER" and self.kw(i + 1) == "BY" else i + 1
                i = self.boundary(start, end)
                self.expr(start, i, bound)
            elif word == "LET":
                j = self.boundary(i + 1, end)
                for a, b in self.split(i + 1, j):
                    if b - a < 3 or not self.name(a) or not self.p(a + 1, "="):
                        self.problem(f"cannot read `LET {self.snippet(a, b)}`")
                        return bound, returned
                    self.expr(a + 2, b, bound)
                    bound = bound | {self.declare(a)}
                i = j
            elif word == "FINISH":
                i += 1
            else:
                tok = self.t[i]
                what = tok.text if tok.kind == "name" else repr(tok.text)
                self.problem(
                    f"{what} is not allowed here (a profile is made of MATCH, OPTIONAL MATCH, WITH, "
                    "UNWIND, CALL and RETURN)"
                )
                return bound, returned
        return bound, returned

    def match(self, i: int, end: int, bound: set[str]) -> tuple[int, set[str]]:
        j = self.boundary(i, end)
        k = i
        while self.kw(k) in _MATCH_MODE_WORDS:
            k += 1
        paths = self.patterns(k, j, bound)
        confined: set[str] = set()
        if j < end and self.kw(j) == "WHERE":
            stop = self.boundary(j + 1, end)
            scope = bound | {v for path in paths for v in path.variables}
            self.expr(j + 1, stop, scope)
            confined = self.project_terms(j + 1, stop)
            j = stop
        self.anchored(paths, bound, confined, "MATCH")
        return j, bound | {v for path in paths for v in path.variables}

    def projection(self, i: int, end: int, bound: set[str]) -> tuple[int, set[str]]:
        j = self.boundary(i, end)
        k = i + 1 if self.kw(i) == "DISTINCT" else i
        names: set[str] = set()
        star = False
        for a, b in self.split(k, j):
            if b - a == 1 and self.p(a, "*"):
                star = True
            elif b - a >= 3 and self.kw(b - 2) == "AS" and self.name(b - 1):
                self.expr(a, b - 2, bound)
                names.add(self.declare(b - 1))
            else:
                self.expr(a, b, bound)
                if b - a == 1 and self.name(a):
                    names.add(self.t[a].value)
        scope = (bound | names) if star else names
        while j < end and self.kw(j) in ("WHERE", "ORDER", "SKIP", "OFFSET", "LIMIT"):
            word = self.kw(j)
            start = j + 2 if word == "ORDER" and self.kw(j + 1) == "BY" else j + 1
            stop = self.boundary(start, end)
            self.expr(start, stop, scope if word == "WHERE" else bound | scope)
            j = stop
        return j, scope

    def call(self, i: int, end: int, bound: set[str]) -> tuple[int, set[str]]:
        if self.p(i, "(") or self.p(i, "{"):
            if self.p(i, "("):  # CALL (a, b) { … } imports a and b; CALL (*) everything
                c = self.close[i]
                imports = set()
                for a, b in self.split(i + 1, c) if c > i + 1 else []:
                    if b - a == 1 and self.p(a, "*"):
                        imports |= bound
                    elif b - a == 1 and self.name(a):
                        imports.add(self.t[a].value)
                    else:
                        self.problem(f"cannot read `CALL {self.snippet(i, c + 1)}`")
                        return end, bound
                brace = c + 1
            else:
                brace = i
                imports = set(bound) if self.kw(i + 1) == "WITH" else set()
            if not self.p(brace, "{"):
                self.problem(f"cannot read `CALL {self.snippet(i, brace + 1)}`")
                return end, bound
            close = self.close[brace]
            _, returned = self.query(brace + 1, close, imports)
            return close + 1, bound | returned
        # a procedure: the text rules checked its name
        name_end = _dotted_name(self.t, i)[1]
        k = name_end
        if self.p(k, "("):
            self.expr(k + 1, self.close[k], bound)
            k = self.close[k] + 1
        if self.kw(k) != "YIELD":
            return k, bound
        j = self.boundary(k + 1, end)
        names: set[str] = set()
        for a, b in self.split(k + 1, j):
            if b - a == 1 and self.p(a, "*"):
                continue
            names.add(self.declare(b - 1))
        bound = bound | names
        if j < end and self.kw(j) == "WHERE":
            stop = self.boundary(j + 1, end)
            self.expr(j + 1, stop, bound)
            j = stop
        return j, bound

    # -- patterns

    def patterns(self, i: int, j: int, bound: set[str]) -> list[_Path]:
        """A comma-separated list of path patterns in [i, j)."""
        if i >= j:
            self.problem("a MATCH without a pattern")
            return []
        return [self.path(a, b, bound) for a, b in self.split(i, j)]

    def path(self, i: int, j: int, bound: set[str]) -> _Path:
        path = _Path(i, j)
        k = i
        if self.name(k) and self.p(k + 1, "="):
            path.variables.add(self.t[k].value)
            k += 2
        while self.kw(k) in _PATH_SELECTOR_WORDS or (k < j and self.t[k].kind == "number"):
            k += 1
        if self.kw(k) in ("SHORTESTPATH", "ALLSHORTESTPATHS") and self.p(k + 1, "("):
            close = self.close[k + 1]
            if close + 1 != j:
                self.problem(f"cannot read the pattern `{self.snippet(i, j)}`")
            self.elements(k + 2, close, path, bound)
        else:
            self.elements(k, j, path, bound)
        return path

    def elements(self, k: int, j: int, path: _Path, bound: set[str]) -> None:
        """Node patterns joined by relationship patterns in [k, j)."""
        while k < j:
            if not self.p(k, "("):
                self.problem(f"cannot read the pattern `{self.snippet(path.start, path.end)}`")
                return
            close = self.close[k]
            if self.p(k + 1, "("):  # a parenthesised (quantified) path pattern
                where = self.find(k + 1, close, word="WHERE")
                self.elements(k + 1, where, path, bound)
                if where < close:
                    self.expr(where + 1, close, bound | path.variables)
                k = self.quantifier(close + 1)
            else:
                self.node(k, close, path, bound)
                k = close + 1
            if k >= j:
                return
            if self.p(k, "("):  # juxtaposed: a node and a quantified path pattern
                continue
            nxt = self.connector(k, path, bound)
            if nxt is None:
                self.problem(f"cannot read the pattern `{self.snippet(path.start, path.end)}`")
                return
            k = nxt

    def quantifier(self, k: int) -> int:
        if self.p(k, "+") or self.p(k, "*"):
            return k + 1
        if self.p(k, "{"):
            return self.close[k] + 1
        return k

    def connector(self, k: int, path: _Path | None, bound: set[str]) -> int | None:
        """A relationship pattern starting at k (`-->`, `<-[r:T]-`, `-[*1..3]-`…): the index of the
        next node's `(`, or None."""
        if self.p(k, "<"):
            k += 1
        if not self.p(k, "-"):
            return None
        k += 1
        if self.p(k, "["):
            close = self.close[k]
            if path is not None:
                self.relationship(k, close, path, bound)
            k = close + 1
            if not self.p(k, "-"):
                return None
            k += 1
        elif self.p(k, "-"):
            k += 1
        else:
            return None
        if self.p(k, ">"):
            k += 1
        k = self.quantifier(k)
        return k if self.p(k, "(") else None

    def relationship(self, i: int, close: int, path: _Path, bound: set[str]) -> None:
        k = i + 1
        if self.name(k) and (self.t[k].quoted or self.kw(k) not in ("WHERE", "IS")):
            path.variables.add(self.t[k].value)
            k += 1
        while k < close:
            if self.kw(k) == "WHERE":
                self.expr(k + 1, close, bound | path.variables)
                return
            if self.p(k, "{") or self.p(k, "("):
                self.expr(k + 1, self.close[k], bound)
            k = self.skip(k)

    def node(self, i: int, close: int, path: _Path, bound: set[str]) -> None:
        """The node pattern `( … )` at [i, close]: its variable, whether it carries the project
        predicate, and the rewrite that gives it one."""
        k = i + 1
        var: _Tok | None = None
        if self.name(k):
            marks = k + 1 == close or self.t[k + 1].value in (":", "{", "$")
            if marks or (self.kw(k + 1) in ("WHERE", "IS") and self._word(k) not in ("WHERE", "IS")):
                var = self.t[k]
                k += 1
        name = var.value if var else ""
        confined = False
        if self.p(k, ":") or self.kw(k) == "IS":  # labels
            k += 1
            while k < close and not (
                self.p(k, "{") or self.kw(k) == "WHERE" or (self.p(k, "$") and not self.p(k + 1, "("))
            ):
                if self.p(k, "$") and self.p(k + 1, "("):  # dynamic label $(expr)
                    self.expr(k + 2, self.close[k + 1], bound)
                    k = self.close[k + 1] + 1
                    continue
                k = self.skip(k)
        if self.p(k, "{"):
            end = self.close[k]
            self.expr(k + 1, end, bound)
            confined = any(
                self.is_project_value(a + 2, b)
                for a, b in self.split(k + 1, end)
                if self.is_project_key(a, b)
            )
            k = end + 1
        elif self.p(k, "$"):
            k += 2
        where = -1
        if self.kw(k) == "WHERE":
            where = k
            self.expr(k + 1, close, bound | path.variables | ({name} if name else set()))
            confined = confined or (bool(name) and name in self.project_terms(k + 1, close))
            k = close
        if k != close:
            self.problem(f"cannot read the node pattern `{self.snippet(i, close + 1)}`")
            return
        path.nodes.append(name)
        if name:
            path.variables.add(name)
            if confined:
                path.confined.add(name)
        # barrier 3: every node pattern gets the project predicate
        if var is None:
            self.generated += 1
            ref = f"__pv{self.generated}"
            self.after[i].append(ref)
        else:
            ref = var.text
        predicate = f"{ref}.{PROJECT_PROPERTY} = ${PROJECT_PARAMETER}"
        if where >= 0:
            self.after[where].append("(")
            self.before[close].append(f") AND {predicate}")
        else:
            self.before[close].append(f"WHERE {predicate}")

    def is_project_key(self, a: int, b: int) -> bool:
        return b - a >= 3 and self.name(a) and self.t[a].value == PROJECT_PROPERTY and self.p(a + 1, ":")

    def is_project_value(self, a: int, b: int) -> bool:
        """`$project_id` or `node.project_id` exactly, in [a, b)."""
        toks = self.t[a:b]
        if len(toks) == 2 and toks[0].value == "$" and toks[1].kind == "name":
            return toks[1].value == PROJECT_PARAMETER
        return (
            len(toks) == 3
            and toks[0].kind == "name"
            and toks[0].value == "node"
            and toks[1].value == "."
            and toks[2].kind == "name"
            and toks[2].value == PROJECT_PROPERTY
        )

    def project_terms(self, i: int, j: int) -> set[str]:
        """Variables x for which `x.project_id = $project_id` (or `= node.project_id`) is a top-level
        AND term of the predicate in [i, j). Nothing when the predicate has a top-level OR/XOR."""
        k = i
        while k < j:
            if self.kw(k) in ("OR", "XOR"):
                return set()
            k = self.skip(k)
        found = set()
        for a, b in self._and_terms(i, j):
            while b - a > 2 and self.p(a, "(") and self.close.get(a) == b - 1:
                a, b = a + 1, b - 1
            sides = []
            eq = self.find(a, b, punct="=")
            if eq < b:
                sides = [((a, eq), (eq + 1, b)), ((eq + 1, b), (a, eq))]
            elif (
                (op := self.find(a, b, word="IN")) < b and self.p(op + 1, "[") and self.close[op + 1] == b - 1
            ):
                sides = [((a, op), (op + 2, b - 1))]  # how Neo4j prints it: x.project_id IN [$project_id]
            for (la, lb), (ra, rb) in sides:
                if (
                    lb - la == 3
                    and self.name(la)
                    and self.p(la + 1, ".")
                    and self.name(la + 2)
                    and self.t[la + 2].value == PROJECT_PROPERTY
                    and self.is_project_value(ra, rb)
                ):
                    found.add(self.t[la].value)
        return found

    def _and_terms(self, i: int, j: int) -> list[tuple[int, int]]:
        terms, start, k = [], i, i
        while k < j:
            if self.kw(k) == "AND":
                terms.append((start, k))
                start = k + 1
            k = self.skip(k)
        terms.append((start, j))
        return terms

    def anchored(self, paths: list[_Path], bound: set[str], confined: set[str], where: str) -> None:
        """Each path must reach back to a bound variable, or carry the project predicate, or share
        a variable with a path that does."""
        if self.strict:
            for p in paths:
                for v in p.nodes:
                    if not v or v not in p.confined | confined:
                        self.problem(f"{where} `{self.snippet(p.start, p.end)}` is not filtered by project")
            return
        ok = [bool(p.variables & bound or p.confined or p.variables & confined) for p in paths]
        changed = True
        while changed:
            changed = False
            reached = {v for p, good in zip(paths, ok, strict=True) if good for v in p.variables}
            for n, p in enumerate(paths):
                if not ok[n] and p.variables & reached:
                    ok[n] = changed = True
        for p, good in zip(paths, ok, strict=True):
            if not good:
                self.problem(
                    f"{where} `{self.snippet(p.start, p.end)}` is not tied to the project: start it from "
                    "`node` (or a variable reached from it) or filter it with "
                    "`x.project_id = $project_id`"
                )

    # -- expressions

    def expr(self, i: int, j: int, scope: set[str]) -> None:
        """An expression in [i, j): finds the patterns and subqueries inside it."""
        case_depth = 0
        k = i
        while k < j:
            tok = self.t[k]
            word = self.kw(k)
            if self.p(k, "("):
                close = self.close[k]
                if self.connector(close + 1, None, scope) is not None:
                    self.problem(
                        f"the pattern `{self.snippet(k, min(j, close + 12))}` is outside MATCH: "
                        "use EXISTS { … } or a pattern comprehension"
                    )
                    return
                fn = (
                    self.t[k - 1].value.lower()
                    if k > i and self.name(k - 1) and self.kw(k - 1) not in _OPERATOR_WORDS
                    else ""
                )
                if fn in ("any", "all", "none", "single") and self.name(k + 1) and self.kw(k + 2) == "IN":
                    stop = self.find(k + 3, close, word="WHERE")
                    self.expr(k + 3, stop, scope)
                    self.expr(stop + 1, close, scope | {self.declare(k + 1)})
                elif fn == "reduce":
                    self.reduce(k, close, scope)
                elif fn in ("shortestpath", "allshortestpaths"):
                    self.problem("shortestPath() is only allowed in MATCH")
                    return
                else:
                    self.expr(k + 1, close, scope)
                k = close + 1
            elif self.p(k, "["):
                self.bracket(k, self.close[k], scope)
                k = self.close[k] + 1
            elif self.p(k, "{"):
                close = self.close[k]
                if self.kw(k - 1) in ("EXISTS", "COUNT", "COLLECT"):
                    self.subquery(k, close, scope)
                else:
                    self.expr(k + 1, close, scope)
                k = close + 1
            else:
                if word == "CASE":
                    case_depth += 1
                elif word == "END" and case_depth:
                    case_depth -= 1
                elif word in ("WHEN", "THEN", "ELSE") and not case_depth:
                    self.problem(f"{tok.text} outside CASE is not allowed")
                    return
                elif (
                    word in _CLAUSE_WORDS
                    and word != "WHERE"
                    and not (word == "WITH" and self.kw(k - 1) in ("STARTS", "ENDS"))
                ):
                    self.problem(f"unexpected {tok.text} in `{self.snippet(i, j)}`")
                    return
                k += 1

    def reduce(self, k: int, close: int, scope: set[str]) -> None:
        # reduce(acc = init, x IN list | expr)
        if not (self.name(k + 1) and self.p(k + 2, "=")):
            self.expr(k + 1, close, scope)
            return
        comma = self.find(k + 3, close, punct=",")
        self.expr(k + 3, comma, scope)
        local = {self.declare(k + 1)}
        if self.name(comma + 1) and self.kw(comma + 2) == "IN":
            local.add(self.declare(comma + 1))
            bar = self.find(comma + 3, close, punct="|")
            self.expr(comma + 3, bar, scope)
            self.expr(bar + 1, close, scope | local)
        else:
            self.expr(comma + 1, close, scope | local)

    def bracket(self, k: int, close: int, scope: set[str]) -> None:
        """`[ … ]`: a list comprehension, a pattern comprehension, a list, an index or a slice."""
        a = k + 1
        if self.name(a) and self.kw(a + 1) == "IN":
            where = self.find(a + 2, close, word="WHERE")
            bar = self.find(a + 2, close, punct="|")
            self.expr(a + 2, min(where, bar), scope)
            local = scope | {self.declare(a)}
            if where < bar:
                self.expr(where + 1, bar, local)
            if bar < close:
                self.expr(bar + 1, close, local)
            return
        p = a + 2 if self.name(a) and self.p(a + 1, "=") else a
        bar = self.find(a, close, punct="|")
        if (
            self.p(p, "(")
            and bar < close
            and (self.p(p + 1, "(") or self.connector(self.close[p] + 1, None, scope) is not None)
        ):
            where = self.find(p, bar, word="WHERE")
            paths = self.patterns(a, where, scope)
            variables = {v for path in paths for v in path.variables}
            confined: set[str] = set()
            if where < bar:
                self.expr(where + 1, bar, scope | variables)
                confined = self.project_terms(where + 1, bar)
            self.anchored(paths, scope, confined, "the pattern comprehension")
            self.expr(bar + 1, close, scope | variables)
            return
        self.expr(a, close, scope)

    def subquery(self, k: int, close: int, scope: set[str]) -> None:
        """EXISTS / COUNT / COLLECT { … }: a whole query, or a pattern with an optional WHERE."""
        a = k + 1
        if self.kw(a) in _QUERY_START:
            self.query(a, close, set(scope))
            return
        where = self.find(a, close, word="WHERE")
        paths = self.patterns(a, where, scope)
        confined: set[str] = set()
        if where < close:
            self.expr(where + 1, close, scope | {v for path in paths for v in path.variables})
            confined = self.project_terms(where + 1, close)
        self.anchored(paths, scope, confined, f"{self.t[k - 1].text} {{ … }}")


# --- checking and rewriting a profile --------------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    body: str  # what runs: re-emitted from the tokens, every node pattern confined to the project
    problems: tuple[str, ...]
    unreadable: bool = False  # the checker could not follow the text (Neo4j may say why better)


@lru_cache(maxsize=512)
def _prepare(query: str, allowed: frozenset[str]) -> _Prepared:
    """Barriers 1 to 3 for a profile body (cached: the same text gives the same answer)."""
    if len(query) > MAX_PROFILE_CHARS:
        return _Prepared("", (f"it is longer than {MAX_PROFILE_CHARS} characters",))
    try:
        tokens = _tokenize(query)
        problems = _text_problems(tokens, allowed)
        if problems:
            return _Prepared("", tuple(problems))
        analysis = _Analysis(tokens)
        analysis.run()
    except _Unreadable as exc:
        return _Prepared("", (f"cannot read it: {exc}",), unreadable=True)
    if analysis.problems:
        unreadable = any(p.startswith("cannot read") for p in analysis.problems)
        return _Prepared("", tuple(analysis.problems), unreadable=unreadable)
    return _Prepared(_render(tokens, analysis.before, analysis.after), ())


def confine(query: str) -> str:
    """The body that runs for a `retrieval_query`: re-emitted from its tokens with the project filter in
    every node pattern. Raises InvalidInput when the query is refused (barriers 1 and 2)."""
    prepared = _prepare(query.strip().rstrip(";").strip(), _allowed_procedures())
    if prepared.problems:
        raise _not_allowed(prepared.problems)
    return prepared.body


def _quote(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def wrap(body: str, columns: list[str]) -> str:
    """The query that runs `body` once per hit and returns the item fields plus its columns."""
    return cypher.PROFILE_WRAPPER.format(body=body, columns=", ".join(_quote(c) for c in columns))


# --- plans (barrier 4) -----------------------------------------------------------------------------


def _as_dict(plan: Any) -> dict[str, Any]:
    return plan if isinstance(plan, dict) else getattr(plan, "__dict__", {})


def _kind(op: dict[str, Any]) -> str:
    """`Expand(All)@neo4j` → `Expand`."""
    return re.split(r"[(@]", str(op.get("operatorType", "")), maxsplit=1)[0]


def _details(op: dict[str, Any]) -> str:
    return str((op.get("args") or {}).get("Details", ""))


def _identifiers(op: dict[str, Any]) -> set[str]:
    return {str(v).strip("`") for v in op.get("identifiers") or []}


def _walk(plan: Any) -> list[dict[str, Any]]:
    if plan is None:
        return []
    node = _as_dict(plan)
    found = [node]
    for child in node.get("children", []) or []:
        found.extend(_walk(child))
    return found


_SAFE_LEAVES = frozenset(
    {"Argument", "Unwind", "Projection", "EmptyRow", "Filter", "Limit", "Skip", "Top", "Sort", "Distinct"}
    | {"EagerAggregation", "OrderedAggregation", "Eager", "CacheProperties", "ProduceResults", "Optional"}
)
_NODE_LEAF = re.compile(r"(?:Partitioned)?(?:AllNodesScan|\w*Node\w*(?:Scan|Seek))")
_RELATIONSHIP_LEAF = re.compile(r"(?:Partitioned)?\w*Relationship\w*(?:Scan|Seek)")
_INDEX_SEEK = re.compile(
    r"(?:INDEX|UNIQUE)\s+`?(?P<var>[^:`]+)`?:[^(]*\((?P<props>[^)]*)\)\s+WHERE\s+(?P<pred>.*)"
)
_NESTED = re.compile(r"\b(?:EXISTS|COUNT|COLLECT)\s*\{", re.I)
_GRAPH_TYPES = re.compile(r"\b(?:NODE|RELATIONSHIP|PATH|ANY|MAP)\b")


def _top_level(text: str, word: str) -> list[str]:
    """`text` split at ` word ` outside brackets and quotes."""
    parts, depth, start, i, quote = [], 0, 0, 0, ""
    sep = f" {word} "
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
            i = start
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _filtered_variables(predicate: str) -> set[str]:
    """Variables x with a top-level `x.project_id = $project_id` term in a plan's predicate text."""
    text = predicate.strip()
    while text.startswith("(") and text.endswith(")") and len(_top_level(text[1:-1], "AND")) >= 1:
        inner = text[1:-1]
        if inner.count("(") != inner.count(")"):
            break
        text = inner.strip()
    if len(_top_level(text, "OR")) > 1 or len(_top_level(text, "XOR")) > 1:
        return set()
    term = re.compile(
        r"(?:cache\[)?`?(?P<var>[^`.\s\[\]()]+)`?\.`?project_id`?\]?\s*=\s*\$`?project_id`?"
        r"|\$`?project_id`?\s*=\s*(?:cache\[)?`?(?P<var2>[^`.\s\[\]()]+)`?\.`?project_id`?\]?"
    )
    found = set()
    for part in _top_level(text, "AND"):
        m = term.fullmatch(part.strip())
        if m:
            found.add(m.group("var") or m.group("var2"))
    return found


def _seek_confines(details: str, var: str) -> bool:
    """Whether an index seek's details say it only finds `var` nodes of $project_id."""
    m = _INDEX_SEEK.search(details)
    if not m or m.group("var").strip() != var:
        return False
    pred = m.group("pred").split(", cache[", 1)[0]
    return any(t.strip() == "project_id = $project_id" for t in _top_level(pred, "AND")) and (
        len(_top_level(pred, "OR")) == 1
    )


def _confinement_problems(plan: dict[str, Any]) -> list[str]:
    problems: list[str] = []

    def filtered(var: str, ancestors: list[dict[str, Any]]) -> bool:
        for op in reversed(ancestors):
            if var not in _identifiers(op):
                return False
            if _kind(op) == "Filter" and var in _filtered_variables(_details(op)):
                return True
        return False

    def visit(op: dict[str, Any], arguments: set[str], ancestors: list[dict[str, Any]]) -> None:
        kind, details = _kind(op), _details(op)
        children = [_as_dict(c) for c in op.get("children", []) or []]
        if _NESTED.search(details):
            problems.extend(_nested_problems(details))
        if kind == "ProcedureCall":
            outputs = details.rsplit(" :: (", 1)[1] if " :: (" in details else ""
            if _GRAPH_TYPES.search(outputs):
                name = details.split("(", 1)[0].strip()
                problems.append(f"procedure {name} returns nodes, relationships or maps of any project")
        path = [*ancestors, op]
        if len(children) == 2 and (kind.endswith("Apply") or kind in ("Trail", "Repeat", "SubqueryForeach")):
            visit(children[0], arguments, path)
            visit(children[1], arguments | _identifiers(children[0]), path)
            return
        for child in children:
            visit(child, arguments, path)
        if children or kind in _SAFE_LEAVES:
            return
        new = _identifiers(op) - arguments
        if _NODE_LEAF.fullmatch(kind):
            nodes = sorted(new)
        elif _RELATIONSHIP_LEAF.fullmatch(kind):  # `(a)-[r:T]->(b)`: both ends must be filtered
            nodes = [v.strip("`") for v in re.findall(r"\((`[^`]*`|[^()`]*)\)", details)] or [""]
        else:
            problems.append(f"the plan reads the graph with {kind}, which is not bound to the project")
            return
        for var in nodes:
            if not var or not (_seek_confines(details, var) or filtered(var, ancestors)):
                problems.append(
                    f"the plan finds `{var or '()'}` with {kind} ({details}) without the project filter"
                )

    visit(plan, set(), [])
    return list(dict.fromkeys(problems))


def _nested_problems(details: str) -> list[str]:
    """Subqueries the planner keeps inside an expression: each node pattern in them must carry the
    project filter (Neo4j prints them with the filters moved into WHERE)."""
    try:
        tokens = _tokenize(details)
        analysis = _Analysis(tokens, strict=True)
    except _Unreadable as exc:
        return [f"cannot read the plan's subquery `{details[:80]}`: {exc}"]
    for i, tok in enumerate(tokens):
        if tok.value == "{" and analysis.kw(i - 1) in ("EXISTS", "COUNT", "COLLECT"):
            analysis.subquery(i, analysis.close[i], set())
    return analysis.problems


def _plan_problems(plan: Any, allowed: frozenset[str], *, confined: bool = True) -> list[str]:
    problems = []
    for op in _walk(plan):
        kind = _kind(op)
        if kind.startswith("LoadCSV"):
            problems.append("LOAD CSV is not allowed")
        if kind == "ProcedureCall":
            name = _details(op).split("(", 1)[0].strip().strip("`").lower()
            if name not in allowed or name.startswith(FORBIDDEN_PROCEDURE_NAMESPACES):
                problems.append(f"procedure {name or '?'} is not in the allow-list")
    if confined and plan is not None:
        problems.extend(_confinement_problems(_as_dict(plan)))
    return list(dict.fromkeys(problems))


def _explain(query: str, params: dict[str, Any]) -> tuple[list[str], str, Any]:
    def work(tx: neo4j.ManagedTransaction) -> tuple[list[str], str, Any]:
        result = tx.run("EXPLAIN " + query, params)
        keys = list(result.keys())
        summary = result.consume()
        return keys, summary.query_type or "", summary.plan

    return graph.read_tx(work)


_EXPLAIN_PARAMS = {"project_id": "", "hits": []}


def _not_allowed(problems: Iterable[str]) -> InvalidInput:
    problems = list(problems)
    return InvalidInput(
        "retrieval_query is not allowed: " + "; ".join(problems), details={"problems": problems}
    )


def profile_check(query: str) -> list[str]:
    """Validate a retrieval_query; returns its output columns or raises InvalidInput."""
    body = query.strip().rstrip(";").strip()
    if not body:
        raise InvalidInput("retrieval_query is empty")
    if len(body) > MAX_PROFILE_CHARS:
        raise InvalidInput(f"retrieval_query is longer than {MAX_PROFILE_CHARS} characters")
    allowed = _allowed_procedures()
    prepared = _prepare(body, allowed)
    if prepared.problems and not prepared.unreadable:
        raise _not_allowed(prepared.problems)
    try:
        # the body as written: does it compile, is it read-only, what does it return
        keys, query_type, plan = _explain(
            "MATCH (node:Chunk) WITH node, 0.0 AS score\n" + body, _EXPLAIN_PARAMS
        )
    except (CypherSyntaxError, ClientError) as exc:
        raise InvalidInput(
            f"retrieval_query does not compile: {exc.message or exc}", details={"neo4j_code": exc.code}
        ) from exc
    if prepared.problems:
        raise _not_allowed(prepared.problems)
    problems = _plan_problems(plan, allowed, confined=False)
    if query_type != "r":
        problems.append(f"retrieval_query must be read-only (query type {query_type!r})")
    missing = [c for c in REQUIRED_COLUMNS if c not in keys]
    if missing:
        problems.append(f"retrieval_query must return {' and '.join(missing)} (it returns {', '.join(keys)})")
    if any(k.startswith("__") for k in keys):
        problems.append("column names starting with __ are reserved")
    if problems:
        raise _not_allowed(problems)
    # the body as it runs: confined, inside the wrapper, and its plan
    try:
        _, _, plan = _explain(wrap(prepared.body, keys), _EXPLAIN_PARAMS)
    except (CypherSyntaxError, ClientError) as exc:
        raise InvalidInput(
            f"retrieval_query cannot run per hit: {exc.message or exc}", details={"neo4j_code": exc.code}
        ) from exc
    problems = _plan_problems(plan, allowed)
    if problems:
        raise _not_allowed(problems)
    _plan_checked(wrap(prepared.body, keys), allowed)
    return keys


_checked: set[tuple[str, frozenset[str]]] = set()
_checked_lock = threading.Lock()
_CHECKED_MAX = 1024


def _plan_checked(query: str, allowed: frozenset[str]) -> None:
    with _checked_lock:
        if len(_checked) >= _CHECKED_MAX:
            _checked.clear()
        _checked.add((query, allowed))


@contextlib.contextmanager
def _neo4j_errors_as_failures() -> Iterator[None]:
    """A Neo4j error of the profile itself becomes ProfileFailed; an unavailable server stays a 503."""
    try:
        yield
    except Neo4jError as exc:
        if isinstance(exc, graph.UNAVAILABLE_ERRORS):
            raise
        raise ProfileFailed(
            f"enrichment profile failed: {exc.message or exc}", details={"neo4j_code": exc.code}
        ) from exc


def plan_check(query: str) -> None:
    """Barrier 4: `EXPLAIN` the query that runs (the wrapper around a confined body) and refuse it when
    its plan could reach another project's nodes; raises ProfileFailed."""
    allowed = _allowed_procedures()
    with _neo4j_errors_as_failures():
        _, query_type, plan = _explain(query, _EXPLAIN_PARAMS)
    problems = _plan_problems(plan, allowed)
    if query_type != "r":
        problems.append(f"it is not read-only (query type {query_type!r})")
    if problems:
        raise ProfileFailed(
            "enrichment profile refused: " + "; ".join(problems), details={"problems": problems}
        )
    _plan_checked(query, allowed)


def profile_run(
    *, body: str, columns: list[str], project_id: str, hits: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Run a stored profile over the hits. It is checked and confined again (a row may have reached
    the table without `profile_save`), its plan is checked once per process, then it runs in a
    read-only transaction with a timeout."""
    allowed = _allowed_procedures()
    prepared = _prepare(body.strip().rstrip(";").strip(), allowed)
    if prepared.problems:
        raise ProfileFailed(
            "enrichment profile refused: " + "; ".join(prepared.problems),
            details={"problems": list(prepared.problems)},
        )
    query = wrap(prepared.body, columns)
    with _checked_lock:
        checked = (query, allowed) in _checked
    if not checked:
        plan_check(query)
    return execute_read_only(body=prepared.body, columns=columns, project_id=project_id, hits=hits)


def execute_read_only(
    *, body: str, columns: list[str], project_id: str, hits: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Run `body` as given (checked and confined by the caller) in the wrapper, read-only."""
    query = wrap(body, columns)

    @neo4j.unit_of_work(timeout=settings.RETRIEVAL_PROFILE_TIMEOUT_SEC)
    def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
        return [record.data() for record in tx.run(query, {"project_id": project_id, "hits": hits})]

    with _neo4j_errors_as_failures():
        return graph.read_tx(work)
