"""Supersession chains: which notes are one fact's versions (consolidation keeps them apart).

A note superseded by another, and that one by a third, form one chain; consolidation never
merges two notes of a chain (``amem.consolidate.plan_clusters``), which would lose the history.
"""

from __future__ import annotations


class Chains:
    """Union-find over supersession marks: each chain of facts gets one id (its least)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(x, x) != root:  # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)
            self.parent.setdefault(min(ra, rb), min(ra, rb))

    def roots(self) -> dict[str, str]:
        """Every note seen, mapped to its chain's id."""
        return {x: self.find(x) for x in list(self.parent)}


__all__ = ["Chains"]
