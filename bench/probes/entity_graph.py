"""In-process design probe for issue 38's item 4 (entities beyond titles): not a benchmark, not the
product.

Does adding the entities ingestion extracts (knowledge/pipeline/extraction.py, extractive mode) to
the passage graph of title links help a personalized PageRank find the passages of a multi-hop
question? The graph has a vertex per passage and one per entity:
- title links as retrieval/passage_graph.py makes them (a passage naming a title leads to that
  passage, weighted by the title's specificity 1 / n for a title named by n passages);
- a passage leads to each entity it mentions, weighted by the entity's specificity (1 / n for an
  entity mentioned by n passages), and an entity leads to every passage that mentions it, evenly;
- what a passage's edges do not take restarts at the seeds.
Seeds: the titles the question names, the entities it names (case folded, weight = specificity),
and the top SEED_TOP passages of the BM25 + MiniLM RRF at SEED_PASSAGE_WEIGHT x score / best.

Variants: titles only; titles + NAME entities; titles + every entity (NAME and CONCEPT); and each
with entity seeds from the question off. It also prints the share of questions whose gold passages
are connected by a title or a shared entity.

    python -m bench.probes.entity_graph DATA_DIR [DATA_DIR ...]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bench import baselines
from bench.probes.passage_graph import WORD, load, mentions, recall, title_graph
from knowledge.pipeline.extraction import extract_extractive, normalise_name

SEED_TOP = 10
SEED_PASSAGE_WEIGHT = 0.15
DAMPING = 0.5
ENTITY_WEIGHTS = (0.5, 1.0)


def entity_mentions(texts: list[str], kinds: set[str]) -> tuple[list[str], list[set[int]]]:
    """Entity keys, and for each passage the entities it mentions."""
    keys: dict[str, int] = {}
    per_passage: list[set[int]] = []
    for text in texts:
        found = set()
        for entity in extract_extractive(text).entities:
            if entity.type in kinds and (key := normalise_name(entity.name)):
                found.add(keys.setdefault(key, len(keys)))
        per_passage.append(found)
    return list(keys), per_passage


def run(data: Path) -> dict[str, tuple[float, float]]:
    titles, texts, questions = load(data)
    n = len(titles)
    baseline = baselines.rank(titles, texts, [q["question"] for q in questions])

    _names, pages, lower_names, links = title_graph(titles, texts)
    named_by = np.asarray(links.sum(axis=0)).ravel()
    title_out = links.multiply((1 / np.maximum(named_by, 1))[np.newaxis, :]).tocsr()

    graphs = {}
    index = {t: i for i, t in enumerate(titles)}
    variants: list[tuple[str, set[str]]] = [
        ("titles", set()),
        ("titles + names", {"NAME"}),
        ("titles + all", {"NAME", "CONCEPT"}),
    ]
    for label, kinds in variants:
        keys, per_passage = entity_mentions(texts, kinds) if kinds else ([], [set() for _ in texts])
        m = len(keys)
        e_rows = [i for i, found in enumerate(per_passage) for _ in found]
        e_cols = [e for found in per_passage for e in sorted(found)]
        contains = sp.csr_matrix((np.ones(len(e_rows)), (e_rows, e_cols)), shape=(n, m))
        mentioned_by = np.asarray(contains.sum(axis=0)).ravel()
        useful = mentioned_by >= 2  # an entity of one passage connects nothing
        for weight in ENTITY_WEIGHTS if kinds else (0.0,):
            spec = np.where(useful, 1 / np.maximum(mentioned_by, 1), 0.0) * weight
            passage_out = sp.hstack([title_out, contains.multiply(spec[np.newaxis, :])]).tocsr()
            share = np.asarray(passage_out.sum(axis=1)).ravel()
            passage_out = sp.diags(1 / np.maximum(share, 1.0)) @ passage_out
            entity_out = sp.hstack(
                [sp.diags(1 / np.maximum(mentioned_by, 1)) @ contains.T, sp.csr_matrix((m, m))]
            ).tocsr()
            step = sp.vstack([passage_out, entity_out]).T.tocsr()  # column-stochastic at most
            entity_names = {
                tuple(WORD.findall(k)): e for e, k in enumerate(keys) if useful[e] and WORD.findall(k)
            }
            graphs[f"{label} (w {weight})" if kinds else label] = (step, entity_names, spec, m)
        if kinds:
            either = (links + links.T + contains @ contains.T).tocsr()
            connected = 0
            for q in questions:
                gold = [index[t] for t in q["gold"] if t in index]
                around = [set(either[g].indices) for g in gold]
                connected += all(
                    any(gold[b] in around[a] for b in range(len(gold)) if b != a) for a in range(len(gold))
                )
            share = 100 * connected / len(questions)
            print(
                f"{data.name}: gold passages connected by a title or a {label} entity {share:.0f} %"
                f"  ({m} entities, {int(useful.sum())} in 2+ passages)"
            )

    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for qi, q in enumerate(questions):
        fused = baseline.fused_scores[qi]
        by_fused = baseline.fused[qi]
        best = fused[by_fused[0]]
        for label, (step, entity_names, spec, m) in graphs.items():
            for with_entity_seeds in (True, False) if m else (False,):
                seed = np.zeros(n + m)
                for entity in mentions(q["question"], lower_names, lower=True):
                    share = np.array([0.1 + fused.get(i, 0.0) / best for i in pages[entity]])
                    seed[pages[entity]] += share / share.sum()
                if with_entity_seeds:
                    for e in mentions(q["question"].casefold(), entity_names, lower=True):
                        seed[n + e] += spec[e] / max(spec.max(), 1e-9)
                for i in by_fused[:SEED_TOP]:
                    seed[i] += SEED_PASSAGE_WEIGHT * fused[i] / best
                start = seed / seed.sum()
                rank = start.copy()
                for _ in range(40):
                    kept = step @ rank
                    rank = (1 - DAMPING) * start + DAMPING * (kept + (rank.sum() - kept.sum()) * start)
                ranked = [titles[i] for i in np.argsort(-rank[:n])[:10]]
                name = label if not m else f"{label}{'' if with_entity_seeds else ', no entity seeds'}"
                totals[name][0] += recall(ranked, q["gold"], 2)
                totals[name][1] += recall(ranked, q["gold"], 5)
    count = len(questions)
    return {k: (round(100 * a / count, 1), round(100 * b / count, 1)) for k, (a, b) in totals.items()}


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        for system, (r2, r5) in run(Path(arg)).items():
            print(f"  {system:40s} recall@2 {r2:5.1f}  recall@5 {r5:5.1f}")
