"""The ranking maths of ``search``: pure functions over ids and scores, no I/O."""

from __future__ import annotations

import math
from collections import deque
from typing import Callable, Hashable, Sequence, TypeVar

from amem.kernel.fusion import zscore_fusion as zscore_fusion  # written once, lcm fuses with it too

K = TypeVar("K", bound=Hashable)


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
