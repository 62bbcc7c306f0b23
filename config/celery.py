"""The Celery application. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown

from core.runtime.task_leases import TaskLeases

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("knowledge_platform")
app.set_default()  # celery.current_app is this app in every thread (core reaches it so, never via config)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# a task whose worker died is handed out again within seconds, not the visibility timeout
app.steps["consumer"].add(TaskLeases)


@worker_process_init.connect
def _fresh_graph_driver(**_kwargs: object) -> None:
    """A forked pool process must not reuse the parent's Bolt sockets, and its share of the cores
    for the local embedder is the machine's cores divided by the pool size."""
    # in the forked pool process, after Django is set up (this module loads before the settings)
    from core import graph
    from core.embeddings.local import configure_threads
    from core.runtime import heap
    from core.runtime.tracing import tracing_start

    graph.reset_driver()
    configure_threads()
    tracing_start("worker")  # TRACING_ENABLED: spans of tasks, queries and LLM calls of this process
    heap.freeze_long_lived()  # what the pool process inherited lives as long as it does


@worker_process_shutdown.connect
def _flush_spans(**_kwargs: object) -> None:
    """A pool process ending sends its batched spans first (no-op when tracing is off)."""
    from core.runtime.tracing import tracing_flush

    tracing_flush()
