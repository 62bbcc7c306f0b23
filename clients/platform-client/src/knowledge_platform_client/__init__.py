"""Async client for the knowledge platform's REST API."""

from knowledge_platform_client.conversations import ChatReference, ChatTurn, ConversationsClient
from knowledge_platform_client.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PlatformError,
    RateLimitedError,
    UnavailableError,
)
from knowledge_platform_client.http import AsyncPlatformClient
from knowledge_platform_client.knowledge import (
    Citation,
    DriftResult,
    KeyFact,
    KnowledgeClient,
    ProjectInfo,
    SearchHit,
    SearchResult,
)
from knowledge_platform_client.memory import (
    ContextItem,
    KnowledgeAndMemory,
    MemoryClient,
    MemoryContext,
    MemoryHit,
    MemoryMessage,
    MemorySearchResult,
    StoreResult,
)
from knowledge_platform_client.sessions import (
    AppendManyResult,
    AppendResult,
    SessionMemory,
    SessionRecord,
    SessionsClient,
)
from knowledge_platform_client.settings import ConfigurationError, PlatformSettings

__all__ = [
    "AppendManyResult",
    "AppendResult",
    "AsyncPlatformClient",
    "AuthenticationError",
    "BadRequestError",
    "ChatReference",
    "ChatTurn",
    "Citation",
    "ConfigurationError",
    "ConflictError",
    "ContextItem",
    "ConversationsClient",
    "DriftResult",
    "KeyFact",
    "KnowledgeAndMemory",
    "KnowledgeClient",
    "MemoryClient",
    "MemoryContext",
    "MemoryHit",
    "MemoryMessage",
    "MemorySearchResult",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PlatformError",
    "PlatformSettings",
    "ProjectInfo",
    "RateLimitedError",
    "SearchHit",
    "SearchResult",
    "SessionMemory",
    "SessionRecord",
    "SessionsClient",
    "StoreResult",
    "UnavailableError",
]
