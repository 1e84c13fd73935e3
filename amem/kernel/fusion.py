"""Rank fusion as pure functions over best-first id lists: one RRF and one z-score fusion for amem and lcm.

amem's search (``fusion = "rrf"``) and lcm's hybrid recall and grep each had an RRF; they
broke ties differently (amem: the order ids were first seen; lcm: ``str(id)``, which puts
rowid 10 before rowid 9). This one keeps amem's rule: ties go to the id seen first, reading
the rankings in the order given, so the first ranking (the caller's primary signal) decides
a tie and the result never depends on how ids print.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["rrf", "zscore_fusion"]

K = TypeVar("K", bound=Hashable)


def rrf(rankings: Sequence[Sequence[K]], k: int = 60,
        weights: Sequence[float] | None = None) -> list[tuple[K, float]]:
    """Reciprocal rank fusion: ``score(d) = sum_i w_i / (k + rank_i(d))`` with ranks from 1.

    Each ranking is a best-first list of ids (an id repeated within one ranking counts once,
    at its best rank). Returns ``(id, score)`` best first; ties keep the order in which ids
    were first seen, rankings in the order given, so the result is deterministic.

    Raises:
        ValueError: ``k < 1``, or not one weight per ranking.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    scores: dict[K, float] = {}
    for ranking, weight in zip(rankings, weights):
        seen: set[K] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def zscore_fusion(candidates: Sequence[K], columns: Sequence[Mapping[K, float]],
                  weights: Sequence[float], missing: Sequence[float]) -> list[tuple[K, float]]:
    """Score fusion: ``sigmoid(sum_i w_i * z_i(d))`` over ``candidates``, best first.

    ``columns[i]`` maps ids to ranking i's raw score (BM25, cosine); a candidate it lacks gets
    ``missing[i]`` (see :func:`amem.ranking.unranked_score`). Each column is standardised over the
    candidates (``z = (x - mean) / std``; a constant column is all zeros, so it cannot
    decide), which puts BM25's unbounded scores and a model's narrow cosine band on one scale
    without a per-model constant. Unlike RRF this keeps *how far* the top of a ranking stands
    above the rest: a note BM25 matches strongly is not levelled with one at BM25 rank 2 that
    merely shares a name. The logistic keeps the order and puts the score in (0, 1), so the
    heat boost's multiplication keeps its meaning. Ties keep the candidates' order.
    """
    if not (len(columns) == len(weights) == len(missing)):
        raise ValueError("one weight and one missing score per column")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError("weights must be finite and >= 0")
    ids = list(dict.fromkeys(candidates))
    total = [0.0] * len(ids)
    for column, weight, fill in zip(columns, weights, missing):
        values = [float(column.get(item, fill)) for item in ids]
        if not all(math.isfinite(v) for v in values):
            raise ValueError("scores must be finite")
        mean = math.fsum(values) / len(values) if values else 0.0
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0
        if std <= 1e-12:
            continue
        for i, v in enumerate(values):
            total[i] += weight * (v - mean) / std
    fused = [(item, 1.0 / (1.0 + math.exp(-t))) for item, t in zip(ids, total)]
    order = {item: i for i, item in enumerate(ids)}
    return sorted(fused, key=lambda kv: (-kv[1], order[kv[0]]))
