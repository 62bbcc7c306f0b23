"""What the provider does, validated with pydantic (seed 000's `ProviderConfig` rules)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_CONTEXT_PROMPT = (
    "Use the following context from the knowledge platform when it helps to answer. Each item starts "
    "with its relevance score and where it comes from; memories are things said in earlier "
    "conversations with this user."
)
STORABLE_ROLES = frozenset({"user", "assistant", "system", "tool"})


class ProviderConfig(BaseModel):
    """Knobs of `KnowledgeContextProvider`; every field is also a keyword argument of it.

    Knowledge: `mode`, `top_k` and `profile` shape the project search run before each agent run (or,
    with `drift=True`, a DRIFT answer with `drift_max_depth` / `drift_max_followups`). The query is the
    text of the last `message_history_count` user/assistant messages of the run's input, joined, and
    cut to its last `max_query_chars` characters (the platform's longest query).

    Memory (`memory_enabled`): before a run, the scope's memories are searched (`memory_top_k`,
    `memory_mode`, `memory_depth`, `memory_min_score`; `memory_since`, `memory_until`, `memory_when`
    and `memory_as_of` narrow by time, as ISO-8601 or expressions such as "last 30 days" that the
    platform resolves at each run); after it, the request and response messages whose role is in
    `memory_roles` are stored in one call. The scope is `application_id`, `agent_id`, `user_id` and
    `thread_id`; with `scope_to_per_operation_thread_id` the thread is the Agent Framework session's
    id, and the provider stays bound to the first session it sees.

    Faults: with `fail_open` (default) a platform that cannot be reached (or keeps answering 429/5xx)
    costs the run its context, with a logged warning, instead of failing it; messages that could not
    be stored are kept (at most `pending_limit`) and sent with the next turn or on close.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    knowledge_enabled: bool = True
    mode: Literal["vector", "fulltext", "hybrid", "graph"] = "hybrid"
    top_k: int = Field(default=5, ge=1, le=100)
    profile: str | None = Field(default=None, min_length=1)
    drift: bool = False
    drift_max_depth: int | None = Field(default=None, ge=1, le=4)
    drift_max_followups: int | None = Field(default=None, ge=1, le=10)
    message_history_count: int = Field(default=10, ge=1, le=1000)
    max_query_chars: int = Field(default=10_000, ge=1, le=10_000)
    context_prompt: str = DEFAULT_CONTEXT_PROMPT

    memory_enabled: bool = False
    memory_roles: tuple[str, ...] = ("user", "assistant")
    memory_top_k: int = Field(default=5, ge=1, le=100)
    memory_mode: Literal["vector", "fulltext", "hybrid", "graph", "recency"] | None = None
    memory_depth: Literal["messages", "summaries", "facts"] = "messages"
    memory_min_score: float | None = Field(default=None, ge=0)
    memory_since: str | None = Field(default=None, min_length=1, max_length=100)
    memory_until: str | None = Field(default=None, min_length=1, max_length=100)
    memory_when: str | None = Field(default=None, min_length=1, max_length=100)
    memory_as_of: str | None = Field(default=None, min_length=1, max_length=100)
    application_id: str | None = Field(default=None, min_length=1, max_length=256)
    agent_id: str | None = Field(default=None, min_length=1, max_length=256)
    user_id: str | None = Field(default=None, min_length=1, max_length=256)
    thread_id: str | None = Field(default=None, min_length=1, max_length=256)
    scope_to_per_operation_thread_id: bool = False

    fail_open: bool = True
    pending_limit: int = Field(default=1000, ge=0, le=100_000)

    @field_validator("application_id", "agent_id", "user_id", "thread_id")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:
            raise ValueError("an id is 1-256 characters without NUL")
        return value

    @field_validator("memory_roles")
    @classmethod
    def _known_roles(cls, roles: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(roles) - STORABLE_ROLES)
        if unknown:
            raise ValueError(f"unknown roles {unknown}; choose from {sorted(STORABLE_ROLES)}")
        if not roles:
            raise ValueError("memory_roles must name at least one role")
        return roles

    @model_validator(mode="after")
    def _consistent(self) -> ProviderConfig:
        if self.memory_enabled and not (
            self.application_id
            or self.agent_id
            or self.user_id
            or self.thread_id
            or self.scope_to_per_operation_thread_id
        ):
            raise ValueError(
                "memory_enabled needs at least one scope: application_id, agent_id, user_id, thread_id "
                "or scope_to_per_operation_thread_id (unscoped memory would mix every user's messages)"
            )
        if not self.knowledge_enabled and not self.memory_enabled:
            raise ValueError("nothing to do: enable knowledge_enabled, memory_enabled or both")
        if self.drift and self.profile:
            raise ValueError("profile applies to search results; DRIFT answers do not use one")
        return self
