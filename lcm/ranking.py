"""Ranking maths as pure functions over (id, score) lists: RRF fusion and BM25 passage scoring."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import TypeVar

__all__ = ["rrf", "tokenize", "bm25_scores"]

K = TypeVar("K", bound=Hashable)
_TOKEN = re.compile(r"[a-z0-9_./-]+|[\u3400-\u9fff\u3040-\u30ff\uac00-\ud7af]", re.IGNORECASE)


def rrf(rankings: Sequence[Sequence[K]], k: int = 60, weights: Sequence[float] | None = None) -> list[tuple[K, float]]:
    """Reciprocal rank fusion of several best-first id lists; returns (id, score) best first."""
    scores: dict[K, float] = {}
    for n, ranking in enumerate(rankings):
        w = 1.0 if weights is None else weights[n]
        for rank, key in enumerate(ranking):
            scores[key] = scores.get(key, 0.0) + w / (k + rank + 1)
    return sorted(scores.items(), key=lambda kv: (-kv[1], str(kv[0])))


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; CJK characters become bigrams so Chinese/Japanese terms match."""
    raw = [t.lower().strip("./-") for t in _TOKEN.findall(text)]
    out: list[str] = []
    cjk_run: list[str] = []
    for tok in raw + [""]:
        if len(tok) == 1 and "\u3040" <= tok <= "\ud7af":
            cjk_run.append(tok)
            continue
        if cjk_run:
            out += cjk_run if len(cjk_run) == 1 else ["".join(cjk_run[i : i + 2]) for i in range(len(cjk_run) - 1)]
            cjk_run = []
        if tok:
            out.append(tok)
    return out


def bm25_scores(docs: Sequence[Sequence[str]], query: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """BM25 score of each tokenized doc for the query terms (0.0 when nothing matches)."""
    if not docs:
        return []
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    terms = list(dict.fromkeys(query))
    out = []
    for d in docs:
        tf = Counter(d)
        score = 0.0
        for t in terms:
            if tf[t] == 0:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
        out.append(score)
    return out
