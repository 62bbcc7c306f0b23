"""Keeping a process's long-lived objects out of Python's cyclic garbage collector.

A web or worker process holds hundreds of thousands of objects that live as long as it does: Django,
DRF, the Neo4j driver and, above all, PyTorch and the local embedding model (~650,000 objects). A
full (generation 2) collection walks all of them while holding the GIL: measured ~360 ms in the web
process, stalling every request and thread. It triggers every few seconds under load, so it showed up
as sudden 300 ms gaps in DRIFT searches and as lost throughput in stores and ingestion.

`freeze_long_lived()` collects once and then moves every object alive at that moment into the
permanent generation (`gc.freeze()`), which later collections skip; objects created afterwards are
collected as usual. It is called once the heavy, permanent parts are loaded: at web start-up and
again when the local model has loaded (in whichever process embeds).
"""

from __future__ import annotations

import gc
import logging
import threading
import time

logger = logging.getLogger("core.runtime.heap")

_lock = threading.Lock()


def freeze_long_lived() -> int:
    """Collect garbage, then freeze every surviving object. Returns how many objects are frozen."""
    with _lock:
        started = time.perf_counter()
        gc.collect()
        gc.freeze()
        frozen = gc.get_freeze_count()
    logger.info(
        "heap frozen: %s long-lived objects kept out of garbage collection (%.0f ms)",
        frozen,
        (time.perf_counter() - started) * 1000,
    )
    return frozen
