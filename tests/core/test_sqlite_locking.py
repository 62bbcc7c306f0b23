"""Web, worker and beat share one SQLite file: a transaction that reads and then writes waits for
another writer instead of failing with "database is locked" (settings: transactions begin IMMEDIATE)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from core.models import Job
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_transaction_that_reads_then_writes_waits_for_another_writer() -> None:
    project = make_tenant("sqlite-locks").project
    has_read = threading.Event()
    errors: list[BaseException] = []

    def other_writer() -> None:
        has_read.wait()
        try:
            with transaction.atomic():
                Job.objects.create(project_id=project.id, kind="ingest")
        except BaseException as exc:  # noqa: BLE001 (asserted on below)
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=other_writer)
    thread.start()
    with transaction.atomic():
        Job.objects.filter(project_id=project.id).count()
        has_read.set()
        time.sleep(0.5)  # the other writer now holds, or waits for, the write lock
        Job.objects.create(project_id=project.id, kind="ingest")
    thread.join()
    assert errors == []
    assert Job.objects.filter(project_id=project.id).count() == 2
