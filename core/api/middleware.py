"""HTTP middleware: request size limit (413), probe throttle (429) and dependency failures outside
DRF (503)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from core.api.throttling import PROBE_PATHS, probe_check, probe_identities, probe_record
from core.errors import dependency_response, json_error

IMPORT_PATH = "/api/v1/projects:import"


class BodySizeLimitMiddleware:
    """Refuse a body larger than API_MAX_BODY_BYTES before anything reads it; an archive uploaded to
    /api/v1/projects:import may be as large as PORTABILITY_IMPORT_MAX_BYTES (it is spooled to disk)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return json_error(400, "malformed_request", "invalid Content-Length header")
        limit = settings.API_MAX_BODY_BYTES
        if request.path_info == IMPORT_PATH:
            limit = settings.PORTABILITY_IMPORT_MAX_BYTES
        if length > limit:
            return json_error(413, "payload_too_large", "request body is too large", limit_bytes=limit)
        return self.get_response(request)


class DependencyErrorMiddleware:
    """Non-DRF views (admin, health) answer 503 in the envelope when Neo4j or Redis is down."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return dependency_response(exception)


class ProbeThrottleMiddleware:
    """Counts failed authentications (401) and cross-tenant or out-of-scope attempts (requests that
    core.auth.keys marked with `probe_reason`) per client address and key prefix; once API_PROBE_RATE is
    used up, API requests from that address or with that key prefix answer 429 with Retry-After
    before authentication is even tried."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(PROBE_PATHS):
            return self.get_response(request)
        idents = probe_identities(request)
        wait, request.key_epoch = probe_check(idents)
        if wait:
            response = json_error(
                429,
                "throttled",
                "too many failed or cross-project requests from this client or key; retry later",
                retry_after_sec=wait,
            )
            response["Retry-After"] = str(wait)
            return response
        response = self.get_response(request)
        if response.status_code == 401 or getattr(request, "probe_reason", None):
            probe_record(idents)
        return response
