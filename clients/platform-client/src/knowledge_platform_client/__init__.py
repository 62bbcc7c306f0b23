"""Async client for the knowledge platform's REST API."""

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
from knowledge_platform_client.sessions import AppendResult, SessionMemory, SessionRecord, SessionsClient
from knowledge_platform_client.settings import PlatformSettings

__all__ = [
    "AppendResult",
    "AsyncPlatformClient",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PlatformError",
    "PlatformSettings",
    "RateLimitedError",
    "SessionMemory",
    "SessionRecord",
    "SessionsClient",
    "UnavailableError",
]
