"""Per-key request throttling on the shared Redis cache (429 with Retry-After)."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from core.auth import request_api_key

logger = logging.getLogger(__name__)


class ApiKeyRateThrottle(SimpleRateThrottle):
    """One bucket per API key (per user for staff sessions, per address otherwise).

    A key's own `rate_limit` overrides API_THROTTLE_RATE. If the cache (Redis) fails the request
    is let through: throttling protects the platform, it must not take it down.
    """

    scope = "api_key"

    def allow_request(self, request: Request, view: Any) -> bool:
        key = request_api_key(request)
        if key is not None and key.rate_limit:
            self.rate = key.rate_limit
            self.num_requests, self.duration = self.parse_rate(self.rate)
        try:
            return super().allow_request(request, view)
        except Exception as exc:  # noqa: BLE001 - any cache failure: fail open, log it
            logger.warning("throttle cache unavailable, request allowed: %s", exc)
            return True

    def get_cache_key(self, request: Request, view: Any) -> str:
        key = request_api_key(request)
        if key is not None:
            ident = f"key:{key.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"addr:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
