"""`KnowledgeContextProvider`: the platform's knowledge and memory as an Agent Framework context provider."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from agent_framework import AgentSession, ContextProvider, Message, SessionContext, SupportsAgentRun
from knowledge_platform_client import (
    AsyncPlatformClient,
    KnowledgeAndMemory,
    KnowledgeClient,
    MemoryClient,
    MemoryMessage,
    MemorySearchResult,
    PlatformError,
    PlatformSettings,
    RateLimitedError,
    UnavailableError,
)

from agent_framework_knowledge._config import ProviderConfig
from agent_framework_knowledge._format import context_text, drift_block, memory_blocks, search_blocks

log = logging.getLogger("agent_framework_knowledge")
QUERY_ROLES = frozenset({"user", "assistant"})


def _transient(error: BaseException) -> bool:
    """A failure of reach, not of the request: the platform is down, overloaded or too slow."""
    return isinstance(error, UnavailableError | RateLimitedError)


@dataclass
class _Batch:
    scope: dict[str, str]
    messages: list[MemoryMessage] = field(default_factory=list)


@dataclass
class RunTimings:
    """Milliseconds of the last `before_run` / `after_run`; `platform_took_ms` is the longest of
    the platform's own `took_ms` among the calls made side by side."""

    before_run_ms: float | None = None
    platform_took_ms: float | None = None
    after_run_ms: float | None = None


