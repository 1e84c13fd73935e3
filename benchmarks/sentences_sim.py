"""A note's sentences as vectors of their own: dense and fused recall on LoCoMo, replayed.

    python -m benchmarks.sentences_sim --cache benchmarks/out/embcache

A LoCoMo turn often holds its fact in one sentence among greetings and reactions ("Wow,
Caroline! That's great! I just signed up for a pottery class yesterday. ..."); its one vector
averages them all. This replay scores each note by the best of its sentences instead (max-sim,
as a multi-vector index would), without touching the store: ``benchmarks.fusion_sim``'s
replay (the store's BM25, z-score fusion at 0.4, 50 candidates a leg; steps 4b-4e are not
replayed) with the dense cosines swapped. Variants:

- ``whole``: the note's own vector (the store today);
- ``sentences``: each sentence of at least three words embedded alone, as
  ``[date] Speaker: sentence`` (one encoder pass per sentence: about twice the write cost);
- ``max(whole, sentences)``: the better of the two per note;
- ``late``: the sentences pooled from the whole turn's token states (late chunking: one
  encoder pass, the vector of each sentence read off the same run; the default embedder
  only, whose ONNX graph returns token states);
- ``max(whole, late)``.

Printed per variant: dense-only R@10 and, fused, R@10 / MRR of categories 1-4, multi-hop R@10,
category 5 R@10 / MRR, R@10 per conversation and on alternate halves of the questions.

``--in-store`` runs the real store instead (``add_many`` of each conversation, enrich off, then
``search`` with every step), its backend wrapped so that the dense leg, the BM25 hits' cosines
and step 4b's exact scores of given ids come from ``whole``, ``max(whole, sentences)`` or
``sentences`` computed in numpy over the conversation's notes (:class:`SentenceLegs`); every
other call reaches the engine. Its ``whole`` row reproduces ``benchmarks.retrieval locomo``.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from amem.embed import make_embedder
from amem.embed.base import l2_normalise

from amem import MemoryStore, load_config
from amem.backends.base import HasId, Hit, Legs, SparseVector, Where
from amem.backends.edge import EdgeBackend

from .datasets import DEFAULT_LOCOMO, Doc, load_locomo
from .embcache import CachedEmbedder
from .fusion_sim import POOL, Replay, ids_of, zscore_ranker
from .metrics import mean, score
from .retrieval import turn_time

#: a sentence ends at . ! or ? before a capital, a bracket or a quote
SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[\"'])")
#: shorter sentences ("Wow!", "Thanks, Mel!") are not indexed alone
MIN_WORDS = 3


def sentences(doc: Doc) -> tuple[str, list[str]]:
    """The note's text as the store holds it and its sentences, each with the note's date
    label and speaker."""
    head = f"[{doc.date_label}] " if doc.date_label else ""
    speaker, _, body = doc.text.partition(": ")
    parts = [p for p in SPLIT.split(body) if len(p.split()) >= MIN_WORDS] or [body]
    return head + doc.text, [f"{head}{speaker}: {p}" for p in parts]


def late_vectors(raw: Any, text: str) -> list[np.ndarray]:
    """Sentence vectors pooled from one encoder run over the whole ``text`` (late chunking);
    a sentence's tokens are found by tokenising the text up to its end."""
    runtime = raw._runtime  # the default embedder's ONNX session: token states [1, seq, 384]
    ids = raw.tokenize([text])[0]
    feed = {"input_ids": np.array([ids], dtype=runtime.inputs["input_ids"]),
            "attention_mask": np.ones((1, len(ids)),
                                      dtype=runtime.inputs.get("attention_mask", np.int64))}
    hidden = runtime.session.run([runtime.output],
                                 {k: v for k, v in feed.items() if k in runtime.inputs})[0][0]
    body = text.partition(": ")[2]
    upto, start, spans = text[:len(text) - len(body)], 1, []
    for k, part in enumerate(SPLIT.split(body)):
        upto += (" " if k else "") + part
        end = min(len(raw.tokenize([upto])[0]) - 1, len(ids) - 1)
        if len(part.split()) >= MIN_WORDS and end > start:
            spans.append(hidden[start:end].mean(0))
        start = end
    return list(l2_normalise(np.stack(spans or [hidden.mean(0)])))


