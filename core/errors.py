"""One error vocabulary for the whole platform.

Every error leaves the API as ``{"error": {"code", "message", "details"}}`` with the status of
DESIGN.md section 5. Infrastructure that is down answers 503, never a 500 with a traceback.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import kombu.exceptions
import neo4j.exceptions
import redis.exceptions
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class PlatformError(Exception):
    status_code = 500
    code = "internal_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidInput(PlatformError):
    status_code = 400
    code = "invalid_input"


class NotFound(PlatformError):
    status_code = 404
    code = "not_found"


class Conflict(PlatformError):
    status_code = 409
    code = "conflict"


class QuotaExceeded(PlatformError):
    status_code = 403
    code = "quota_exceeded"


class PayloadTooLarge(PlatformError):
    status_code = 413
    code = "payload_too_large"


class DependencyUnavailable(PlatformError):
    """A service the platform depends on (neo4j, redis, celery, llm) cannot be reached."""

    status_code = 503
    code = "dependency_unavailable"

    def __init__(self, dependency: str, reason: str = "") -> None:
        super().__init__(
            f"{dependency} is unavailable; retry later",
            details={"dependency": dependency, "reason": reason[:300]},
        )
        self.dependency = dependency


def envelope(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def _drf_details(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return {"fields": detail}
    if isinstance(detail, list):
        return {"errors": detail}
    return {}


_DRF_CODES: list[tuple[type[drf.APIException], int, str]] = [
    (drf.ValidationError, 400, "invalid_input"),
    (drf.ParseError, 400, "malformed_request"),
    (drf.NotAuthenticated, 401, "unauthenticated"),
    (drf.AuthenticationFailed, 401, "unauthenticated"),
    (drf.PermissionDenied, 403, "forbidden"),
    (drf.NotFound, 404, "not_found"),
    (drf.MethodNotAllowed, 405, "method_not_allowed"),
    (drf.NotAcceptable, 406, "not_acceptable"),
    (drf.UnsupportedMediaType, 415, "unsupported_media_type"),
    (drf.Throttled, 429, "throttled"),
]


# The driver's errors that mean Neo4j cannot answer right now (not a bad query): unreachable, a lost
# connection, or a server whose database is stopping or starting. core.graph adds socket errors.
NEO4J_UNAVAILABLE: tuple[type[Exception], ...] = (
    neo4j.exceptions.ServiceUnavailable,
    neo4j.exceptions.SessionExpired,
    neo4j.exceptions.DatabaseUnavailable,
)


def unavailable_dependency(exc: BaseException) -> DependencyUnavailable | None:
    """Map a driver/client connection error to DependencyUnavailable, else None."""
    if isinstance(exc, DependencyUnavailable):
        return exc
    if isinstance(exc, NEO4J_UNAVAILABLE):
        return DependencyUnavailable("neo4j", str(exc))
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        return DependencyUnavailable("redis", str(exc))
    if isinstance(exc, kombu.exceptions.OperationalError):
        return DependencyUnavailable("redis", str(exc))
    return None


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF EXCEPTION_HANDLER: every error becomes the envelope; no traceback leaves the server."""
    headers: dict[str, str] = {}
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        body = envelope("payload_too_large", "request body is too large")
        return Response(body, status=413)

    err = exc if isinstance(exc, PlatformError) else unavailable_dependency(exc)
    if err is not None:
        if isinstance(err, DependencyUnavailable):
            logger.warning("dependency unavailable: %s (%s)", err.dependency, err.details.get("reason"))
            headers["Retry-After"] = "5"
        return Response(envelope(err.code, err.message, err.details), status=err.status_code, headers=headers)

    if isinstance(exc, drf.APIException):
        status, code = exc.status_code, "error"
        for cls, cls_status, cls_code in _DRF_CODES:
            if isinstance(exc, cls):
                status, code = cls_status, cls_code
                break
        message = exc.detail if isinstance(exc.detail, str) else _first_message(exc.detail)
        details = _drf_details(exc.detail)
        if isinstance(exc, drf.Throttled):
            wait = math.ceil(exc.wait or 1)
            headers["Retry-After"] = str(wait)
            details = {"retry_after_sec": wait}
            message = "too many requests"
        if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
            headers["WWW-Authenticate"] = 'Bearer realm="api"'
        return Response(envelope(code, str(message), details), status=status, headers=headers)

    logger.exception("unhandled error in %s", context.get("view").__class__.__name__)
    return Response(envelope("internal_error", "internal server error"), status=500)


def _first_message(detail: Any) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            return f"{key}: {_first_message(value)}"
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail) or "invalid input"


# --- Django-level handlers (non-DRF views, unknown routes) ---------------------------------------


def json_error(status: int, code: str, message: str, **details: Any) -> JsonResponse:
    return JsonResponse(envelope(code, message, details), status=status)


def handler400(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(400, "bad_request", "bad request")


def handler403(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(403, "forbidden", "forbidden")


def handler404(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(404, "not_found", f"no route or object at {request.path}")


def handler500(request: HttpRequest) -> JsonResponse:
    return json_error(500, "internal_error", "internal server error")


def dependency_response(exc: BaseException) -> JsonResponse | None:
    """For middleware: a 503 envelope if `exc` means a dependency is down, else None."""
    err = unavailable_dependency(exc)
    if err is None:
        return None
    logger.warning("dependency unavailable: %s (%s)", err.dependency, err.details.get("reason"))
    response = JsonResponse(envelope(err.code, err.message, err.details), status=503)
    response["Retry-After"] = "5"
    return response
