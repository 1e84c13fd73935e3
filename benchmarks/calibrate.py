"""Measure an embedder's two similarity baselines: note-to-note and query-to-note.

    python -m benchmarks.calibrate --embedder e5-small --cache benchmarks/out/embcache

Note to note (``passage``): mean (and spread) of the cosine of 3,000 random pairs of LoCoMo
turns and of CMRC sentences, plus each text's nearest-neighbour cosine among them. Query to
note: each benchmark question (embedded as a ``query``, e5's "query: " prefix) against random
notes of its own corpus (unrelated) and against its evidence notes (relevant). Asymmetric
models put a question and its answer lower than two similar notes, so one baseline cannot
serve both: ``amem.similarity.BASELINES`` holds both figures per model, set from this script.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .datasets import DEFAULT_CMRC, DEFAULT_LOCOMO, Corpus, load_cmrc, load_locomo


def pair_stats(vectors: np.ndarray, pairs: int = 3000, seed: int = 0) -> dict[str, float]:
    """Note-to-note cosines: random pairs (unrelated) and each note's nearest neighbour."""
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(vectors), pairs)
    j = rng.integers(0, len(vectors), pairs)
    keep = i != j
    cos = (vectors[i[keep]] * vectors[j[keep]]).sum(axis=1)
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -1.0)
    nearest = sims.max(axis=1)
    return {"random_mean": round(float(cos.mean()), 3),
            "random_p95": round(float(np.percentile(cos, 95)), 3),
            "nearest_p50": round(float(np.percentile(nearest, 50)), 3),
            "nearest_p90": round(float(np.percentile(nearest, 90)), 3)}


def query_stats(queries: np.ndarray, docs: np.ndarray, relevant: Sequence[Sequence[int]],
                seed: int = 0) -> dict[str, float]:
    """Query-to-note cosines: random notes (unrelated), evidence notes, and the top-1 note."""
    rng = np.random.default_rng(seed)
    sims = queries @ docs.T
    rand, rel, top = [], [], []
    for qi, rows in enumerate(relevant):
        others = np.setdiff1d(np.arange(len(docs)), np.asarray(rows, dtype=int))
        rand.extend(sims[qi, rng.choice(others, size=min(20, len(others)), replace=False)])
        rel.extend(sims[qi, list(rows)])
        top.append(sims[qi].max())
    return {"queries": len(relevant),
            "random_mean": round(float(np.mean(rand)), 3),
            "random_p95": round(float(np.percentile(rand, 95)), 3),
            "relevant_p25": round(float(np.percentile(rel, 25)), 3),
            "relevant_mean": round(float(np.mean(rel)), 3),
            "top1_p50": round(float(np.percentile(top, 50)), 3)}


def _sample(corpora: Sequence[Corpus], texts: int) -> tuple[list[str], list[str], list[list[int]]]:
    """The first ``texts`` notes and the questions whose evidence lies among them."""
    docs = [d for c in corpora for d in c.docs][:texts]
    row = {d.id: i for i, d in enumerate(docs)}
    questions, relevant = [], []
    for corpus in corpora:
        for q in corpus.queries:
            if q.relevant and all(r in row for r in q.relevant):
                questions.append(q.text)
                relevant.append(sorted(row[r] for r in q.relevant))
    return [d.text for d in docs], questions, relevant


def run(embedder_name: str = "e5-small", texts: int = 600,
        cache: Path | None = None) -> dict[str, Any]:
    from amem.embed import make_embedder

    from .embcache import CachedEmbedder

    embedder = CachedEmbedder(make_embedder(embedder_name), cache)
    out: dict[str, Any] = {"embedder": embedder.model_id}
    try:
        for name, corpora in (("locomo", load_locomo(DEFAULT_LOCOMO)),
                              ("cmrc", load_cmrc(DEFAULT_CMRC))):
            notes, questions, relevant = _sample(corpora, texts)
            docs = embedder.embed(notes, kind="passage")
            out[name] = pair_stats(docs)
            out[f"{name}_query"] = query_stats(embedder.embed(questions, kind="query"), docs,
                                               relevant)
    finally:
        embedder.save()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.embedder, args.texts, args.cache), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
