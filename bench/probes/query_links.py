"""In-process design probe for issue 38's item 5 (link the query to entities by name and by
embedding): not a benchmark, not the product.

Graph mode links a question to the titles it names (case folded, leftmost-longest). Would linking by
embedding add anything? For each question this prints how many gold passages are reached:
- by name: the gold title (or its form without a parenthetical) is named in the question;
- by embedding: the gold title is among the TOP titles whose MiniLM embedding is nearest the
  question's with a cosine of at least each threshold, and not already named;
- and how many wrong titles the embedding link adds per question at each threshold.

    python -m bench.probes.query_links DATA_DIR [DATA_DIR ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from bench import baselines
from bench.probes.passage_graph import load
from knowledge.pipeline.titles import TitleMatcher

TOP = 3
THRESHOLDS = (0.4, 0.5, 0.6, 0.7)


def run(data: Path) -> None:
    titles, _texts, questions = load(data)
    model = baselines.encoder()
    unique = sorted(set(titles))
    vectors = model.encode(unique, batch_size=256, normalize_embeddings=True, show_progress_bar=False)
    asked = model.encode(
        [q["question"] for q in questions], normalize_embeddings=True, show_progress_bar=False
    )
    matcher = TitleMatcher.of({t: t for t in unique}, fold_case=True)
    gold_total = named = 0
    by_embedding = dict.fromkeys(THRESHOLDS, 0)
    wrong = dict.fromkeys(THRESHOLDS, 0)
    for qi, q in enumerate(questions):
        gold = set(q["gold"])
        found = matcher.mentioned(q["question"])
        gold_total += len(gold)
        named += len(gold & found)
        cosine = vectors @ asked[qi]
        nearest = np.argsort(-cosine)[:TOP]
        for threshold in THRESHOLDS:
            linked = {unique[i] for i in nearest if cosine[i] >= threshold} - found
            by_embedding[threshold] += len(linked & gold)
            wrong[threshold] += len(linked - gold)
    count = len(questions)
    print(f"{data.name}: {gold_total} gold passages; named in the question {named}")
    for threshold in THRESHOLDS:
        print(
            f"  embedding top {TOP}, cosine >= {threshold}: {by_embedding[threshold]} more gold, "
            f"{wrong[threshold] / count:.2f} wrong titles per question"
        )


# --- does it help the walk? ---------------------------------------------------------------------------

SEED_TOP = 10
SEED_PASSAGE_WEIGHT = 0.15
DAMPING = 0.5
LINK_VARIANTS = ((None, 0.0), (0.6, 1.0), (0.6, 0.5), (0.7, 1.0), (0.7, 0.5))


def walk(data: Path) -> None:
    """Recall of the probe's title walk (leftmost-longest titles as the platform reads them, node
    specificity 1 / n) with titles linked by embedding added to the seeds: (threshold, weight)."""
    import scipy.sparse as sp

    from bench.probes.passage_graph import recall

    titles, texts, questions = load(data)
    model = baselines.encoder()
    ranked = baselines.rank(titles, texts, [q["question"] for q in questions], model=model)
    n = len(titles)
    by_title: dict[str, list[int]] = {}
    for i, t in enumerate(titles):
        by_title.setdefault(t, []).append(i)
    unique = sorted(by_title)
    in_text = TitleMatcher.of({t: t for t in unique})
    in_query = TitleMatcher.of({t: t for t in unique}, fold_case=True)
    rows, cols = [], []
    for i, text in enumerate(texts):
        for t in in_text.mentioned(text):
            for j in by_title[t]:
                if j != i:
                    rows.append(i)
                    cols.append(j)
    links = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    links.data[:] = 1.0
    named_by = np.asarray(links.sum(axis=0)).ravel()
    out = links.multiply((1 / np.maximum(named_by, 1))[np.newaxis, :]).tocsr()
    share = np.asarray(out.sum(axis=1)).ravel()
    step = (sp.diags(1 / np.maximum(share, 1.0)) @ out).T.tocsr()
    vectors = model.encode(unique, batch_size=256, normalize_embeddings=True, show_progress_bar=False)
    asked = model.encode(
        [q["question"] for q in questions], normalize_embeddings=True, show_progress_bar=False
    )
    totals = {v: [0.0, 0.0] for v in LINK_VARIANTS}
    for qi, q in enumerate(questions):
        fused, by_fused = ranked.fused_scores[qi], ranked.fused[qi]
        best = fused[by_fused[0]]
        named = in_query.mentioned(q["question"])
        cosine = vectors @ asked[qi]
        nearest = [unique[i] for i in np.argsort(-cosine)[:TOP]]
        for threshold, weight in LINK_VARIANTS:
            seed = np.zeros(n)
            linked = [(t, 1.0) for t in named]
            if threshold is not None:
                linked += [
                    (t, weight) for t in nearest if t not in named and cosine[unique.index(t)] >= threshold
                ]
            for t, w in linked:
                pages = by_title[t]
                part = np.array([0.1 + fused.get(i, 0.0) / best for i in pages])
                seed[pages] += w * part / part.sum()
            for i in by_fused[:SEED_TOP]:
                seed[i] += SEED_PASSAGE_WEIGHT * fused[i] / best
            start = seed / seed.sum()
            rank = start.copy()
            for _ in range(40):
                kept = step @ rank
                rank = (1 - DAMPING) * start + DAMPING * (kept + (rank.sum() - kept.sum()) * start)
            top = [titles[i] for i in np.argsort(-rank)[:10]]
            totals[(threshold, weight)][0] += recall(top, q["gold"], 2)
            totals[(threshold, weight)][1] += recall(top, q["gold"], 5)
    count = len(questions)
    for (threshold, weight), (r2, r5) in totals.items():
        label = "names only" if threshold is None else f"+ embedding >= {threshold}, weight {weight}"
        print(f"  walk, {label:34s} recall@2 {100 * r2 / count:5.1f}  recall@5 {100 * r5 / count:5.1f}")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        run(Path(arg))
        walk(Path(arg))