def best_of(owner: np.ndarray, scores: np.ndarray, notes: int) -> np.ndarray:
    """Per note, the best score of its rows (``owner[i]`` is row i's note)."""
    out = np.full((notes, scores.shape[1]), -1.0)
    for j in range(scores.shape[1]):
        np.maximum.at(out[:, j], owner, scores[:, j])
    return out


def run(cache: Path | None, late: bool) -> dict[str, dict[str, list[dict[str, float]]]]:
    raw = make_embedder("e5-small")
    embedder = CachedEmbedder(raw, cache)
    ranker = zscore_ranker(0.4)
    results: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    for corpus in load_locomo(DEFAULT_LOCOMO):
        rp = Replay(corpus, embedder, dated=True)
        docs = {d.id: d for d in corpus.docs}
        queries = embedder.embed([q.text for q in corpus.queries], kind="query")
        rows, owner, late_rows, late_owner = [], [], [], []
        for i, held in enumerate(rp.holds):
            text, parts = sentences(docs[held[0]])
            rows += parts
            owner += [i] * len(parts)
            if late:
                vecs = late_vectors(raw, text)
                late_rows += vecs
                late_owner += [i] * len(vecs)
        whole = rp.cos.copy()
        sent = best_of(np.array(owner), embedder.embed(rows, kind="passage") @ queries.T,
                       len(rp.holds))
        variants = {"whole": whole, "sentences": sent,
                    "max(whole, sentences)": np.maximum(whole, sent)}
        if late:
            lat = best_of(np.array(late_owner), np.stack(late_rows) @ queries.T, len(rp.holds))
            variants.update({"late": lat, "max(whole, late)": np.maximum(whole, lat)})
        for name, cosines in variants.items():
            rp.cos = cosines
            got = results[name]
            for qi, q in enumerate(corpus.queries):
                fused = score(ids_of(rp, ranker(rp, qi)), q.relevant)
                if q.category == "5":
                    got["cat5"].append(fused)
                    continue
                dense = [t for i in np.argsort(-cosines[:, qi], kind="stable")[:POOL]
                         for t in rp.holds[i]]
                got["dense"].append(score(dense, q.relevant))
                for group in ("all", f"cat{q.category}", corpus.name, "ab"[qi % 2]):
                    got[group].append(fused)
    embedder.save()
    return results


#: how an in-store run scores a note for a query vector: its own vector, its best sentence, or
#: the better of the two
SCORINGS = ("whole", "max(whole, sentences)", "sentences")


