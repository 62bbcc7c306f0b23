"""The local model run by ONNX Runtime instead of PyTorch (EMBEDDINGS_LOCAL_RUNTIME=onnx, the default).

The same weights give the same vectors (within 1e-5; `ensure` keeps no file that does not), about
1.25x as fast on this project's 2-core machines (docs/decisions.md, "Local embeddings on ONNX
Runtime"), and a process that finds the exported file never imports PyTorch.

The model's package ships PyTorch weights only. The first process that needs the ONNX file exports
it once, into EMBEDDINGS_MODEL_DIR under a name that carries the package's version and this module's
EXPORT_VERSION, so an upgrade of either writes a new file. The exported graph holds the whole
sentence-transformers pipeline after tokenising: the transformer, mean pooling over the attention
mask, and L2 normalisation. Tokenising uses the model's own tokenizer.json, truncated at the model's
max_seq_length, exactly as sentence-transformers does.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

logger = logging.getLogger("core.embeddings")

# bump when the exported graph changes (inputs, outputs, pooling, opset): a new file is written
EXPORT_VERSION = 1
OPSET = 17
# an exported file is kept only when its vectors are those of PyTorch within this (cosine 1 - 1e-9)
AGREEMENT = 1e-5
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBES = (
    "Caroline (8 May 2023): I went to a LGBTQ support group yesterday and it was so powerful.",
    "short",
    "Neo4j stores the knowledge graph; " * 80,  # longer than the model reads: truncated
    "東京 🙂 naïve café — ½ ﬁ",
)


def model_file(model_dir: Path, package: str, name: str) -> Path:
    """Where the ONNX export of `name` (from the installed `package`) lives."""
    version = metadata.version(package)
    return model_dir / f"{name}-{version}-onnx{EXPORT_VERSION}.onnx"


@contextmanager
def _export_lock(target: Path) -> Iterator[None]:
    """One process exports at a time (pool processes start together); the others wait and reuse."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure(source: Path, target: Path, max_seq_length: int) -> Path:
    """`target`, exported from the sentence-transformers model in `source` when it is not there yet.
    Raises when the export cannot be made or does not agree with PyTorch (nothing is left behind)."""
    if target.exists():
        return target
    with _export_lock(target):
        if target.exists():  # another process exported it while this one waited
            return target
        handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".onnx.part")
        os.close(handle)
        try:
            _export(source, Path(temporary), max_seq_length)
            os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from other users of a shared directory
            os.replace(temporary, target)
        finally:
            Path(temporary).unlink(missing_ok=True)
    logger.info("exported the local embedding model to %s", target)
    return target


def _export(source: Path, target: Path, max_seq_length: int) -> None:
    """Trace the model with PyTorch into `target` and check it against PyTorch on _PROBES."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(source)).eval()
    module = _pipeline(torch, model)
    tokenizer = _tokenizer(source / "tokenizer.json", max_seq_length)
    # PyTorch's vectors first: tracing leaves the traced model computing something else
    with torch.no_grad():
        want = np.concatenate(
            [
                module(*(torch.from_numpy(a) for a in _padded(tokenizer.encode_batch([text])))).numpy()
                for text in _PROBES  # one at a time: no padding on the PyTorch side
            ]
        )
        ids = torch.ones(2, 8, dtype=torch.long)
        mask = torch.ones_like(ids)
        mask[1, 5:] = 0  # traced with padding, so the graph keeps the masking
        torch.onnx.export(
            module,
            (ids, mask, torch.zeros_like(ids)),
            str(target),
            dynamo=False,  # the TorchScript tracer: no onnxscript needed, dynamic shapes kept
            input_names=list(_INPUTS),
            output_names=["embedding"],
            dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in _INPUTS}, "embedding": {0: "batch"}},
            opset_version=OPSET,
        )
    # in one padded batch: the exported graph must honour the attention mask
    got = OnnxEncoder(target, source / "tokenizer.json", max_seq_length).encode(
        list(_PROBES), batch_size=len(_PROBES), threads=1
    )
    worst = float(np.abs(got - want).max())
    if not worst <= AGREEMENT:
        raise RuntimeError(f"the ONNX export differs from PyTorch by {worst:.2e} (> {AGREEMENT:.0e})")


def _pipeline(torch: Any, model: Any) -> Any:
    """What sentence-transformers computes after tokenising, as one module: the transformer, mean
    pooling over real tokens, L2 normalisation. Defined here so importing this module needs no
    PyTorch."""

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    return Pipeline()


class OnnxEncoder:
    """Texts to normalised vectors with ONNX Runtime. One session per thread count, made on first
    use; ONNX Runtime's threads sleep between calls instead of spinning, so they leave the cores to
    Neo4j and the web process meanwhile. Safe to call from several threads at once."""

    def __init__(self, model: Path, tokenizer: Path, max_seq_length: int) -> None:
        self.model = model
        self.tokenizer = _tokenizer(tokenizer, max_seq_length)
        self.max_seq_length = max_seq_length
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()

    def session(self, threads: int) -> Any:
        with self._lock:
            if threads not in self._sessions:
                import onnxruntime

                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._sessions[threads] = onnxruntime.InferenceSession(
                    str(self.model), options, providers=["CPUExecutionProvider"]
                )
            return self._sessions[threads]

    def token_ids(self, text: str) -> list[int]:
        """The ids the model reads for `text` (special tokens included, truncated)."""
        return list(self.tokenizer.encode(text).ids)

    def encode(self, texts: list[str], *, batch_size: int, threads: int) -> npt.NDArray[np.float32]:
        """One unit vector per text. Texts run longest first in batches of similar length, so a
        batch pads little (as sentence-transformers does)."""
        session = self.session(threads)
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out: npt.NDArray[np.float32] | None = None
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            feed = dict(zip(_INPUTS, _padded([encodings[i] for i in rows]), strict=True))
            vectors = session.run(None, feed)[0]
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def _tokenizer(path: Path, max_seq_length: int) -> Any:
    """The model's tokenizer as sentence-transformers runs it: truncated at the model's window, no
    padding (the file pads every text to 128 tokens; a batch is padded to its longest text here)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_seq_length)
    return tokenizer


def _padded(encodings: list[Any]) -> tuple[npt.NDArray[np.int64], ...]:
    """Token ids, attention mask and token types of one batch, padded to its longest text."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    return ids, mask, np.zeros_like(ids)


def max_seq_length(source: Path) -> int:
    """The model's window, from its sentence-transformers config."""
    config = json.loads((source / "sentence_bert_config.json").read_text())
    return int(config["max_seq_length"])
