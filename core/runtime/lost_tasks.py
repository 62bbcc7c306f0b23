"""Tasks lost in flight are sent again.

Two moments lose a task message without a trace in the broker: a Redis consumer takes a message off
its queue (BRPOP) and only then records it as unacknowledged, so a worker killed between the two
loses it; and a process that dies between committing a job and publishing its task (the publish
waits for the commit) never sends it. Leases (core.runtime.task_leases) cannot help: they hand out
again what the unacknowledged hash still holds.

So apps register the messages their unfinished work expects in the broker (`expected_register`).
Every `TASK_RECONCILE_EVERY_SEC` one worker (a Redis lock) compares them with what the broker holds,
the queues and the unacknowledged hash read in one transaction, and sends again each expected
message that was missing at two rounds in a row. A message on its way from BRPOP to its record is
missing for a millisecond, never for two rounds, so a live task is not sent twice; should it happen
anyway, the registered tasks are safe to run again.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Any

from celery import current_app
from kombu import Connection

logger = logging.getLogger(__name__)

KEY_PREFIX = "task-reconcile"  # {prefix}:lock, {prefix}:missing


@dataclass(frozen=True)
class ExpectedMessage:
    task: str
    args: tuple[Any, ...]
    queue: str

    @property
    def key(self) -> str:
        return json.dumps([self.task, list(self.args)])


ExpectedProvider = Callable[[], Iterable[ExpectedMessage]]
_providers: list[ExpectedProvider] = []


def expected_register(provider: ExpectedProvider) -> None:
    """Register a function listing messages that unfinished work expects in the broker (an app's
    ready() does it; a provider's tasks must be safe to run again)."""
    if provider not in _providers:
        _providers.append(provider)


def expected_messages() -> dict[str, ExpectedMessage]:
    return {message.key: message for provider in _providers for message in provider()}


def message_key(raw: Any, *, unacked: bool = False) -> str | None:
    """The key of a kombu message of a Celery task (protocol 2, JSON) as Redis holds it in a queue
    (or, `unacked`, in the unacknowledged hash), None for anything else."""
    try:
        raw = json.loads(raw)
        if unacked:
            raw = raw[0]
        task = raw["headers"]["task"]
        body = raw["body"]
        if raw.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None
    return json.dumps([task, list(args)])


def redis_channel(connection: Connection) -> Any:
    """The connection's kombu Redis channel (its client, unacked keys and QoS)."""
    return connection.default_channel


def broker_keys(connection: Connection, queues: Iterable[str]) -> set[str]:
    """Keys of the task messages in `queues` (every priority list) and in the unacknowledged hash,
    read in one transaction so a message moving between them is seen once."""
    channel = redis_channel(connection)
    lists = sorted({channel._q_for_pri(q, p) for q in queues for p in channel.priority_steps})
    with channel.client.pipeline(transaction=True) as pipe:
        for name in lists:
            pipe.lrange(name, 0, -1)
        pipe.hvals(channel.unacked_key)
        *queued, unacked = pipe.execute()
    keys = chain(
        (message_key(item) for item in chain.from_iterable(queued)),
        (message_key(item, unacked=True) for item in unacked),
    )
    return {key for key in keys if key is not None}


def reconcile_round(
    connection: Connection,
    *,
    every: float,
    owner: str,
    expected: dict[str, ExpectedMessage] | None = None,
    prefix: str = KEY_PREFIX,
) -> list[ExpectedMessage]:
    """One round, skipped unless this worker takes the round's lock: send again the `expected`
    messages (by default every registered provider's) missing last round and still missing; return
    what was sent."""
    client = redis_channel(connection).client
    lock_key, missing_key = f"{prefix}:lock", f"{prefix}:missing"
    if not client.set(lock_key, owner, nx=True, px=max(1, int(every * 900))):
        return []
    expected = expected_messages() if expected is None else expected
    if not expected:
        client.delete(missing_key)
        return []
    present = broker_keys(connection, {m.queue for m in expected.values()})
    missing = {key for key in expected if key not in present}
    before = set(json.loads(client.get(missing_key) or "[]"))
    lost = [expected[key] for key in sorted(missing & before)]
    for message in lost:
        current_app.send_task(message.task, args=message.args, queue=message.queue)
    client.set(missing_key, json.dumps(sorted(missing - before)), px=max(1, int(every * 3000)))
    if lost:
        logger.warning("lost tasks: %d task message(s) missing from the broker sent again", len(lost))
    return lost
