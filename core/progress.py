"""Progress events (DESIGN.md section 6): to the project's Channels group and Redis pub/sub.

Progress is advisory and at most once: a failure to deliver is logged, never raised, and the
event is only sent after the surrounding database transaction commits.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from pydantic import BaseModel, Field, model_validator

from core.redis_client import get_redis

logger = logging.getLogger(__name__)

GROUP_EVENT_TYPE = "progress.event"


def project_group(project_id: str) -> str:
    """Channels group of a project's progress (names allow [a-z0-9._-], under 100 chars)."""
    return f"progress.{project_id}"


class ProgressEvent(BaseModel):
    message_type: Literal["retrieval_progress", "ingestion_progress", "memory_progress"]
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
    """Send `event` at once: for work that writes nothing to SQL (a DRIFT search), whose events must
    not wait for a surrounding transaction."""
    _deliver(event)


def _deliver(event: ProgressEvent) -> None:
    payload = event.payload()
    try:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(
                project_group(event.project_id), {"type": GROUP_EVENT_TYPE, "event": payload}
            )
    except Exception as exc:  # noqa: BLE001 - advisory delivery never fails the caller
        logger.warning("progress event not sent to channel group: %s", exc)
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
    from core.models import Job

    pct = max(0, min(100, pct))
    Job.objects.filter(pk=job.pk).update(phase=phase, progress_pct=pct)
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
