from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings

from core.errors import InvalidInput
from core.graph import Vector

logger = logging.getLogger("core.embeddings")


class Embedder(ABC):
    """Turns texts into vectors of `dimensions` floats, in batches of `batch_size`."""

    provider: str
    model: str
    dimensions: int

    def __init__(self, *, batch_size: int) -> None:
        if batch_size < 1:
            raise InvalidInput("embedding batch size must be at least 1")
        self.batch_size = batch_size
        self.call_size = batch_size  # texts handed to one _embed_batch call
        self._inflight: dict[str, Future[list[float]]] = {}
        self._inflight_lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, as `Vector`s: lists that stay cheap to log on their way to Neo4j."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.call_size):
            batch = list(texts[start : start + self.call_size])
            out = self._embed_batch(batch)
            if len(out) != len(batch) or any(len(v) != self.dimensions for v in out):
                raise ValueError(f"{self.name} returned vectors of the wrong count or size")
            vectors.extend(Vector(v) for v in out)
        return vectors

    def embed_one(self, text: str) -> list[float]:
        """The vector of one text. Calls for the same text at the same time share one computation
        (an agent's knowledge and memory searches of one question arrive together); nothing is kept
        once it is done, so a later call computes again."""
        with self._inflight_lock:
            pending = self._inflight.get(text)
            owner = pending is None
            if pending is None:
                pending = self._inflight[text] = Future()
        if not owner:
            return Vector(pending.result())  # a copy: each caller owns its list
        try:
            vector = self.embed([text])[0]
            pending.set_result(vector)
            return vector
        except BaseException as exc:
            pending.set_exception(exc)
            raise
        finally:
            with self._inflight_lock:
                del self._inflight[text]

    def warm(self) -> None:
        """Load whatever the first call would (the local model); nothing for remote embedders."""
        return None

    @abstractmethod
    def _embed_batch(self, texts: list[str]) -> list[list[float]]: ...


_cache: dict[tuple[str, str, int], Embedder] = {}
_lock = threading.Lock()


def make_embedder(*, provider: str, model: str, dimensions: int, batch_size: int | None = None) -> Embedder:
    batch = batch_size or settings.EMBEDDINGS_BATCH_SIZE
    if provider == "local":
        from core.embeddings.local import LocalEmbedder  # local only: it loads torch, the remote one does not

        return LocalEmbedder(model=model, batch_size=batch)
    if provider in ("openai", "azure"):
        from core.embeddings.remote import OpenAIEmbedder  # remote only: no client for a local install

        return OpenAIEmbedder(provider=provider, model=model, dimensions=dimensions, batch_size=batch)
    raise InvalidInput(f"unknown embeddings provider {provider!r}; use local, openai or azure")


def get_embedder() -> Embedder:
    """The configured embedder, shared per process (the local model loads once)."""
    key = (settings.EMBEDDINGS_PROVIDER, settings.EMBEDDINGS_MODEL, settings.EMBEDDINGS_DIMENSIONS)
    with _lock:
        if key not in _cache:
            _cache[key] = make_embedder(provider=key[0], model=key[1], dimensions=key[2])
        return _cache[key]


# Embeddings computed while the caller does other work. This pool runs nothing else, so a task
# elsewhere may wait on one of its Futures without ever waiting on itself.
_soon = ThreadPoolExecutor(max_workers=2, thread_name_prefix="embed-soon")


def embed_soon(text: str) -> Future[list[float]]:
    """The configured embedder's vector of `text`, computed on a worker thread; the caller goes on
    (its database reads, a fulltext query) and takes the vector from the Future when it needs it."""
    return _soon.submit(lambda: get_embedder().embed_one(text))