class KnowledgeContextProvider(ContextProvider):
    """Adds the knowledge platform's search results (or a DRIFT answer) and the scope's memories to
    each agent run, and stores the run's messages as memories afterwards.

    Connection settings come from the arguments or from `KNOWLEDGE_PLATFORM_URL`,
    `KNOWLEDGE_PLATFORM_API_KEY` and `KNOWLEDGE_PLATFORM_PROJECT_ID`; every other keyword argument is
    a `ProviderConfig` field. Use `async with provider:` around the agent's runs: entering checks the
    key against the project (a wrong key fails here, not at the first model call) and leaving sends
    any messages still waiting to be stored, then closes the connections.
    """

    DEFAULT_SOURCE_ID = "knowledge_platform"

    def __init__(
        self,
        *,
        source_id: str = DEFAULT_SOURCE_ID,
        settings: PlatformSettings | None = None,
        url: str | None = None,
        api_key: str | None = None,
        project_id: str | None = None,
        **config: Any,
    ) -> None:
        super().__init__(source_id)
        self.config = ProviderConfig(**config)
        self.settings = settings or PlatformSettings.from_env(url=url, api_key=api_key, project_id=project_id)
        self.timings = RunTimings()
        self._client: AsyncPlatformClient | None = None
        self._knowledge: KnowledgeClient | None = None
        self._memory: MemoryClient | None = None
        self._bound_thread_id: str | None = None
        self._pending: deque[_Batch] = deque()

    # -- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> KnowledgeContextProvider:
        if self._client is not None:
            return self
        client = AsyncPlatformClient(self.settings)
        knowledge = KnowledgeClient(client)
        try:
            await knowledge.project()
        except PlatformError as exc:
            if not (_transient(exc) and self.config.fail_open):
                await client.aclose()
                raise
            log.warning(
                "knowledge platform not reachable at start (%s); runs go on without it until it is", exc
            )
        self._client, self._knowledge, self._memory = client, knowledge, MemoryClient(client)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._client is None:
            return
        try:
            await self.flush()
        finally:
            left = self.pending_messages
            if left:
                log.error("%d messages could not be stored in the knowledge platform and are lost", left)
            await self._client.aclose()
            self._client = self._knowledge = self._memory = None

    @property
    def pending_messages(self) -> int:
        """Messages not stored yet because the platform could not be reached."""
        return sum(len(b.messages) for b in self._pending)

    # -- scope -----------------------------------------------------------------------------------

    def _thread_for(self, session: AgentSession | None) -> str | None:
        if not self.config.scope_to_per_operation_thread_id:
            return self.config.thread_id
        session_id = session.session_id if session is not None else None
        if session_id is None:
            return self._bound_thread_id or self.config.thread_id
        if self._bound_thread_id is None:
            self._bound_thread_id = session_id
        elif session_id != self._bound_thread_id:
            raise ValueError(
                "scope_to_per_operation_thread_id binds this provider to session "
                f"{self._bound_thread_id!r}; session {session_id!r} needs its own provider"
            )
        return self._bound_thread_id

    def _scope(self, session: AgentSession | None) -> dict[str, str]:
        scope = {
            "application_id": self.config.application_id,
            "agent_id": self.config.agent_id,
            "user_id": self.config.user_id,
            "thread_id": self._thread_for(session),
        }
        return {k: v for k, v in scope.items() if v}

    def _open(self) -> tuple[KnowledgeClient, MemoryClient]:
        if self._knowledge is None or self._memory is None:
            raise RuntimeError(
                "KnowledgeContextProvider is not open: use `async with provider:` around the runs"
            )
        return self._knowledge, self._memory

    # -- before the model ------------------------------------------------------------------------

    def query_text(self, messages: list[Message]) -> str:
        """The search text: the last `message_history_count` user/assistant messages with text, joined
        (no entity extraction: the platform's indexes rank the full text), at most `max_query_chars`
        characters from its end."""
        usable = [m for m in messages if str(m.role) in QUERY_ROLES and m.text.strip()]
        text = "\n".join(m.text.strip() for m in usable[-self.config.message_history_count :])
        return text[-self.config.max_query_chars :]

    async def before_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        knowledge, memory = self._open()
        started = time.perf_counter()
        scope = self._scope(session) if self.config.memory_enabled else {}
        query = self.query_text(context.input_messages)
        if not query:
            return
        calls: dict[str, Any] = {}
        searches_both = self.config.knowledge_enabled and not self.config.drift
        if searches_both and self.config.memory_enabled and scope:
            # both searches of the turn in one request: one authentication, one embedding of the query
            calls["knowledge and memory"] = memory.search_with_knowledge(
                query,
                scope,
                knowledge_mode=self.config.mode,
                knowledge_top_k=self.config.top_k,
                profile=self.config.profile,
                **self._memory_options(),
            )
        else:
            if self.config.knowledge_enabled:
                calls["knowledge"] = (
                    knowledge.drift(
                        query,
                        max_depth=self.config.drift_max_depth,
                        max_followups=self.config.drift_max_followups,
                    )
                    if self.config.drift
                    else knowledge.search(
                        query, mode=self.config.mode, top_k=self.config.top_k, profile=self.config.profile
                    )
                )
            if self.config.memory_enabled and scope:
                calls["memory"] = memory.search(query, scope, **self._memory_options())
        answers = dict(zip(calls, await asyncio.gather(*calls.values(), return_exceptions=True), strict=True))
        knowledge_blocks: list[str] = []
        memories: list[str] = []
        took: list[float] = []
        for name, answer in answers.items():
            if isinstance(answer, BaseException):
                self._failed_search(name, answer)
                continue
            if answer.took_ms is not None:
                took.append(float(answer.took_ms))
            if isinstance(answer, KnowledgeAndMemory):
                knowledge_blocks = search_blocks(answer.knowledge.items)
                memories = memory_blocks(answer.memory.items)
            elif isinstance(answer, MemorySearchResult):
                memories = memory_blocks(answer.items)
            elif self.config.drift:
                knowledge_blocks = [] if answer.no_data_found else [drift_block(answer)]
            else:
                knowledge_blocks = search_blocks(answer.items)
        text = context_text(self.config.context_prompt, knowledge_blocks, memories)
        if text is not None:
            context.extend_messages(self, [Message(role="user", contents=[text])])
        self.timings.before_run_ms = (time.perf_counter() - started) * 1000
        self.timings.platform_took_ms = max(took) if took else None

    def _memory_options(self) -> dict[str, Any]:
        return {
            "top_k": self.config.memory_top_k,
            "mode": self.config.memory_mode,
            "depth": self.config.memory_depth,
            "min_score": self.config.memory_min_score,
            "since": self.config.memory_since,
            "until": self.config.memory_until,
            "when": self.config.memory_when,
            "as_of": self.config.memory_as_of,
        }

    def _failed_search(self, name: str, error: BaseException) -> None:
        if isinstance(error, PlatformError) and _transient(error) and self.config.fail_open:
            log.warning("knowledge platform %s search failed (%s); this run goes on without it", name, error)
            return
        raise error

    # -- after the model -------------------------------------------------------------------------

    async def after_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        if not self.config.memory_enabled:
            return
        self._open()
        started = time.perf_counter()
        scope = self._scope(session)
        if not scope:  # a per-operation thread without a session yet: nothing safe to store under
            log.warning("no memory scope for this run (no session id); its messages were not stored")
            return
        response = context.response.messages if context.response is not None else []
        turn = [
            MemoryMessage(
                role=str(m.role),
                text=m.text,
                message_id=m.message_id,
                author_name=m.author_name,
            )
            for m in [*context.input_messages, *response]
            if str(m.role) in self.config.memory_roles and m.text.strip()
        ]
        if turn:
            self._queue(_Batch(scope, turn))
        await self._send_pending(raise_errors=not self.config.fail_open)
        self.timings.after_run_ms = (time.perf_counter() - started) * 1000

    def _queue(self, batch: _Batch) -> None:
        if self._pending and self._pending[-1].scope == batch.scope:
            self._pending[-1].messages.extend(batch.messages)
        else:
            self._pending.append(batch)
        excess = self.pending_messages - self.config.pending_limit
        while excess > 0 and self._pending:
            oldest = self._pending[0]
            dropped = min(excess, len(oldest.messages))
            del oldest.messages[:dropped]
            excess -= dropped
            if not oldest.messages:
                self._pending.popleft()
            log.error("pending_limit reached: %d unsent messages dropped, oldest first", dropped)

    async def flush(self) -> int:
        """Try to store every waiting message now; returns how many are still waiting."""
        if self._pending and self._memory is not None:
            await self._send_pending(raise_errors=False)
        return self.pending_messages

    async def _send_pending(self, *, raise_errors: bool) -> None:
        _, memory = self._open()
        while self._pending:
            batch = self._pending[0]
            chunk = batch.messages[:1000]  # the platform's largest batch
            try:
                await memory.store(chunk, batch.scope)
            except PlatformError as exc:
                if _transient(exc) and exc.code != "timeout":
                    log.warning(
                        "knowledge platform did not store %d messages (%s); they are kept and sent with "
                        "the next turn or on close",
                        self.pending_messages,
                        exc,
                    )
                else:
                    # refused as invalid, or timed out after it may have been applied: sending it
                    # again would fail again or store it twice
                    self._pending.popleft()
                    log.error("knowledge platform did not store %d messages: %s", len(batch.messages), exc)
                if raise_errors:
                    raise
                return
            del batch.messages[: len(chunk)]
            if not batch.messages:
                self._pending.popleft()
