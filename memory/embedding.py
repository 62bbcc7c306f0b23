"""Embedding stored messages in the worker, in batches that span stores (issue 34, item 4).

A store with `embed_in_worker` answers 202 and leaves its messages without embeddings; its
`memory_process` job embeds them. A job does not embed only its own: it also takes the messages of the
project's other stores still waiting in the queue, up to MEMORY_EMBED_BATCH messages in all. Under a
stream of small stores, the first job to run embeds what has piled up behind it in one batch, and the
jobs it took from find their messages embedded when they run.

Taking another job's messages is only an early start, never a hand-over: each job still embeds
whatever of its own is still without an embedding when it runs (a worker that died after taking them
loses nothing). A Redis key per job (SET NX, expiring after MEMORY_EMBED_CLAIM_SEC) keeps two workers
from taking the same queued job's messages; without Redis a job embeds only its own.
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings

from core.models import Job
from core.runtime.redis_client import get_redis

logger = logging.getLogger("memory")

KIND = "memory_process"
# inputs of a job whose messages were stored without embeddings
PENDING = "embedding_pending"


def _claim_key(job_id: str) -> str:
    return f"memory:embed-claim:{job_id}"


def claim_queued(*, project_id: str, job_id: str, room: int) -> list[str]:
    """The ids of messages that the project's other queued processing jobs wait to embed, oldest job
    first, at most `room` of them; each job whose messages are returned is claimed for this one."""
    if room <= 0:
        return []
    queued = (
        Job.objects.filter(project_id=project_id, kind=KIND, status=Job.Status.QUEUED)
        .exclude(pk=job_id)
        .order_by("created_at")
        .values_list("id", "inputs")[:room]
    )
    taken: list[str] = []
    try:
        client = get_redis()
        for other, inputs in queued:
            ids = inputs.get("memory_ids", []) if inputs.get(PENDING) else []
            if not ids:
                continue
            if len(taken) + len(ids) > room:
                break
            if client.set(_claim_key(other), job_id, nx=True, ex=settings.MEMORY_EMBED_CLAIM_SEC):
                taken.extend(ids)
    except redis.RedisError as exc:  # an early start is worth no failure: each job embeds its own
        logger.warning("memory job %s embeds only its own messages: %s", job_id, exc)
    return taken
