"""The shared Redis client (pub/sub of progress events, health checks)."""

from __future__ import annotations

import os
import threading

import redis
from django.conf import settings

_lock = threading.Lock()
_client: redis.Redis | None = None
_client_pid: int | None = None


def get_redis() -> redis.Redis:
    global _client, _client_pid
    if _client is not None and _client_pid == os.getpid():
        return _client
    with _lock:
        if _client is None or _client_pid != os.getpid():
            _client = redis.Redis.from_url(
                settings.REDIS_URL,
                socket_connect_timeout=settings.HEALTHZ_TIMEOUT_SEC,
                socket_timeout=settings.HEALTHZ_TIMEOUT_SEC,
                health_check_interval=30,
            )
            _client_pid = os.getpid()
    return _client
