"""Prompt redelivery of a task whose worker died.

Tasks are acknowledged late: a delivered message waits in kombu's `unacked` hash (with its delivery
time in `unacked_index`) until its worker acknowledges it. A worker killed with SIGKILL never does,
and kombu hands such a message out again only after the broker's visibility timeout, which must be
longer than the longest task or a running task would be handed out twice.

So every worker holds a lease on each message it holds: a Redis key with a time to live of
`CELERY_LEASE_TTL_SEC`, renewed every third of it by a thread of the worker's main process. Every
worker, as often, hands out again the messages delivered longer than a lease ago that nobody holds a
lease on: their worker is gone. A task interrupted so is handed out again within about 1.3 leases
(13 s by default) when another worker is up, or as soon as a restarted worker is.

The same thread sends again, every `TASK_RECONCILE_EVERY_SEC`, the tasks that were lost before any
worker recorded them (core.runtime.lost_tasks).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

from celery import bootsteps
from django.db import close_old_connections
from kombu import Connection

from core.runtime import lost_tasks

logger = logging.getLogger(__name__)

LEASE_KEY = "celery-lease:{tag}"


class TaskLeases(bootsteps.StartStopStep):
    """A worker consumer's step: the lease thread runs while the consumer does (a consumer restarted
    after a lost broker connection starts a new one)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, parent: Any) -> None:
        from django.conf import settings

        ttl = float(settings.CELERY_LEASE_TTL_SEC)
        every = float(settings.TASK_RECONCILE_EVERY_SEC)
        if ttl <= 0 and every <= 0:
            return
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._run, args=(parent, ttl, every), daemon=True, name="task-leases"
        )
        self._thread.start()

    def stop(self, parent: Any) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    shutdown = stop

    def _run(self, consumer: Any, ttl: float, every: float) -> None:
        owner = f"{getattr(consumer, 'hostname', socket.gethostname())}:{os.getpid()}"
        pause = min(p for p in (ttl / 3, every) if p > 0)
        reconcile_at = time.monotonic()
        with consumer.app.connection_for_write() as connection:
            while not self._stopping.is_set():
                try:
                    if ttl > 0:
                        held = held_tags(consumer)
                        leases_renew(connection, held, owner=owner, ttl=ttl)
                        orphans_restore(connection, held=held, ttl=ttl)
                    if every > 0 and time.monotonic() >= reconcile_at:
                        reconcile_at = time.monotonic() + every
                        lost_tasks.reconcile_round(connection, every=every, owner=owner)
                except Exception:  # a broker outage: the consumer reconnects, the next round retries
                    logger.warning("task leases: round failed", exc_info=True)
                finally:
                    close_old_connections()  # the SQL connection a provider opened in this thread
                self._stopping.wait(pause)


def held_tags(consumer: Any) -> list[str]:
    """Delivery tags of the messages this worker holds and has not acknowledged yet."""
    task_consumer = getattr(consumer, "task_consumer", None)
    channel = getattr(task_consumer, "channel", None)
    qos = getattr(channel, "qos", None)
    # a copy taken in one step: the consumer's thread adds and removes tags meanwhile
    return list(getattr(qos, "_delivered", {}) or {})


def leases_renew(connection: Connection, tags: list[str], *, owner: str, ttl: float) -> None:
    if not tags:
        return
    client = lost_tasks.redis_channel(connection).client
    with client.pipeline(transaction=False) as pipe:
        for tag in tags:
            pipe.set(LEASE_KEY.format(tag=tag), owner, px=int(ttl * 1000))
        pipe.execute()


def orphans_restore(connection: Connection, *, held: list[str], ttl: float) -> list[str]:
    """Hand out again every message delivered more than `ttl` ago that no live worker holds a lease
    on; return their delivery tags. kombu's restore is a transaction on the unacked hash, so two
    workers restoring one message put it back once, and an acknowledgement meanwhile wins."""
    channel = lost_tasks.redis_channel(connection)
    client = channel.client
    stale = client.zrange(channel.unacked_index_key, 0, time.time() - ttl, byscore=True)
    tags = [t.decode() if isinstance(t, bytes) else str(t) for t in stale]
    mine = set(held)
    candidates = [t for t in tags if t not in mine]
    if not candidates:
        return []
    with client.pipeline(transaction=False) as pipe:
        for tag in candidates:
            pipe.exists(LEASE_KEY.format(tag=tag))
        leased = pipe.execute()
    orphans = [tag for tag, has_lease in zip(candidates, leased, strict=True) if not has_lease]
    for tag in orphans:
        channel.qos.restore_by_tag(tag, client=client)
    if orphans:
        logger.warning("task leases: %d task(s) of a worker that is gone handed out again", len(orphans))
    return orphans
