"""Measure an embedder's cosine of unrelated texts (its similarity baseline).

    python -m benchmarks.calibrate --embedder e5-small

Mean (and spread) of the cosine of 3,000 random pairs of LoCoMo turns and of CMRC sentences,
plus each text's nearest-neighbour cosine among 600: what ``amem.similarity.BASELINES`` and
``similarity_baseline`` in the config are set from.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Sequence

import numpy as np

from .datasets import DEFAULT_CMRC, DEFAULT_LOCOMO, load_cmrc, load_locomo


def pair_stats(vectors: np.ndarray, pairs: int = 3000, seed: int = 0) -> dict[str, float]:
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


def run(embedder_name: str = "e5-small", texts: int = 600) -> dict[str, Any]:
    from amem.embed import make_embedder

    embedder = make_embedder(embedder_name)
    english = [d.text for c in load_locomo(DEFAULT_LOCOMO) for d in c.docs][:texts]
    chinese = [d.text for d in load_cmrc(DEFAULT_CMRC)[0].docs][:texts]
    return {"embedder": embedder.model_id,
            "locomo": pair_stats(embedder.embed(english, kind="passage")),
            "cmrc": pair_stats(embedder.embed(chinese, kind="passage"))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--texts", type=int, default=600)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.embedder, args.texts), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
