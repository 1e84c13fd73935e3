"""Rank fusion as pure functions over best-first id lists: one RRF for amem and lcm.

amem's search (``fusion = "rrf"``) and lcm's hybrid recall and grep each had an RRF; they
broke ties differently (amem: the order ids were first seen; lcm: ``str(id)``, which puts
rowid 10 before rowid 9). This one keeps amem's rule: ties go to the id seen first, reading
the rankings in the order given, so the first ranking (the caller's primary signal) decides
a tie and the result never depends on how ids print.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

__all__ = ["rrf"]

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
