"""The store's ranking replayed on cached vectors: fusion sweeps, held-out checks, heat signals.

    python -m benchmarks.fusion_sim --cache benchmarks/out/embcache fusion
    python -m benchmarks.fusion_sim --cache benchmarks/out/embcache heat
    python -m benchmarks.fusion_sim --cache benchmarks/out/embcache title

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

``title``: CMRC with each sentence's article title (``benchmarks.retrieval --source-title``)
reaching BM25 only, the embedded text only, or both, which the store cannot show apart (a
keyword or tag reaches both): what each side of the ranking gains from the source's subject.
Plus a tie-break among the top 10 that reads which question terms a note covers beyond those
every candidate of its source shares, with and without the title.
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
from amem.bm25 import note_terms
from amem.kernel.fusion import rrf
from amem.notes import compose_embed_text
from amem.ranking import unranked_score, zscore_fusion
from amem.text import tokenize

from .datasets import DEFAULT_CMRC, DEFAULT_LOCOMO, Corpus, load_cmrc, load_locomo
from .embcache import CachedEmbedder
from .heat_bench import ordered
from .metrics import dedup_order, mean, mrr, recall_at, score

POOL = 50
Ranker = Callable[["Replay", int], list[tuple[int, float]]]


#: where a replay puts each note's source title (``Doc.source``): nowhere, BM25 only (its terms
#: the note lacks, once, as ``note_terms`` adds a keyword), the embedded text only (the
#: "Keywords: ..." line of ``compose_embed_text``), or both, as a note given the title as a
#: keyword (``keyword``) or a tag (``tag``) holds it in the store
TITLE_PLACES = ("none", "bm25", "dense", "keyword", "tag")


class Replay:
    """One corpus as the store holds it: notes (exact duplicates merged), BM25, cosines."""

    def __init__(self, corpus: Corpus, embedder: Any, dated: bool, title: str = "none") -> None:
        if title not in TITLE_PLACES:
            raise ValueError(f"title must be one of {', '.join(TITLE_PLACES)}, got {title!r}")
        cfg = AmemConfig()
        texts: list[str] = []
        self.holds: list[list[str]] = []
        #: the source title of each note (of its first document: the store dedups by content)
        self.sources: list[str | None] = []
        seen: dict[str, int] = {}
        for doc in corpus.docs:
            text = f"[{doc.date_label}] {doc.text}" if dated and doc.date_label else doc.text
            if text in seen:
                self.holds[seen[text]].append(doc.id)
                continue
            seen[text] = len(texts)
            texts.append(text)
            self.holds.append([doc.id])
            self.sources.append(doc.source)
        self.corpus = corpus
        given = [[s] if s and title != "none" else [] for s in self.sources]
        label = {"tag": "tags"}.get(title, "keywords")
        embedded = [compose_embed_text(t, g if label == "keywords" else [],
                                       g if label == "tags" else [], "")
                    if title in ("dense", "keyword", "tag") else t for t, g in zip(texts, given)]
        self.doc_vecs = np.asarray(embedder.embed(embedded, kind="passage"))
        self.cos = self.doc_vecs @ np.asarray(
            embedder.embed([q.text for q in corpus.queries], kind="query")).T
        tokens = [note_terms(t, g, []) if title in ("bm25", "keyword", "tag") else tokenize(t)
                  for t, g in zip(texts, given)]
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


def coverage_ranker(sparse_weight: float, lift: float, head: int = 10) -> Ranker:
    """Z-score fusion, then a tie-break among the first ``head`` notes: each note's logit is
    raised by ``lift`` times the z score (over the head) of the IDF of the question terms it
    holds beyond those every head note of its source holds. The subject all sentences of one
    article share then stops deciding between them; the other terms the question asks do."""
    base = zscore_ranker(sparse_weight)

    def rank(rp: Replay, qi: int) -> list[tuple[int, float]]:
        fused = base(rp, qi)
        top = fused[:head]
        held = {d: {t for t in rp.query_terms[qi] if d in rp.postings.get(t, {})} for d, _ in top}
        by_source: dict[str | None, list[int]] = defaultdict(list)
        for d, _ in top:
            by_source[rp.sources[d]].append(d)
        cover: dict[int, float] = {}
        for source, notes in by_source.items():
            shared = (set.intersection(*(held[d] for d in notes))
                      if source is not None and len(notes) > 1 else set())
            for d in notes:
                cover[d] = sum(rp.idf[t] for t in held[d] - shared)
        values = list(cover.values())
        mu = sum(values) / len(values) if values else 0.0
        sd = math.sqrt(sum((v - mu) ** 2 for v in values) / len(values)) if values else 0.0
        lifted = [(d, math.log(s / (1 - s)) + (lift * (cover[d] - mu) / sd if sd > 1e-12 else 0.0))
                  for d, s in top if 0.0 < s < 1.0]
        lifted += [(d, s) for d, s in top if not 0.0 < s < 1.0]  # saturated: keeps its place
        return sorted(lifted, key=lambda kv: -kv[1]) + fused[head:]
    return rank


def title(corpus: Corpus, embedder: Any) -> None:
    """CMRC hit@1 / MRR with the title in each place, on the halves by question (a, b) and by
    article (first, second), and the coverage tie-break with and without the title."""
    print("| title reaches | ranking | hit@1 | MRR | hit@10 | first | second | a | b |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows: list[tuple[str, str, Ranker]] = [(place, "zscore 0.4", zscore_ranker(0.4))
                                           for place in TITLE_PLACES]
    rows += [(place, f"+ coverage tie-break {lift}", coverage_ranker(0.4, lift))
             for place in ("none", "keyword") for lift in (0.2, 0.5)]
    replays: dict[str, Replay] = {}
    for place, name, ranker in rows:
        rp = replays.setdefault(place, Replay(corpus, embedder, dated=False, title=place))
        parts = [q.part for q in corpus.queries if q.part is not None]
        middle = (max(parts) + 1) / 2 if parts else 0.0
        per: dict[str, list[dict[str, float]]] = defaultdict(list)
        for qi, q in enumerate(corpus.queries):
            s = score(ids_of(rp, ranker(rp, qi)), q.relevant)
            per["all"].append(s)
            per["ab"[qi % 2]].append(s)
            if q.part is not None:
                per["first" if q.part < middle else "second"].append(s)
        m = {g: mean(v) for g, v in per.items()}
        print(f"| {place} | {name} | {m['all']['hit@1']:.3f} | {m['all']['MRR']:.3f} | "
              f"{m['all']['hit@10']:.3f} | " + " | ".join(
                  f"{m.get(g, {}).get('hit@1', 0.0):.3f}" for g in ("first", "second", "a", "b"))
              + " |")


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
    parser.add_argument("what", choices=["fusion", "heat", "title"])
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--cmrc", type=Path, default=DEFAULT_CMRC)
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    args = parser.parse_args(argv)
    embedder = CachedEmbedder(make_embedder(args.embedder), args.cache)
    try:
        if args.what == "title":
            title(load_cmrc(args.cmrc)[0], embedder)
            return 0
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
