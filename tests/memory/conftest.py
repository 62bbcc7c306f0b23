"""Fixtures shared by the memory tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.runtime.redis_client import get_redis

HELD = "held-memory-jobs"  # no worker consumes this queue


@pytest.fixture
def held(settings) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Memory processing jobs go to a queue no worker reads, so they stay queued while a test runs
    them itself; their Celery messages and embedding claims are dropped from Redis afterwards."""
    settings.MEMORY_QUEUE = HELD
    yield
    redis = get_redis()
    redis.delete(HELD)
    for key in redis.scan_iter("memory:embed-claim:*"):
        redis.delete(key)
