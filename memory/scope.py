"""Memory scopes (seed 000): `application_id`, `agent_id`, `user_id`, `thread_id`.

A scope filter is exact: every given key must equal the node's value; keys not given are not
constrained. At least one key is required for every operation on a set of memories.

Each scope value is also written as an opaque token (`u3fa9…` for a user id) into the node's
`scope_tokens`, so a fulltext query can require the scope inside Lucene: a hashed token is one
Lucene term whatever quotes, spaces or query syntax the value holds, and `alice` can never match
`alice-smith` the way a phrase query on the raw value would.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

from core.errors import InvalidInput

SCOPE_KEYS = ("application_id", "agent_id", "user_id", "thread_id")
_TOKEN_PREFIX = {"project_id": "p", "application_id": "a", "agent_id": "g", "user_id": "u", "thread_id": "t"}
MAX_SCOPE_VALUE_CHARS = 256


@dataclass(frozen=True)
class Scope:
    application_id: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    thread_id: str | None = None

    def given(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def empty(self) -> bool:
        return not self.given()

    def require(self) -> Scope:
        if self.empty:
            raise InvalidInput(
                "at least one scope filter is required: application_id, agent_id, user_id or thread_id",
                details={"field": "scope"},
            )
        return self

    def params(self) -> dict[str, str | None]:
        """Query parameters `$application_id` … `$thread_id` (None where not given)."""
        return asdict(self)

    def where(self, var: str) -> str:
        """`var.user_id = $user_id AND …` for the given keys: fixed text, values are parameters."""
        return " AND ".join(f"{var}.{key} = ${key}" for key in self.given()) or "true"

    def visible_where(self, var: str) -> str:
        """`where` for reads: the scope, and a private conversation's content (its accessibility is
        copied onto its messages, summaries, facts and preferences) only for a reader naming its
        owner: the user, or the thread when the conversation has no user."""
        return (
            f"{self.where(var)} AND (coalesce({var}.accessibility, 'shared') <> 'private'"
            f" OR ({var}.user_id IS NOT NULL AND {var}.user_id = $user_id)"
            f" OR ({var}.user_id IS NULL AND {var}.thread_id = $thread_id))"
        )


def token(key: str, value: str) -> str:
    return _TOKEN_PREFIX[key] + hashlib.sha256(f"{key}\x00{value}".encode()).hexdigest()[:24]


def node_tokens(project_id: str, scope: Scope) -> str:
    """`scope_tokens` of a node written in `scope`."""
    return " ".join([token("project_id", project_id)] + [token(k, v) for k, v in scope.given().items()])


def lucene_filter(project_id: str, scope: Scope) -> str:
    """Required, zero-boost clauses restricting a fulltext query to the project and the scope."""
    tokens = [token("project_id", project_id)] + [token(k, v) for k, v in scope.given().items()]
    return " AND ".join(f"scope_tokens:{t}^0" for t in tokens)


def conversation_key(scope: Scope) -> str:
    """One conversation per full scope (a thread of one user with one agent of one application)."""
    raw = "\x1f".join(f"{k}={v}" if v is not None else f"{k}" for k, v in asdict(scope).items())
    return hashlib.sha256(raw.encode()).hexdigest()


def validate_value(key: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"scope.{key} must be a string", details={"field": f"scope.{key}"})
    if not value.strip():
        raise InvalidInput(f"scope.{key} must not be blank", details={"field": f"scope.{key}"})
    if len(value) > MAX_SCOPE_VALUE_CHARS or "\x00" in value:
        raise InvalidInput(
            f"scope.{key} must be at most {MAX_SCOPE_VALUE_CHARS} characters without NUL bytes",
            details={"field": f"scope.{key}"},
        )
    return value
