"""Retrieval metrics over one ranked list of ids and a set of relevant ids."""

from __future__ import annotations

import math
from typing import Iterable, Sequence


def recall_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """|relevant in top k| / |relevant| (fractional)."""
    if not relevant:
        return 0.0
    return len(set(ranked[:k]) & relevant) / len(relevant)


def hit_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    return 1.0 if set(ranked[:k]) & relevant else 0.0


def ndcg_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """Binary-gain NDCG@k (each relevant id counted once, at its first position)."""
    seen: set[str] = set()
    dcg = 0.0
    for i, item in enumerate(ranked[:k]):
        if item in relevant and item not in seen:
            seen.add(item)
            dcg += 1.0 / math.log2(i + 2)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal if ideal else 0.0


def mrr(ranked: Sequence[str], relevant: set[str]) -> float:
    for i, item in enumerate(ranked):
        if item in relevant:
            return 1.0 / (i + 1)
    return 0.0


METRICS = ("R@5", "R@10", "hit@1", "hit@10", "NDCG@10", "MRR")


def score(ranked: Sequence[str], relevant: set[str]) -> dict[str, float]:
    return {"R@5": recall_at(ranked, relevant, 5), "R@10": recall_at(ranked, relevant, 10),
            "hit@1": hit_at(ranked, relevant, 1), "hit@10": hit_at(ranked, relevant, 10),
            "NDCG@10": ndcg_at(ranked, relevant, 10), "MRR": mrr(ranked, relevant)}


def mean(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    rows = list(rows)
    if not rows:
        return {}
    out = {key: round(sum(r[key] for r in rows) / len(rows), 4) for key in rows[0]}
    out["n"] = len(rows)
    return out


def dedup_order(items: Iterable[str]) -> list[str]:
    """Items in order without repeats (a folded note expands to several ids)."""
    return list(dict.fromkeys(items))
