"""A retention run whose worker is killed with SIGKILL mid-run is delivered again to another worker,
goes on after its last recorded batch, anonymises every message exactly once and is audited once."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta

import pytest

from core import graph
from curation import services
from curation.models import AuditEntry, PolicyRun, RetentionPolicy
from tests.conftest import make_tenant, start_worker, stop_worker, worker_env
from tests.curation.helpers import carriers
from tests.memory.helpers import store, user

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_worker_killed_mid_retention_run_then_another_finishes_it(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RETENTION_QUEUE = "retention-kill"
    tenant = make_tenant("retention kill -9")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    old = (datetime.now(UTC) - timedelta(days=40)).isoformat()
    for part in range(3):
        messages = [user(f"note {part}-{i}: write to eve{i}@example.com", timestamp=old) for i in range(300)]
        assert store(client, pid, messages, user_id="eve", thread_id=f"t{part}").status_code == 201
    policy = RetentionPolicy.objects.create(
        name="anonymise old", project_id=pid, kind="messages", age_days=30, action="anonymise"
    )
    env = {**worker_env(), "RETENTION_BATCH": "20"}
    worker = start_worker("retention-kill", queue="retention-kill", env=env)
    (run_id,) = services.policy_runs_queue(policy_id=policy.pk, actor="user:curator")
    deadline = time.monotonic() + 120
    while PolicyRun.objects.get(pk=run_id).counts.get("messages", 0) < 100:
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    at_kill = PolicyRun.objects.get(pk=run_id)
    assert at_kill.status == "running" and at_kill.counts["messages"] < 900, "finished before the kill"

    worker = start_worker("retention-kill2", queue="retention-kill", env=env)
    try:
        deadline = time.monotonic() + 240
        while PolicyRun.objects.get(pk=run_id).status == "running":
            assert time.monotonic() < deadline, "the run was never resumed"
            time.sleep(0.5)
    finally:
        stop_worker(worker)
    run = PolicyRun.objects.get(pk=run_id)
    assert run.status == "succeeded" and run.attempts == 2
    # every message anonymised; a batch the killed worker wrote but never recorded is not done twice
    assert 900 - 20 <= run.counts["messages"] <= 900
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p}) RETURN count(m) AS n, count(m.anonymized_at) AS done", p=pid
    )[0]
    assert rows == {"n": 900, "done": 900}
    assert carriers(pid, "@example.com") == []
    assert AuditEntry.objects.filter(project_id=pid, action="policy_run").count() == 1
