"""Task leases (core.runtime.task_leases) on the real Redis broker: a message whose consumer was killed
with SIGKILL is handed out again once it has gone a lease unheld; a message under a live lease, one
this worker holds, and one delivered less than a lease ago stay where they are. A task message lost
before any worker recorded it (core.runtime.lost_tasks) is sent again. (Whole workers killed mid-job:
tests/e2e/test_ingestion_faults.py and tests/e2e/test_supervision.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from kombu import Connection

from config.celery import app
from core.runtime.lost_tasks import ExpectedMessage, broker_keys, reconcile_round
from core.runtime.task_leases import LEASE_KEY, leases_renew, orphans_restore

CONSUME_AND_DIE = """
import json, os, signal, sys
from kombu import Connection
with Connection(sys.argv[1]) as conn:
    queue = conn.SimpleQueue(sys.argv[2])
    tags = [queue.get(timeout=10).delivery_tag for _ in range(int(sys.argv[3]))]
    print(json.dumps(tags), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _consume_and_die(connection: Connection, queue: str, count: int) -> list[str]:
    """Delivery tags of `count` messages a consumer took from `queue` before it was killed (SIGKILL)."""
    dead = subprocess.run(
        [sys.executable, "-c", CONSUME_AND_DIE, connection.as_uri(include_password=True), queue, str(count)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert dead.returncode == -9, dead.stderr
    return list(json.loads(dead.stdout))


def test_a_dead_consumers_message_is_handed_out_again_once() -> None:
    name = f"lease-test-{uuid.uuid4().hex[:8]}"
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        client = channel.client
        queue = connection.SimpleQueue(name)
        try:
            for number in range(3):
                queue.put({"n": number})
            dead_tags = _consume_and_die(connection, name, 3)
            assert len(dead_tags) == 3 and client.llen(name) == 0
            leased, held = dead_tags[1], dead_tags[2]
            leases_renew(connection, [leased], owner="a live worker", ttl=60)

            # delivered less than a lease ago: nothing moves
            assert orphans_restore(connection, held=[held], ttl=60) == []
            time.sleep(1.5)
            restored = orphans_restore(connection, held=[held], ttl=1)
            assert restored == [dead_tags[0]]
            assert orphans_restore(connection, held=[held], ttl=1) == []  # once
            assert client.llen(name) == 1
            again = queue.get(timeout=5)
            assert again.payload == {"n": 0} and again.delivery_info.get("redelivered") is True
            again.ack()
            unacked = {t.decode() for t in client.hkeys(channel.unacked_key)}
            assert dead_tags[0] not in unacked and {leased, held} <= unacked
            # the lease lapses: the message nobody holds any more goes back too
            client.delete(LEASE_KEY.format(tag=leased))
            assert orphans_restore(connection, held=[held], ttl=1) == [leased]
        finally:
            for tag in dead_tags if "dead_tags" in locals() else []:
                channel.qos._remove_from_indices(tag).execute()
            queue.clear()
            queue.close()


def test_a_task_lost_before_any_worker_recorded_it_is_sent_again_once() -> None:
    """Expected messages: one a consumer holds (unacknowledged), one taken off the queue by a consumer
    killed before it recorded it, one still queued, one never published (its publisher died after
    the commit). Only the two that nobody has are sent again, and only after two rounds saw them
    missing."""
    name = f"lost-test-{uuid.uuid4().hex[:8]}"
    prefix = f"lost-test:{name}"
    task = "tests.lost_tasks.never_run"
    expected = {m.key: m for m in (ExpectedMessage(task, (n,), name) for n in range(4))}
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        client = channel.client
        try:
            for number in range(3):
                app.send_task(task, args=(number,), queue=name)
            (held_tag,) = _consume_and_die(connection, name, 1)
            assert client.rpop(name) is not None  # message 1: off the queue and nowhere else
            assert broker_keys(connection, [name]) == {expected[k].key for k in list(expected)[::2]}

            def round_() -> list[int]:
                time.sleep(0.25)  # the round's lock (0.9 × every) lapses
                sent = reconcile_round(connection, every=0.2, owner="test", expected=expected, prefix=prefix)
                return [m.args[0] for m in sent]

            assert round_() == []  # missing once: perhaps a message between BRPOP and its record
            assert (
                reconcile_round(connection, every=0.2, owner="other", expected=expected, prefix=prefix) == []
            )
            assert round_() == [1, 3]
            assert broker_keys(connection, [name]) == set(expected)
            assert round_() == []
            assert round_() == []
            assert client.llen(name) == 3  # 2, then 1 and 3 sent again; 0 is still held
            assert held_tag.encode() in client.hkeys(channel.unacked_key)
        finally:
            if "held_tag" in locals():
                channel.qos._remove_from_indices(held_tag).execute()
            client.delete(name, f"{prefix}:lock", f"{prefix}:missing")
