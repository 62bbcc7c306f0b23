"""Celery beat itself, not the task it names: `celery -A config beat` runs with its schedule shortened
through the environment, against the session's Redis, and the session's worker executes what it sends.
The retention policies (curation) and the consolidation of old messages (memory) are beat's two
schedule entries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core import graph
from core.models import Job
from curation.models import PolicyRun, RetentionPolicy
from tests.conftest import make_tenant, start_beat, stop_worker, until, worker_env
from tests.knowledge.helpers import wait_job
from tests.memory.helpers import store, user

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("celery_worker_process"),
]

EVERY_3_SEC = str(3 / 3600)  # hours, as the settings read them


def _drained() -> bool:
    """Nothing beat sent is left: the queue is empty and no worker holds a task."""
    from config.celery import app

    with app.connection_for_read() as conn:
        # a message count, not a passive declare: Redis has no key for an empty queue
        waiting = conn.default_channel.client.llen("celery")
    inspect = app.control.inspect(timeout=1)
    held = [
        t for reply in (inspect.active() or {}, inspect.reserved() or {}) for ts in reply.values() for t in ts
    ]
    return waiting == 0 and not held


@pytest.fixture
def beat(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Starts beat with the given schedule settings; stops it (and waits until what it sent has been
    run, so nothing of it reaches a later test) at the end."""
    procs = []

    def run(**schedule: str) -> Path:
        procs.append(start_beat(tmp_path, env={**worker_env(), **schedule}))
        return tmp_path / "beat.log"

    yield run
    for proc in procs:
        if proc.poll() is None:
            stop_worker(proc)
    until(_drained, "the worker idle after beat stopped", tmp_path / "beat.log")


def test_beat_runs_every_enabled_retention_policy_on_its_schedule(beat: Callable[..., Path]) -> None:
    tenant = make_tenant("beat-retention")
    pid = tenant.project.id
    RetentionPolicy.objects.update(enabled=False)
    policy = RetentionPolicy.objects.create(
        name="old messages", project_id=pid, kind="messages", action="delete", age_days=30
    )
    old = (datetime.now(UTC) - timedelta(days=40)).isoformat()
    client = tenant.client(tenant.write_key)
    assert (
        store(client, pid, [user("An old note about the boat.", timestamp=old)], user_id="u").status_code
        == 201
    )
    assert store(client, pid, [user("A fresh note.")], user_id="u").status_code == 201
    assert not PolicyRun.objects.exists()

    log = beat(RETENTION_EVERY_HOURS=EVERY_3_SEC, MEMORY_CONSOLIDATE_EVERY_HOURS="0")
    run = until(
        lambda: PolicyRun.objects.filter(policy=policy, project_id=pid, requested_by="celery-beat").first(),
        "a policy run queued by beat",
        log,
    )
    finished = until(
        lambda: PolicyRun.objects.filter(pk=run.pk, status__in=["succeeded", "failed"]).first(),
        "the beat's policy run finished by the worker",
        log,
    )
    assert finished.status == "succeeded", finished.error
    assert "Sending due task retention-enforce" in log.read_text()
    # the run did what the policy says: the old message is gone, the fresh one stays
    texts = graph.read("MATCH (m:Memory {project_id: $p}) RETURN m.text AS t", p=pid)
    assert texts == [{"t": "A fresh note."}]
    graph.write("MATCH (n {project_id: $p}) DETACH DELETE n", p=pid)


def test_beat_consolidates_every_project_when_scheduled(beat: Callable[..., Path]) -> None:
    tenant = make_tenant("beat-consolidate")
    pid = tenant.project.id
    old = (datetime.now(UTC) - timedelta(days=100)).isoformat()
    client = tenant.client(tenant.write_key)
    store(client, pid, [user("An old note about the garden shed.", timestamp=old)], user_id="g")
    store(client, pid, [user("A fresh note.")], user_id="g")
    assert not Job.objects.filter(project_id=pid, kind="memory_consolidate").exists()

    log = beat(RETENTION_EVERY_HOURS="0", MEMORY_CONSOLIDATE_EVERY_HOURS=EVERY_3_SEC)
    job = until(
        lambda: Job.objects.filter(project_id=pid, kind="memory_consolidate").first(),
        "a consolidation job queued by beat",
        log,
    )
    assert wait_job(job.id).status == "succeeded"
    assert "Sending due task memory-consolidate" in log.read_text()
    assert graph.read("MATCH (m:Memory {project_id: $p}) RETURN m.text AS t", p=pid) == [
        {"t": "A fresh note."}
    ]
    graph.write("MATCH (n {project_id: $p}) DETACH DELETE n", p=pid)
