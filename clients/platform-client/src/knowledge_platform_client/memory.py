"""Agent memory of one project: store conversation messages, search them, forget a scope."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from knowledge_platform_client._models import ApiModel
from knowledge_platform_client.http import AsyncPlatformClient
from knowledge_platform_client.knowledge import SearchMode, SearchResult

MemoryMode = Literal["vector", "fulltext", "hybrid", "graph", "recency"]
MemoryDepth = Literal["messages", "summaries", "facts"]
SCOPE_KEYS = ("application_id", "agent_id", "user_id", "thread_id")
# a message's metadata value, and a metadata filter's (docs/api.md, "Message metadata")
MetadataValue = str | int | float | bool | list[str]
MetadataFilterValue = str | int | float | bool


class MemoryMessage(ApiModel):
    """A message to store. `timestamp` is ISO-8601 (the platform's clock when absent). `metadata` is
    a flat object: at most 16 keys (a letter, then up to 63 letters, digits or `_`), each a string
    (up to 1,000 characters), a finite number, a boolean or a list of up to 32 strings; the platform
    refuses anything else (`BadRequestError`, nothing stored)."""

    role: str
    text: str
    message_id: str | None = None
    author_name: str | None = None
    timestamp: str | None = None
    metadata: dict[str, MetadataValue] | None = None


class StoredMemory(ApiModel):
    id: str
    index: int
    seq: int
    role: str
    duplicate: bool = False  # its message_id was stored before: this is that message, nothing new


class SkippedMessage(ApiModel):
    index: int
    role: str | None = None
    reason: str


class StoreResult(ApiModel):
    conversation_id: str
    stored: list[StoredMemory]
    skipped: list[SkippedMessage] = Field(default_factory=list)
    job_id: str | None = None
    # the messages' embeddings are the processing job's to write (`embed_in_worker`)
    embedding_pending: bool = False


class MemoryHit(ApiModel):
    """A memory, conversation summary, fact, preference or profile item (`level`)."""

    id: str
    level: str
    text: str
    score: float | None = None
    timestamp: str | None = None
    role: str | None = None
    scope: dict[str, str | None] = Field(default_factory=dict)
    conversation_id: str | None = None
    seq: int | None = None  # the message's place in its conversation (listings)
    metadata: dict[str, Any] = Field(default_factory=dict)  # the platform's (search items)
    fields: dict[str, Any] = Field(default_factory=dict)  # a message's own metadata, as stored


class MemorySearchResult(ApiModel):
    items: list[MemoryHit]
    mode: str
    depth: str
    took_ms: float


class KnowledgeAndMemory(ApiModel):
    """`POST …/search:with-memory`: both searches of one query; `took_ms` is the request's whole."""

    knowledge: SearchResult
    memory: MemorySearchResult
    took_ms: float


class ContextItem(ApiModel):
    """A memory written into a context block; `reason`: `hit`, `neighbour`, `summary`, `fact` or
    `preference`."""

    id: str
    level: str
    text: str
    reason: str
    timestamp: str | None = None
    conversation_id: str | None = None
    role: str | None = None
    sources: list[str] = Field(default_factory=list)  # a fact's, preference's or summary's source message ids


class MemoryContext(ApiModel):
    """One block of text for a prompt (`context`, `tokens` long by tiktoken's cl100k_base) and the
    memories it holds, in the order written."""

    context: str
    tokens: int
    items: list[ContextItem]
    took_ms: float


def _search_options(
    *,
    roles: Sequence[str] | None,
    metadata: Mapping[str, MetadataFilterValue] | None,
    **values: Any,
) -> dict[str, Any]:
    """The optional fields of a memory search or context body that were given (None: left out)."""
    values["roles"] = list(roles) if roles is not None else None
    values["metadata"] = dict(metadata) if metadata is not None else None
    return {key: value for key, value in values.items() if value is not None}


def clean_scope(scope: Mapping[str, str | None]) -> dict[str, str]:
    """The given scope keys with a value; the platform refuses set operations without one."""
    unknown = set(scope) - set(SCOPE_KEYS)
    if unknown:
        raise ValueError(f"unknown scope keys {sorted(unknown)}; use {', '.join(SCOPE_KEYS)}")
    chosen = {k: v for k, v in scope.items() if v}
    if not chosen:
        raise ValueError(f"a memory scope needs at least one of {', '.join(SCOPE_KEYS)}")
    return chosen


class MemoryClient:
    """Calls under `/projects/{project}/memories`."""

    def __init__(self, client: AsyncPlatformClient) -> None:
        self.client = client

    async def store(
        self,
        messages: Sequence[MemoryMessage | Mapping[str, Any]],
        scope: Mapping[str, str | None],
        *,
        embed_in_worker: bool | None = None,
    ) -> StoreResult:
        """Store the messages in one request, in order, as the next turns of the scope's conversation.
        A role the platform does not keep (its `MEMORY_ROLES`) raises `BadRequestError` and stores
        nothing; messages with blank text come back in `skipped`. `embed_in_worker` leaves their
        embedding to the platform's worker (the platform's MEMORY_EMBED_IN_WORKER when None): the
        call returns at once with `embedding_pending`."""
        body: dict[str, Any] = {
            "messages": [
                (m if isinstance(m, MemoryMessage) else MemoryMessage.model_validate(m)).model_dump(
                    exclude_none=True
                )
                for m in messages
            ],
            "scope": clean_scope(scope),
        }
        if embed_in_worker is not None:
            body["embed_in_worker"] = embed_in_worker
        data = await self.client.request("POST", self.client.project_path("memories"), json=body)
        return StoreResult.model_validate(data)

    async def search(
        self,
        query: str,
        scope: Mapping[str, str | None],
        *,
        top_k: int = 10,
        mode: MemoryMode | None = None,
        depth: MemoryDepth = "messages",
        min_score: float | None = None,
        since: str | None = None,
        until: str | None = None,
        when: str | None = None,
        reference_time: str | None = None,
        roles: Sequence[str] | None = None,
        author: str | None = None,
        as_of: str | None = None,
        metadata: Mapping[str, MetadataFilterValue] | None = None,
    ) -> MemorySearchResult:
        """Memories of exactly this scope; a blank query lists the most recent ones. `since`,
        `until` and `when` take ISO-8601 or expressions such as "May 2023" or "last year", counted
        from `reference_time` (default now); `roles` and `author` narrow the messages too
        (docs/api.md, "Time, role and author filters"); `as_of` answers with memory as it stood
        then (messages said by then, facts and preferences valid then). `metadata` keeps the messages
        whose metadata has every given key with that value (a stored list: holding it); each hit
        carries its message's metadata in `fields`."""
        body: dict[str, Any] = {"query": query, "scope": clean_scope(scope), "top_k": top_k, "depth": depth}
        body.update(
            _search_options(
                mode=mode,
                min_score=min_score,
                since=since,
                until=until,
                when=when,
                reference_time=reference_time,
                roles=roles,
                author=author,
                as_of=as_of,
                metadata=metadata,
            )
        )
        data = await self.client.request("POST", self.client.project_path("memories", "search"), json=body)
        return MemorySearchResult.model_validate(data)

    async def search_with_knowledge(
        self,
        query: str,
        scope: Mapping[str, str | None],
        *,
        knowledge_mode: SearchMode = "hybrid",
        knowledge_top_k: int = 10,
        profile: str | None = None,
        top_k: int = 10,
        mode: MemoryMode | None = None,
        depth: MemoryDepth = "messages",
        min_score: float | None = None,
        since: str | None = None,
        until: str | None = None,
        when: str | None = None,
        reference_time: str | None = None,
        roles: Sequence[str] | None = None,
        author: str | None = None,
        as_of: str | None = None,
        metadata: Mapping[str, MetadataFilterValue] | None = None,
    ) -> KnowledgeAndMemory:
        """The project's knowledge search (`knowledge_mode`, `knowledge_top_k`, `profile`) and this
        scope's memory search (the other options, as `search` takes them) for one query, in one
        request: what an agent asks before each turn. The query must not be blank."""
        memory: dict[str, Any] = {"scope": clean_scope(scope), "top_k": top_k, "depth": depth}
        memory.update(
            _search_options(
                mode=mode,
                min_score=min_score,
                since=since,
                until=until,
                when=when,
                reference_time=reference_time,
                roles=roles,
                author=author,
                as_of=as_of,
                metadata=metadata,
            )
        )
        body: dict[str, Any] = {
            "query": query,
            "mode": knowledge_mode,
            "top_k": knowledge_top_k,
            "memory": memory,
        }
        if profile:
            body["profile"] = profile
        path = self.client.project_path() + "/search:with-memory"  # the colon is the action's syntax
        data = await self.client.request("POST", path, json=body)
        return KnowledgeAndMemory.model_validate(data)

    async def context(
        self,
        query: str,
        scope: Mapping[str, str | None],
        *,
        max_tokens: int = 1000,
        neighbours: int = 1,
        top_k: int = 10,
        mode: MemoryMode | None = None,
        min_score: float | None = None,
        since: str | None = None,
        until: str | None = None,
        when: str | None = None,
        reference_time: str | None = None,
        roles: Sequence[str] | None = None,
        author: str | None = None,
        as_of: str | None = None,
        metadata: Mapping[str, MetadataFilterValue] | None = None,
    ) -> MemoryContext:
        """The scope's memories relevant to `query` as one block of at most `max_tokens` tokens
        (50..8,000) for an agent's prompt: the search's hits, `neighbours` turns (0..5) before and
        after each, their conversations' summaries and the user's current facts and preferences, in
        time order. Empty when nothing stored is relevant. The filters are `search`'s."""
        body: dict[str, Any] = {
            "query": query,
            "scope": clean_scope(scope),
            "max_tokens": max_tokens,
            "neighbours": neighbours,
            "top_k": top_k,
        }
        body.update(
            _search_options(
                mode=mode,
                min_score=min_score,
                since=since,
                until=until,
                when=when,
                reference_time=reference_time,
                roles=roles,
                author=author,
                as_of=as_of,
                metadata=metadata,
            )
        )
        data = await self.client.request("POST", self.client.project_path("memories", "context"), json=body)
        return MemoryContext.model_validate(data)

    async def list(
        self, scope: Mapping[str, str | None], *, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[MemoryHit], str | None]:
        """One page of the scope's memories, newest first, and the cursor of the next page; each
        carries its metadata in `fields`."""
        params = {**clean_scope(scope), "limit": limit, "cursor": cursor}
        data = await self.client.request("GET", self.client.project_path("memories"), params=params)
        items = [MemoryHit.model_validate({"level": "message", **item}) for item in data["items"]]
        return items, data.get("next_cursor")

    async def forget(self, scope: Mapping[str, str | None]) -> dict[str, Any]:
        """Erase every memory of the scope and what was derived from it; returns the counts and the
        audit record's id."""
        path = self.client.project_path() + "/memories:forget"  # the colon is the action's syntax
        result: dict[str, Any] = await self.client.request("POST", path, json={"scope": clean_scope(scope)})
        return result
