"""Duplicate clusters from scored pairs: best pairs first, every member near its survivor."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..notes import about_the_same


def plan_clusters(pairs: Sequence[tuple[str, str, float]], vectors: dict[str, np.ndarray],
                  keys: dict[str, Any], threshold: float,
                  lineage: Mapping[str, str] | None = None,
                  subjects: Mapping[str, Sequence[str]] | None = None,
                  apart: Callable[[str, str], bool] | None = None
                  ) -> list[tuple[str, list[tuple[str, float]]]]:
    """Duplicate clusters from scored pairs: ``[(survivor, [(loser, cosine), ...]), ...]``.

    Pairs are joined best first; two clusters join only if every member of the union is
    within ``threshold`` of the union's survivor (the member with the largest key), and no
    two members share a ``lineage`` (a supersession chain's id; notes absent have none), and
    every two members naming ``subjects`` share one (``amem.notes.about_the_same``), and no
    two members are ``apart`` (the caller's say: two notes stating different values,
    ``amem.write.values``, "Server A has 16 GB" and server B's, are two facts however alike).
    Vectors must be unit length. Survivors come sorted, losers best first.
    """
    chains = lineage or {}
    root: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for a, b, _ in sorted(pairs, key=lambda p: (-p[2], p[0], p[1])):
        ra, rb = root.get(a, a), root.get(b, b)
        if ra == rb:
            continue
        union = members.get(ra, [ra]) + members.get(rb, [rb])
        chained = [chains[m] for m in union if m in chains]
        if len(chained) != len(set(chained)):
            continue  # a fact and its successor (or predecessor): keep both, and the history
        if subjects is not None and not about_the_same(*(subjects.get(m, ()) for m in union)):
            continue  # notes about different people stay apart, however alike
        if apart is not None and any(apart(m, n) for m in members.get(ra, [ra])
                                     for n in members.get(rb, [rb])):
            continue  # another value is another fact
        survivor = max(union, key=lambda m: keys[m])
        sv = vectors[survivor]
        if any(float(vectors[m] @ sv) < threshold for m in union if m != survivor):
            continue
        members.pop(ra, None)
        members.pop(rb, None)
        members[survivor] = union
        for m in union:
            root[m] = survivor
    out = []
    for survivor in sorted(members):
        sv = vectors[survivor]
        losers = sorted(((m, float(vectors[m] @ sv)) for m in members[survivor] if m != survivor),
                        key=lambda x: (-x[1], x[0]))
        out.append((survivor, losers))
    return out


__all__ = ["plan_clusters"]
