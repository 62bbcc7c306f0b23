from __future__ import annotations

from typing import Any

from core import graph
from knowledge.dto import DocumentInput
from knowledge.models import IngestBatch
from knowledge.services import documents_submit, ingest_batch_run


def ingest_now(project_id: str, documents: list[DocumentInput]) -> list[str]:
    """The real ingestion pipeline, run in this process instead of a Celery worker (the test's
    transaction never commits, so nothing is queued). Returns the document ids in input order."""
    result = documents_submit(project_id=project_id, documents=documents)
    for batch in IngestBatch.objects.filter(job_id=result.job_id).order_by("index"):
        ingest_batch_run(batch_id=batch.pk)
    return [d.document_id for d in result.documents]


def search(client: Any, project_id: str, **body: Any) -> Any:
    return client.post(f"/api/v1/projects/{project_id}/search", body, format="json")


def node_count() -> int:
    return graph.read("MATCH (n) RETURN count(n) AS n")[0]["n"]
