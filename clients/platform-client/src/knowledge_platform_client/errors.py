"""Exceptions for the platform's error answers (`{"error": {"code", "message", "details"}}`)."""

from __future__ import annotations

from typing import Any


class PlatformError(Exception):
    """An answer the platform gave with an error status, or no answer at all (`status` 0)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class BadRequestError(PlatformError):
    """400: the request was invalid; nothing was written."""


class AuthenticationError(PlatformError):
    """401: no key, or a key the platform does not know."""


class PermissionDeniedError(PlatformError):
    """403: the key lacks the scope the operation needs."""


class NotFoundError(PlatformError):
    """404: no such object in this project (another project's objects answer 404 too)."""


class ConflictError(PlatformError):
    """409: the object exists already, or a session changed since it was read (stale writer)."""


class PayloadTooLargeError(PlatformError):
    """413: the request body is larger than the platform accepts."""


class RateLimitedError(PlatformError):
    """429 after every retry."""


class UnavailableError(PlatformError):
    """5xx after every retry, or the platform could not be reached."""


_BY_STATUS: dict[int, type[PlatformError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitedError,
}


def error_for(status: int, body: Any) -> PlatformError:
    """The exception for an error answer, with the platform's code, message and details."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or "error")
        message = str(error.get("message") or "")
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
    else:
        code, message, details = "error", str(body)[:500] if body else "", {}
    kind = _BY_STATUS.get(status) or (UnavailableError if status >= 500 else PlatformError)
    return kind(status, code, message, details)
