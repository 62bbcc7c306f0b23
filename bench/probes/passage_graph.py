"""In-process design probe for retrieval v2's graph mode (issue 38): not a benchmark, not the product.

Ranks the passages of a HotpotQA-form data set (`corpus.json`, `questions.json`; see
bench/data/hotpotqa-100/README.md) four ways and prints recall@2 / recall@5 of each:
- BM25 (k1 1.2, b 0.75, lower-cased word tokens of title + text) and MiniLM dense (title + text);
- their reciprocal-rank fusion (k = 60), the seeds' source;
- a personalized PageRank over a passage graph: passage p -> passage q when p's text names q's
  title (or q's title without its parenthetical, "Lilu (mythology)" -> "Lilu"), case-sensitive word
  sequences; seeds are the passages whose titles the question names (case-insensitive; a title
  shared by several passages splits its weight by their fused scores) and the top SEED_TOP fused
  passages at SEED_PASSAGE_WEIGHT x their fused score / the best one; damping DAMPING; 40 power
  iterations on a row-normalised sparse matrix.
It also prints the share of questions whose gold passages are connected by a title (every gold
passage links to or from another gold passage). What it found, on the two shared sets:
see the closing notes of issue 38.

    python -m bench.probes.passage_graph DATA_DIR [DATA_DIR ...]
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bench import baselines

WORD = re.compile(r"\w+")
SEED_TOP = 10
SEED_PASSAGE_WEIGHT = 0.15
DAMPING = 0.5
MAX_TITLE_WORDS = 12


def load(data: Path) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    corpus = json.loads((data / "corpus.json").read_text())
    questions = json.loads((data / "questions.json").read_text())
    titles = list(corpus)
    texts = ["".join(v) if isinstance(v, list) else v for v in corpus.values()]
    for q in questions:
        q["gold"] = set(q.get("supporting_titles") or {t for t, _ in q["supporting_facts"]})
    return titles, texts, questions


def base_title(title: str) -> str:
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip()


def mentions(text: str, names: dict[tuple[str, ...], int], *, lower: bool = False) -> set[int]:
    words = WORD.findall(text.lower() if lower else text)
    found = set()
    for i in range(len(words)):
        for n in range(1, min(MAX_TITLE_WORDS, len(words) - i) + 1):
            if (entity := names.get(tuple(words[i : i + n]))) is not None:
                found.add(entity)
    return found


def recall(ranked: list[str], gold: set[str], k: int) -> float:
    return len(set(ranked[:k]) & gold) / len(gold)


def title_graph(
    titles: list[str], texts: list[str]
) -> tuple[dict[tuple[str, ...], int], dict[int, list[int]], dict[tuple[str, ...], int], sp.csr_matrix]:
    """Title entities by word sequence (both forms), the passages of each, the same keyed in lower
    case (for questions), and the 0/1 matrix of passage -> passage whose title it names."""
    n = len(titles)
    names: dict[tuple[str, ...], int] = {}
    pages: dict[int, list[int]] = defaultdict(list)
    for i, title in enumerate(titles):
        for form in {title, base_title(title)}:
            if key := tuple(WORD.findall(form)):
                pages[names.setdefault(key, len(names))].append(i)
    lower_names = {tuple(w.lower() for w in key): e for key, e in names.items()}
    rows, cols = [], []
    for i, text in enumerate(texts):
        for entity in mentions(text, names):
            for j in pages[entity]:
                if j != i:
                    rows.append(i)
                    cols.append(j)
    links = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    links.data[:] = 1.0
    return names, pages, lower_names, links


def run(data: Path) -> dict[str, tuple[float, float]]:
    titles, texts, questions = load(data)
    n = len(titles)
    baseline = baselines.rank(titles, texts, [q["question"] for q in questions])

    names, pages, lower_names, links = title_graph(titles, texts)
    out_degree = np.asarray(links.sum(axis=1)).ravel()
    walk = (sp.diags(1 / np.maximum(out_degree, 1)) @ links).T.tocsr()
    # specificity of a link target named by n of the N passages: how much of a passage's walk its
    # links take (the rest restarts at the seeds), as retrieval/passage_graph.py weighs them
    named_by = np.asarray(links.sum(axis=0)).ravel()
    forms = {
        "log": np.log((n + 1) / (named_by + 1)) / np.log(n + 1),
        "inverse": 1 / np.maximum(named_by, 1),
        "inverse sqrt": 1 / np.sqrt(np.maximum(named_by, 1)),
    }
    specific = {}
    for form, spec in forms.items():
        out = links.multiply(spec[np.newaxis, :]).tocsr()
        share = np.asarray(out.sum(axis=1)).ravel()
        scaled = sp.diags(1 / np.maximum(share, 1.0)) @ out
        specific[form] = scaled.T.tocsr()
    either_way = (links + links.T).tocsr()
    connected = 0
    index = {t: i for i, t in enumerate(titles)}
    for q in questions:
        gold = [index[t] for t in q["gold"] if t in index]
        around = [set(either_way[g].indices) for g in gold]
        connected += all(
            any(gold[b] in around[a] for b in range(len(gold)) if b != a) for a in range(len(gold))
        )

    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for qi, q in enumerate(questions):
        by_bm25, by_dense, by_fused = baseline.bm25[qi], baseline.dense[qi], baseline.fused[qi]
        fused = baseline.fused_scores[qi]
        best = fused[by_fused[0]]
        seed = np.zeros(n)
        for entity in mentions(q["question"], lower_names, lower=True):
            share = np.array([0.1 + fused.get(i, 0.0) / best for i in pages[entity]])
            seed[pages[entity]] += share / share.sum()
        for i in by_fused[:SEED_TOP]:
            seed[i] += SEED_PASSAGE_WEIGHT * fused[i] / best
        start = seed / seed.sum()
        rank = start.copy()
        for _ in range(40):
            rank = (1 - DAMPING) * start + DAMPING * (walk @ rank)
        variants = [
            ("bm25", by_bm25),
            ("dense", by_dense),
            ("rrf", by_fused),
            ("passage graph", list(np.argsort(-rank)[:10])),
        ]
        for form, weighted in specific.items():
            rank = start.copy()
            for _ in range(40):
                kept = weighted @ rank
                rank = (1 - DAMPING) * start + DAMPING * (kept + (rank.sum() - kept.sum()) * start)
            variants.append((f"specificity {form}", list(np.argsort(-rank)[:10])))
        for name, ranking in variants:
            ranked = [titles[i] for i in ranking]
            totals[name][0] += recall(ranked, q["gold"], 2)
            totals[name][1] += recall(ranked, q["gold"], 5)
    count = len(questions)
    print(f"{data.name}: gold passages connected by a title {100 * connected / count:.0f} %")
    return {k: (round(100 * a / count, 1), round(100 * b / count, 1)) for k, (a, b) in totals.items()}


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        for system, (r2, r5) in run(Path(arg)).items():
            print(f"  {system:14s} recall@2 {r2:5.1f}  recall@5 {r5:5.1f}")
