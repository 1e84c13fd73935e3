"""The ranking maths of ``search``: pure functions over ids and scores, no I/O."""

from __future__ import annotations

import math
from collections import deque
from typing import Callable, Hashable, Mapping, Sequence, TypeVar


K = TypeVar("K", bound=Hashable)


def zscore_fusion(candidates: Sequence[K], columns: Sequence[Mapping[K, float]],
                  weights: Sequence[float], missing: Sequence[float]) -> list[tuple[K, float]]:
    """Score fusion: ``sigmoid(sum_i w_i * z_i(d))`` over ``candidates``, best first.

    ``columns[i]`` maps ids to ranking i's raw score (BM25, cosine); a candidate it lacks gets
    ``missing[i]`` (see :func:`unranked_score`). Each column is standardised over the
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


def unranked_score(scores: Sequence[float], pool: int) -> float:
    """The score to assume for a note a ranking did not return, given its returned ``scores``.

    A ranking that returned fewer than ``pool`` notes returned every note it scores above
    zero (BM25 ranks only notes sharing a term), so the rest score 0. A full ranking cut the
    rest off below its last score: that score is their upper bound and the assumption made.
    """
    if pool < 1:
        raise ValueError("pool must be >= 1")
    if len(scores) < pool or not scores:
        return 0.0
    return float(min(scores))


def heat_boost(score: float, retrieval_count: int, age_days: float, factor: float = 0.002) -> float:
    """``score * (1 + factor * ln(1 + retrieval_count) / (age_days + 1))``.

    Notes retrieved often and recently rise a little; the boost fades with days since the
    last access. Negative inputs are clamped to zero (a clock skew must not invert ranking).
    """
    count = max(0, retrieval_count)
    age = max(0.0, age_days)
    return score * (1.0 + factor * math.log1p(count) / (age + 1.0))


def usage_boost(score: float, best_cosine: float | None, threshold: float = 0.97,
                factor: float = 1.0) -> float:
    """``score * (1 + factor * (c - threshold) / (1 - threshold))`` when ``c >= threshold``.

    ``c`` is the best cosine of the query with a query after which the agent opened the note
    (``amem.usage``); None or below ``threshold``: ``score`` unchanged. The same question
    again (c = 1) multiplies by ``1 + factor``; the boost fades to nothing at the threshold,
    so a question that is merely on the same topic never moves.
    """
    if not -1.0 <= threshold < 1.0:
        raise ValueError("threshold must lie in [-1, 1)")
    if not math.isfinite(factor) or factor < 0:
        raise ValueError("factor must be finite and >= 0")
    if best_cosine is None or not math.isfinite(best_cosine) or best_cosine < threshold:
        return score
    closeness = min(1.0, (best_cosine - threshold) / (1.0 - threshold))
    return score * (1.0 + factor * closeness)


def expand_links(
    seeds: Sequence[K],
    links_of: Callable[[K], Sequence[K]],
    cosine_of: Callable[[K], float | None],
    *,
    hops: int = 2,
    min_cosine: float = 0.25,
    max_added: int = 8,
) -> list[K]:
    """Breadth-first expansion over links from ``seeds``, in discovery order.

    A linked note is admitted when its cosine to the query is at least ``min_cosine``
    (``cosine_of`` returns None for notes that cannot be admitted: missing, inactive, another
    tenant). Only admitted notes are expanded further. Seeds are never added; at most
    ``max_added`` notes come back, each once.
    """
    if hops <= 0 or max_added <= 0:
        return []
    visited: set[K] = set(seeds)
    added: list[K] = []
    frontier: deque[tuple[K, int]] = deque((seed, 0) for seed in seeds)
    while frontier:
        node, depth = frontier.popleft()
        if depth >= hops:
            continue
        for neighbour in links_of(node):
            if neighbour in visited:
                continue
            visited.add(neighbour)
            cos = cosine_of(neighbour)
            if cos is None or cos < min_cosine:
                continue
            added.append(neighbour)
            if len(added) >= max_added:
                return added
            frontier.append((neighbour, depth + 1))
    return added
