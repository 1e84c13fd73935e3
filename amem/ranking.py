"""The ranking maths of ``search``: pure functions over ids and scores, no I/O."""

from __future__ import annotations

import math
from collections import deque
from typing import Callable, Hashable, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)


def rrf(rankings: Sequence[Sequence[K]], k: int = 60,
        weights: Sequence[float] | None = None) -> list[tuple[K, float]]:
    """Reciprocal rank fusion: ``score(d) = sum_i w_i / (k + rank_i(d))`` with ranks from 1.

    Each ranking is a best-first list of ids (an id repeated within one ranking counts once,
    at its best rank). Ties keep the order in which ids were first seen, rankings in the
    order given, so the result is deterministic.
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


def heat_boost(score: float, retrieval_count: int, age_days: float, factor: float = 0.002) -> float:
    """``score * (1 + factor * ln(1 + retrieval_count) / (age_days + 1))``.

    Notes retrieved often and recently rise a little; the boost fades with days since the
    last access. Negative inputs are clamped to zero (a clock skew must not invert ranking).
    """
    count = max(0, retrieval_count)
    age = max(0.0, age_days)
    return score * (1.0 + factor * math.log1p(count) / (age + 1.0))


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
