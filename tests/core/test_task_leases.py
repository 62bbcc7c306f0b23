"""Task leases (core.runtime.task_leases) on the real Redis broker: a message whose consumer was killed
with SIGKILL is handed out again once it has gone a lease unheld; a message under a live lease, one
this worker holds, and one delivered less than a lease ago stay where they are. (Whole workers killed
mid-job: tests/e2e/test_ingestion_faults.py and tests/e2e/test_supervision.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from config.celery import app
from core.runtime.task_leases import LEASE_KEY, leases_renew, orphans_restore

CONSUME_AND_DIE = """
import json, os, signal, sys
from kombu import Connection
with Connection(sys.argv[1]) as conn:
    queue = conn.SimpleQueue(sys.argv[2])
    tags = [queue.get(timeout=10).delivery_tag for _ in range(3)]
    print(json.dumps(tags), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_dead_consumers_message_is_handed_out_again_once() -> None:
    name = f"lease-test-{uuid.uuid4().hex[:8]}"
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        client = channel.client
        queue = connection.SimpleQueue(name)
        try:
            for number in range(3):
                queue.put({"n": number})
            dead = subprocess.run(
                [sys.executable, "-c", CONSUME_AND_DIE, connection.as_uri(include_password=True), name],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert dead.returncode == -9, dead.stderr
            dead_tags = json.loads(dead.stdout)
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
