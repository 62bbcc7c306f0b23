"""Progress events (DESIGN.md section 6): to the project's Channels group and Redis pub/sub.

Progress is advisory and at most once: a failure to deliver is logged, never raised, and the
event is only sent after the surrounding database transaction commits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from pydantic import BaseModel, Field, model_validator

from core.runtime.redis_client import get_redis

logger = logging.getLogger(__name__)

GROUP_EVENT_TYPE = "progress.event"


def project_group(project_id: str) -> str:
    """Channels group of a project's progress (names allow [a-z0-9._-], under 100 chars)."""
    return f"progress.{project_id}"


class ProgressEvent(BaseModel):
    message_type: Literal[
        "retrieval_progress",
        "ingestion_progress",
        "memory_progress",
        "curation_progress",
        "portability_progress",
    ]
    project_id: str
    retrieval_id: str | None = None
    job_id: str | None = None
    phase: str
    progress_pct: int = Field(ge=0, le=100)
    thought_summary: str = ""
    details_md: str = ""
    message_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    timestamp: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())

    @model_validator(mode="after")
    def _has_correlation_id(self) -> ProgressEvent:
        wanted = "retrieval_id" if self.message_type == "retrieval_progress" else "job_id"
        if not getattr(self, wanted):
            raise ValueError(f"{self.message_type} needs {wanted}")
        return self

    def payload(self) -> dict[str, object]:
        data = self.model_dump()
        key = "job_id" if self.message_type == "retrieval_progress" else "retrieval_id"
        data.pop(key)
        return data


def publish(event: ProgressEvent) -> None:
    """Send `event` once the current transaction commits (at once outside a transaction)."""
    transaction.on_commit(lambda: _deliver(event), robust=True)


def publish_now(event: ProgressEvent) -> None:
    """Send `event` at once, without waiting for delivery: for work that writes nothing to SQL (a
    DRIFT search), whose events must not wait for a surrounding transaction nor slow the work down.
    Events of one process are delivered in the order they were published. A listener of this
    process for the event's retrieval id hears it first (on the publishing thread)."""
    if event.retrieval_id is not None and _listeners:
        listener = _listeners.get(event.retrieval_id)
        if listener is not None:
            try:
                listener(event.payload())
            except Exception as exc:  # noqa: BLE001 - advisory, as every delivery
                logger.warning("progress listener failed: %s", exc)
    _publisher().submit(event)


_listeners: dict[str, Callable[[dict[str, object]], None]] = {}


@contextmanager
def listening(retrieval_id: str, listener: Callable[[dict[str, object]], None]) -> Iterator[None]:
    """While inside, `listener` hears this process's progress events of `retrieval_id` (the MCP
    server forwards a DRIFT search's phases as protocol progress notifications). It must be quick
    and must not raise: it runs on the thread that publishes."""
    _listeners[retrieval_id] = listener
    try:
        yield
    finally:
        _listeners.pop(retrieval_id, None)


class _Publisher:
    """One thread per process with its own event loop, delivering queued events one after another:
    the caller does not wait for Redis, and the channel layer keeps one connection (on one loop)
    instead of one per `async_to_sync` call from a worker thread."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[ProgressEvent] | None = None
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(ready,), name="progress-publisher", daemon=True
        )
        self.thread.start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.queue = asyncio.Queue()
        ready.set()
        self.loop.run_until_complete(self._drain())

    async def _drain(self) -> None:
        assert self.queue is not None
        while True:
            event = await self.queue.get()
            await _deliver_async(event)

    def submit(self, event: ProgressEvent) -> None:
        assert self.queue is not None
        self.loop.call_soon_threadsafe(self.queue.put_nowait, event)


_publisher_instance: _Publisher | None = None
_publisher_lock = threading.Lock()


def _reset_publisher_after_fork() -> None:
    # the child inherits neither the thread nor a usable lock (it may have been held at fork time)
    global _publisher_instance, _publisher_lock
    _publisher_instance = None
    _publisher_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_publisher_after_fork)


def _publisher() -> _Publisher:
    global _publisher_instance
    with _publisher_lock:
        if _publisher_instance is None or _publisher_instance.pid != os.getpid():
            _publisher_instance = _Publisher()
        return _publisher_instance


async def _deliver_async(event: ProgressEvent) -> None:
    payload = event.payload()
    try:
        layer = get_channel_layer()
        if layer is not None:
            await layer.group_send(
                project_group(event.project_id), {"type": GROUP_EVENT_TYPE, "event": payload}
            )
    except Exception as exc:  # noqa: BLE001 - advisory delivery never fails anything
        logger.warning("progress event not sent to channel group: %s", exc)
    _publish_redis(payload)


def _deliver(event: ProgressEvent) -> None:
    async_to_sync(_deliver_async)(event)


def _publish_redis(payload: dict[str, object]) -> None:
    channel = settings.PROGRESS_REDIS_CHANNEL
    if channel:
        try:
            get_redis().publish(channel, json.dumps(payload))
        except Exception as exc:  # noqa: BLE001
            logger.warning("progress event not published on redis channel %s: %s", channel, exc)


def job_progress(
    job: Any, *, message_type: str, phase: str, pct: int, summary: str, details: str = ""
) -> None:
    """Record a job's phase and percentage and send the matching progress event."""
    pct = max(0, min(100, pct))
    type(job).objects.filter(pk=job.pk).update(phase=phase, progress_pct=pct)
    publish(
        ProgressEvent(
            message_type=message_type,  # type: ignore[arg-type]
            project_id=job.project_id,
            job_id=job.id,
            phase=phase,
            progress_pct=pct,
            thought_summary=summary,
            details_md=details,
        )
    )
