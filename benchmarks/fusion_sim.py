"""The store's ranking replayed on cached vectors: fusion sweeps, held-out checks, heat signals.

    python -m benchmarks.fusion_sim --cache benchmarks/out/embcache fusion
    python -m benchmarks.fusion_sim --cache benchmarks/out/embcache heat

``benchmarks.retrieval`` runs the real store (minutes for CMRC); this replays its ranking in
memory in seconds so many settings can be compared: our tokeniser, BM25 with the store's k1/b
and the engine's IDF (``ln(1 + (N - n + 0.5) / (n + 0.5))``, per corpus), e5 cosines from the
embedding cache, 50 candidates per ranking, and the fusion functions of ``amem.ranking``.
Its RRF row reproduces the store's before-figures within 0.005; confirm a choice with
``benchmarks.retrieval``.

``fusion``: RRF (k 60 and 5) and z-score fusion at several BM25 weights, on LoCoMo per
conversation and on the two halves of the CMRC questions (the data has no test split: a
weight chosen on two conversations or one half is read on the rest).

``heat``: the question order of ``benchmarks.heat_bench`` with a boost
``fused * (1 + f ln(1 + count))`` on two signals: ``shown`` (every note of the top 10, what
``retrieval_count`` counts) and ``opened`` (an agent that opens the notes of its top 10 that
hold the evidence, as a ``memory_get`` of the note it used would record), and ``opened by a
similar question`` (the boost only when the question's cosine to one that opened the note is
at least 0.97: the note answered *this* question before). The last two assume an agent that
knows which note answered; a real agent also opens wrong notes.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from amem.config import AmemConfig
from amem.embed import make_embedder
from amem.kernel.fusion import rrf
from amem.ranking import unranked_score, zscore_fusion
from amem.text import tokenize

from .datasets import DEFAULT_CMRC, DEFAULT_LOCOMO, Corpus, load_cmrc, load_locomo
from .embcache import CachedEmbedder
from .heat_bench import ordered
from .metrics import dedup_order, mean, mrr, recall_at, score

POOL = 50
Ranker = Callable[["Replay", int], list[tuple[int, float]]]


class Replay:
    """One corpus as the store holds it: notes (exact duplicates merged), BM25, cosines."""

    def __init__(self, corpus: Corpus, embedder: Any, dated: bool) -> None:
        cfg = AmemConfig()
        texts: list[str] = []
        self.holds: list[list[str]] = []
        seen: dict[str, int] = {}
        for doc in corpus.docs:
            text = f"[{doc.date_label}] {doc.text}" if dated and doc.date_label else doc.text
            if text in seen:
                self.holds[seen[text]].append(doc.id)
                continue
            seen[text] = len(texts)
            texts.append(text)
            self.holds.append([doc.id])
        self.corpus = corpus
        self.doc_vecs = np.asarray(embedder.embed(texts, kind="passage"))
        self.cos = self.doc_vecs @ np.asarray(
            embedder.embed([q.text for q in corpus.queries], kind="query")).T
        tokens = [tokenize(t) for t in texts]
        avgdl = sum(map(len, tokens)) / len(tokens)
        self.postings: dict[str, dict[int, float]] = defaultdict(dict)
        df: Counter[str] = Counter()
        for i, toks in enumerate(tokens):
            norm = cfg.bm25_k1 * (1 - cfg.bm25_b + cfg.bm25_b * len(toks) / avgdl)
            for term, tf in Counter(toks).items():
                self.postings[term][i] = tf * (cfg.bm25_k1 + 1) / (tf + norm)
                df[term] += 1
        n = len(texts)
        self.idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.query_terms = [set(tokenize(q.text)) for q in corpus.queries]

    def legs(self, qi: int) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """The two candidate lists (id, score), best first, as the engine returns them."""
        bm: dict[int, float] = defaultdict(float)
        for term in self.query_terms[qi]:
            for doc, value in self.postings.get(term, {}).items():
                bm[doc] += self.idf[term] * value
        sparse = sorted(bm.items(), key=lambda kv: (-kv[1], kv[0]))[:POOL]
        cos = self.cos[:, qi]
        dense = [(int(i), float(cos[i])) for i in np.argsort(-cos, kind="stable")[:POOL]]
        return sparse, dense


def rrf_ranker(k: int) -> Ranker:
    def rank(rp: Replay, qi: int) -> list[tuple[int, float]]:
        sparse, dense = rp.legs(qi)
        return rrf([[d for d, _ in sparse], [d for d, _ in dense]], k=k)
    return rank


def zscore_ranker(sparse_weight: float) -> Ranker:
    def rank(rp: Replay, qi: int) -> list[tuple[int, float]]:
        sparse, dense = rp.legs(qi)
        candidates = [d for d, _ in sparse] + [d for d, _ in dense]
        cosines = {d: float(rp.cos[d, qi]) for d in candidates}  # the store reads them all
        return zscore_fusion(candidates, [dict(sparse), cosines],
                             [sparse_weight, 1 - sparse_weight],
                             [unranked_score([s for _, s in sparse], POOL), 0.0])
    return rank


def ids_of(rp: Replay, ranked: Sequence[tuple[int, float]], depth: int = POOL) -> list[str]:
    return dedup_order(t for d, _ in ranked[:depth] for t in rp.holds[d])


def fusion(locomo: list[Replay], cmrc: Replay) -> None:
    rankers = {"rrf k60": rrf_ranker(60), "rrf k5": rrf_ranker(5),
               **{f"zscore {w}": zscore_ranker(w) for w in (0.3, 0.35, 0.4, 0.45, 0.5)}}
    print("| method | LoCoMo cat1-4 R@10 / MRR | " + " | ".join(
        rp.corpus.name for rp in locomo) + " | CMRC hit@1 / MRR, half 1 | half 2 |")
    print("|---|---|" + "---|" * len(locomo) + "---|---|")
    for name, ranker in rankers.items():
        per: dict[str, list[dict[str, float]]] = defaultdict(list)
        for rp in locomo:
            for qi, q in enumerate(rp.corpus.queries):
                if q.category != "5":
                    s = score(ids_of(rp, ranker(rp, qi)), q.relevant)
                    per["all"].append(s)
                    per[rp.corpus.name].append(s)
        n = len(cmrc.corpus.queries)
        for qi, q in enumerate(cmrc.corpus.queries):
            per[f"half{1 + 2 * qi // n}"].append(score(ids_of(cmrc, ranker(cmrc, qi)), q.relevant))
        cells = [f"{mean(per[g])['R@10']:.3f} / {mean(per[g])['MRR']:.3f}"
                 for g in ["all"] + [rp.corpus.name for rp in locomo]]
        cells += [f"{mean(per[g])['hit@1']:.3f} / {mean(per[g])['MRR']:.3f}"
                  for g in ("half1", "half2")]
        print(f"| {name} | " + " | ".join(cells) + " |")


def heat(locomo: list[Replay], embedder: Any) -> None:
    ranker = zscore_ranker(0.4)
    print("| signal | factor | independent R@10 / MRR | related | repeated |\n|---|---|---|---|---|")
    runs = [("none", 0.0)] + [(s, f) for s in ("shown", "opened") for f in (0.002, 0.05, 0.1, 0.2)]
    for signal, factor in runs + [("opened by a similar question", 1.0)]:
        rows: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for rp in locomo:
            qvecs = np.asarray(embedder.embed([q.text for q in rp.corpus.queries], kind="query"))
            count: Counter[int] = Counter()
            opened_by: dict[int, list[int]] = defaultdict(list)  # note -> questions that opened it
            sequence = ordered(rp.corpus)
            for second in (False, True):
                for qi, related in sequence:
                    fused = ranker(rp, qi)
                    boosted = sorted(((d, s * (1 + factor * _usage(signal, count[d], [
                        float(qvecs[qi] @ qvecs[o]) for o in opened_by[d]]))) for d, s in fused),
                        key=lambda kv: -kv[1])
                    rel = rp.corpus.queries[qi].relevant
                    ids = ids_of(rp, boosted, 10)[:10]
                    group = "repeated" if second else ("related" if related else "independent")
                    rows[group].append((recall_at(ids, rel, 10), mrr(ids, rel)))
                    for d, _ in boosted[:10]:
                        if signal == "shown" or (signal != "none" and set(rp.holds[d]) & rel):
                            count[d] += 1
                            opened_by[d].append(qi)
        print(f"| {signal} | {factor} | " + " | ".join(
            f"{np.mean([r for r, _ in rows[g]]):.3f} / {np.mean([m for _, m in rows[g]]):.3f}"
            for g in ("independent", "related", "repeated")) + " |")


#: e5 puts unrelated questions of one conversation at query cosine 0.8-0.9: only a question
#: above this counts as "the same question again" for the similar-question signal
SAME_QUESTION = 0.97


def _usage(signal: str, count: int, opener_cosines: Sequence[float]) -> float:
    """The boost's usage term: ``ln(1 + count)``, or for the similar-question signal how far
    the closest question that opened the note lies above :data:`SAME_QUESTION` (0..1)."""
    if signal != "opened by a similar question":
        return math.log1p(count)
    best = max(opener_cosines, default=0.0)
    return max(0.0, best - SAME_QUESTION) / (1 - SAME_QUESTION)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fusion_sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["fusion", "heat"])
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--cmrc", type=Path, default=DEFAULT_CMRC)
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    args = parser.parse_args(argv)
    embedder = CachedEmbedder(make_embedder(args.embedder), args.cache)
    try:
        locomo = [Replay(c, embedder, dated=True) for c in load_locomo(args.locomo)]
        if args.what == "fusion":
            fusion(locomo, Replay(load_cmrc(args.cmrc)[0], embedder, dated=False))
        else:
            heat(locomo, embedder)
    finally:
        embedder.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
