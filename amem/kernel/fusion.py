"""Rank fusion as pure functions over best-first id lists: one RRF and one z-score fusion for amem and lcm.

amem's search (``fusion = "rrf"``) and lcm's hybrid recall and grep each had an RRF; they
broke ties differently (amem: the order ids were first seen; lcm: ``str(id)``, which puts
rowid 10 before rowid 9). This one keeps amem's rule: ties go to the id seen first, reading
the rankings in the order given, so the first ranking (the caller's primary signal) decides
a tie and the result never depends on how ids print.
"""

from __future__ import annotations

import math
from operator import itemgetter
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["fused_order", "rrf", "zscore_fusion", "zscore_totals"]

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


def _moments(values: list[float]) -> tuple[float, float]:
    """The population mean and standard deviation of ``values`` (0, 0 when empty): how
    :func:`zscore_totals` standardises a column."""
    if not values:
        return 0.0, 0.0
    if not all(math.isfinite(v) for v in values):
        raise ValueError("scores must be finite")
    mean = math.fsum(values) / len(values)
    return mean, math.sqrt(math.fsum([(v - mean) ** 2 for v in values]) / len(values))


def zscore_totals(candidates: Sequence[K], columns: Sequence[Mapping[K, float]],
                  weights: Sequence[float], missing: Sequence[float]
                  ) -> tuple[dict[K, float], list[tuple[float, float]]]:
    """``sum_i w_i * z_i(d)`` of each candidate (the fused score before the logistic), in the
    candidates' order with repeats dropped, and each column's ``(mean, std)`` over the
    candidates (a candidate a column lacks counts as its ``missing`` score).

    Kept apart from :func:`zscore_fusion` so that a later step scoring more notes on the same
    scale (amem's neighbour lift) reuses the totals and moments instead of computing them
    again. A constant column (std 0) adds nothing.
    """
    if not (len(columns) == len(weights) == len(missing)):
        raise ValueError("one weight and one missing score per column")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError("weights must be finite and >= 0")
    ids = list(dict.fromkeys(candidates))
    total = [0.0] * len(ids)
    moments = []
    for column, weight, fill in zip(columns, weights, missing):
        values = [column.get(item, fill) for item in ids]
        mean, std = _moments(values)
        moments.append((mean, std))
        if std <= 1e-12:
            continue
        # the same operations, in the same order, as a total computed one note at a time
        # (amem.ranking.zscore_total): a note scored later ties with its equal here
        total = [t + weight * (v - mean) / std for t, v in zip(total, values)]
    return dict(zip(ids, total)), moments


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
    return fused_order(zscore_totals(candidates, columns, weights, missing)[0])


def fused_order(totals: Mapping[K, float]) -> list[tuple[K, float]]:
    """``(id, sigmoid(total))`` best first; equal scores keep ``totals``' order (a stable
    sort)."""
    fused = [(item, 1.0 / (1.0 + math.exp(-t))) for item, t in totals.items()]
    fused.sort(key=itemgetter(1), reverse=True)
    return fused
