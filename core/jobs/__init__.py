"""Background jobs: one Job model (core.models) and one lifecycle for every app's long work.

- `job_submit` / `job_create` + `job_enqueue`: a job row with its task, queue and inputs; the task is
  queued after the creating transaction commits.
- `job_task`: the task side (skip finished, mark running, retry outages, record success or failure).
- `job_rerun`: a failed job queued again with its inputs (the admin's action).
- `run_with_retries` / `broker_ensure`: the same retry rule and broker check for work that keeps its
  own run records (ingestion batches, retention runs, erasure requests).
"""

from core.jobs.lifecycle import (
    job_create,
    job_enqueue,
    job_fail,
    job_note_error,
    job_rerun,
    job_start,
    job_submit,
    job_succeed,
)
from core.jobs.runs import broker_ensure, run_with_retries

__all__ = [
    "broker_ensure",
    "job_create",
    "job_enqueue",
    "job_fail",
    "job_note_error",
    "job_rerun",
    "job_start",
    "job_submit",
    "job_succeed",
    "run_with_retries",
]
