"""Per-key request throttling in Redis (429 with Retry-After).

A sliding window kept as a Redis sorted set of request times and checked and updated by one Lua
script, so the check is atomic: DRF's own throttle reads the history, decides and writes it back in
three steps, and a burst of concurrent requests (each on its own thread under ASGI) all read the same
history and all pass.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from typing import Any

from django.conf import settings
from redis.commands.core import Script
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from core.auth.keys import KEY_EPOCH, KEY_RE, key_epoch_initial, request_api_key
from core.runtime.redis_client import get_redis

logger = logging.getLogger(__name__)

# KEYS[1] the bucket; ARGV now (s), window (s), limit, a unique member. Returns "0" when the request
# is admitted (and recorded), else the seconds until the oldest recorded request leaves the window.
_SLIDING_WINDOW = """
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
  return '0'
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return tostring(tonumber(oldest[2]) + window - now)
"""
_script: Script | None = None


def _window_script() -> Script:
    global _script
    client = get_redis()  # one per process
    if _script is None or _script.registered_client is not client:
        _script = client.register_script(_SLIDING_WINDOW)
    return _script


class ApiKeyRateThrottle(SimpleRateThrottle):
    """One bucket per API key (per user for staff sessions, per address otherwise).

    A key's own `rate_limit` overrides API_THROTTLE_RATE. If Redis fails the request is let
    through: throttling protects the platform, it must not take it down.
    """

    scope = "api_key"
    cache_format = "throttle:%(scope)s:%(ident)s"

    def allow_request(self, request: Request, view: Any) -> bool:
        key = request_api_key(request)
        if key is not None and key.rate_limit:
            self.rate = key.rate_limit
            self.num_requests, self.duration = self.parse_rate(self.rate)
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        now = self.timer()
        try:
            answer = _window_script()(
                keys=[self.key], args=[now, self.duration, self.num_requests, f"{now}:{uuid.uuid4().hex}"]
            )
        except Exception as exc:  # noqa: BLE001 - any Redis failure: fail open, log it
            logger.warning("throttle store unavailable, request allowed: %s", exc)
            return True
        self._wait = float(answer)
        return self._wait <= 0

    def wait(self) -> float | None:
        return max(1, math.ceil(self._wait)) if getattr(self, "_wait", 0) > 0 else None

    def get_cache_key(self, request: Request, view: Any) -> str:
        key = request_api_key(request)
        if key is not None:
            ident = f"key:{key.prefix}"  # unique and never reused (a row id can be, after deletes)
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"addr:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


# --- probes: failed authentication and cross-tenant attempts ---------------------------------------

PROBE_PATHS = ("/api/", "/retrieve")


def probe_identities(request: Any) -> list[str]:
    """Who a probe is counted against: the client address and, when a key-shaped credential was
    presented, its prefix (so guessing the secret of one key is slowed from every address)."""
    idents = [f"addr:{request.META.get('REMOTE_ADDR') or 'unknown'}"]
    header = request.META.get("HTTP_AUTHORIZATION", "")
    parts = header.split()
    if len(parts) == 2 and parts[0].lower() == "bearer":
        match = KEY_RE.match(parts[1])
        if match:
            idents.append(f"key:{match.group(1)}")
    return idents


def _probe_window() -> tuple[int, int]:
    limit, duration = SimpleRateThrottle.parse_rate(None, settings.API_PROBE_RATE)
    return int(limit or 0), int(duration or 60)


def probe_check(idents: list[str]) -> tuple[int, str | None]:
    """Seconds until the current window ends when any identity has used up its probes, else 0; and
    the API-key epoch (core.auth.keys), read in the same round trip. Redis down: (0, None)."""
    limit, duration = _probe_window()
    window = int(time.time()) // duration
    names = [f"probe:{ident}:{window}" for ident in idents] if limit > 0 else []
    try:
        values = get_redis().mget([*names, KEY_EPOCH])
    except Exception as exc:  # noqa: BLE001 - fail open, as the request throttle does
        logger.warning("probe counter unavailable, request allowed: %s", exc)
        return 0, None
    epoch = key_epoch_initial(values[-1])
    if any(int(c or 0) >= limit for c in values[:-1]):
        return max(1, duration - int(time.time()) % duration), epoch
    return 0, epoch


def probe_record(idents: list[str]) -> None:
    _limit, duration = _probe_window()
    window = int(time.time()) // duration
    try:
        pipe = get_redis().pipeline(transaction=False)
        for ident in idents:
            key = f"probe:{ident}:{window}"
            pipe.incr(key)
            pipe.expire(key, duration + 5)
        pipe.execute()
    except Exception as exc:  # noqa: BLE001
        logger.warning("probe counter unavailable, probe not counted: %s", exc)