class SentenceLegs:
    """An engine backend whose dense scores are computed here from each note's own vector and
    its sentences' (``index``), by ``scoring``; everything else is the wrapped backend's."""

    def __init__(self, inner: Any, scoring: str) -> None:
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
        self._inner = inner
        self.scoring = scoring
        self._rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def index(self, rows: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """The scored notes: point id -> (its vector, its sentences' vectors)."""
        self._rows = rows

    def _score(self, pid: str, query: np.ndarray) -> float:
        whole, sents = self._rows[pid]
        own, best = float(whole @ query), float(np.max(sents @ query))
        return {"whole": own, "sentences": best}.get(self.scoring, max(own, best))

    def _fields(self, ids: Sequence[str], fields: Sequence[str] | None) -> dict[str, dict]:
        read = {h.id: h.payload for h in self._inner.retrieve(list(ids))}
        return {i: {k: p[k] for k in fields if k in p} if fields else p for i, p in read.items()}

    def search_legs(self, dense: np.ndarray, sparse: SparseVector | None, where: Where | None,
                    limit: int, *, fields: Sequence[str] | None = None,
                    sparse_hits: Sequence[Hit] | None = None) -> Legs:
        legs = self._inner.search_legs(dense, sparse, where, limit, fields=fields,
                                       sparse_hits=sparse_hits)
        scores = {pid: self._score(pid, dense) for pid in self._rows}
        top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        read = self._fields([pid for pid, _ in top], fields)
        return Legs(sparse=legs.sparse,
                    dense=[Hit(id=pid, score=s, payload=read[pid]) for pid, s in top],
                    sparse_cosines={h.id: scores[h.id] for h in legs.sparse if h.id in scores})

    def dense_search(self, vector: np.ndarray, where: Where | None, limit: int, *,
                     with_vectors: bool = False, exact: bool = False,
                     fields: Sequence[str] | None = None) -> list[Hit]:
        given = where.must[0] if where is not None and len(where.must) == 1 else None
        if not (exact and isinstance(given, HasId) and not with_vectors):
            return self._inner.dense_search(vector, where, limit, with_vectors=with_vectors,
                                            exact=exact, fields=fields)
        ids = [i for i in given.ids if i in self._rows]  # step 4b: the neighbours brought in
        read = self._fields(ids, fields)
        hits = [Hit(id=i, score=self._score(i, vector), payload=read[i]) for i in ids if i in read]
        return sorted(hits, key=lambda h: (-h.score, h.id))[:limit]


def in_store(cache: Path | None, scoring: str) -> dict[str, dict[str, list[dict[str, float]]]]:
    """The real store's rankings of LoCoMo (enrich off, dates in the text, turn times) with
    the dense side scored by ``scoring`` (:class:`SentenceLegs`)."""
    embedder = CachedEmbedder(make_embedder("e5-small"), cache)
    results: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    config = load_config(overrides={"heat": False, "link_expansion": False})
    backend = SentenceLegs(EdgeBackend.temporary(embedder.dim), scoring)
    with MemoryStore(config=config, embedder=embedder, backend=backend) as store:  # type: ignore[arg-type]
        for corpus in load_locomo(DEFAULT_LOCOMO):
            told: dict[str, int] = {}
            added = store.add_many(
                [{"text": sentences(d)[0], "id": d.id,
                  **({"timestamp": turn_time(d.timestamp, told)} if d.timestamp else {})}
                 for d in corpus.docs], enrich=False, agent_id=corpus.name)
            holds: dict[str, list[str]] = defaultdict(list)  # a repeated turn is one note
            for d, res in zip(corpus.docs, added):
                holds[res.id].append(d.id)
            docs = {d.id: d for d in corpus.docs}
            rows = {}
            for h in backend.iterate(Where(must=tuple(store.index.tenant_filter(corpus.name)))):
                text, parts = sentences(docs[h.payload["id"]])
                rows[h.id] = (embedder.embed([text], kind="passage")[0],
                              embedder.embed(parts, kind="passage"))
            backend.index(rows)
            for qi, q in enumerate(corpus.queries):
                found = store.search(q.text, limit=POOL, agent_id=corpus.name, expand_links=False)
                got = score([t for h in found for t in holds.get(h.id, [h.id])], q.relevant)
                groups = ["cat5"] if q.category == "5" else \
                    ["all", f"cat{q.category}", corpus.name, "ab"[qi % 2]]
                for group in groups:
                    results[scoring][group].append(got)
    embedder.save()
    return results


def table(results: dict[str, dict[str, list[dict[str, float]]]]) -> str:
    convs = sorted(g for g in next(iter(results.values())) if g.startswith("conv"))
    lines = ["| variant | dense R@10 | R@10 | MRR | multi-hop | cat 5 R@10 / MRR | "
             + " | ".join(convs) + " | half a / b |",
             "|---|---|---|---|---|---|" + "---|" * len(convs) + "---|"]
    for name, got in results.items():
        m = {g: mean(v) for g, v in got.items()}
        dense = f"{m['dense']['R@10']:.3f}" if "dense" in m else ""
        lines.append(
            f"| {name} | {dense} | {m['all']['R@10']:.3f} | "
            f"{m['all']['MRR']:.3f} | {m['cat1']['R@10']:.3f} | {m['cat5']['R@10']:.3f} / "
            f"{m['cat5']['MRR']:.3f} | " + " | ".join(f"{m[c]['R@10']:.3f}" for c in convs)
            + f" | {m['a']['R@10']:.3f} / {m['b']['R@10']:.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sentences_sim", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    p.add_argument("--no-late", action="store_true", help="skip the late-chunking variants")
    p.add_argument("--in-store", action="store_true",
                   help="run the real store's search (every step) with each scoring of the "
                        "dense side instead of the replay")
    args = p.parse_args(argv)
    if not DEFAULT_LOCOMO.exists():
        p.error(f"LoCoMo data not found at {DEFAULT_LOCOMO} (set AMEM_BENCHDATA)")
    if args.in_store:
        results: dict[str, dict[str, list[dict[str, float]]]] = {}
        for scoring in SCORINGS:
            results.update(in_store(args.cache, scoring))
        print(table(results))
    else:
        print(table(run(args.cache, late=not args.no_late)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
