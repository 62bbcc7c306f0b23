"""A batch whose task is delivered again while it runs (acks_late, a visibility timeout passed) runs
twice at once: the documents are written once and stay ready, and the batch ends done."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from core import graph
from knowledge.dto import DocumentInput
from knowledge.models import IngestBatch
from knowledge.services import documents_submit, ingest_batch_run
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("unconsumed_ingest_queue")  # no worker runs a third copy
def test_a_batch_run_twice_at_once_is_written_once_and_nothing_fails() -> None:
    pid = make_tenant("batch twice").project.id
    docs = [
        DocumentInput(title=f"Note {n}", text=f"Note {n} is about tide pools and limpets number {n}.")
        for n in range(6)
    ]
    submitted = documents_submit(project_id=pid, documents=docs)
    (batch,) = IngestBatch.objects.filter(job_id=submitted.job_id)
    start, errors = threading.Barrier(2), []

    def run() -> None:
        start.wait()
        try:
            ingest_batch_run(batch_id=batch.pk)
        except BaseException as exc:  # noqa: BLE001 (asserted on below)
            errors.append(exc)
        finally:
            connection.close()

    runs = [threading.Thread(target=run) for _ in range(2)]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join()
    assert errors == []
    batch.refresh_from_db()
    assert batch.status == IngestBatch.Status.DONE
    rows = graph.read(
        "MATCH (d:Document {project_id: $p}) OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk) "
        "RETURN d.id AS id, d.status AS status, count(c) AS chunks",
        p=pid,
    )
    assert [(r["status"], r["chunks"]) for r in rows] == [("ready", 1)] * len(docs)
