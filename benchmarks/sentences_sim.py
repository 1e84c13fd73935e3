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
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from amem.embed import make_embedder

from .datasets import DEFAULT_LOCOMO, Doc, load_locomo
from .embcache import CachedEmbedder
from .fusion_sim import POOL, Replay, ids_of, zscore_ranker
from .metrics import mean, score

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
    speaker, _, body = text.partition(": ")
    upto, start, out = text[:len(text) - len(body)], 1, []
    for k, part in enumerate(SPLIT.split(body)):
        upto += (" " if k else "") + part
        end = min(len(raw.tokenize([upto])[0]) - 1, len(ids) - 1)
        if len(part.split()) >= MIN_WORDS and end > start:
            vec = hidden[start:end].mean(0)
            out.append(vec / np.linalg.norm(vec))
        start = end
    if not out:
        vec = hidden.mean(0)
        out = [vec / np.linalg.norm(vec)]
    return out


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


def table(results: dict[str, dict[str, list[dict[str, float]]]]) -> str:
    convs = sorted(g for g in next(iter(results.values())) if g.startswith("conv"))
    lines = ["| variant | dense R@10 | R@10 | MRR | multi-hop | cat 5 R@10 / MRR | "
             + " | ".join(convs) + " | half a / b |",
             "|---|---|---|---|---|---|" + "---|" * len(convs) + "---|"]
    for name, got in results.items():
        m = {g: mean(v) for g, v in got.items()}
        lines.append(
            f"| {name} | {m['dense']['R@10']:.3f} | {m['all']['R@10']:.3f} | "
            f"{m['all']['MRR']:.3f} | {m['cat1']['R@10']:.3f} | {m['cat5']['R@10']:.3f} / "
            f"{m['cat5']['MRR']:.3f} | " + " | ".join(f"{m[c]['R@10']:.3f}" for c in convs)
            + f" | {m['a']['R@10']:.3f} / {m['b']['R@10']:.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sentences_sim", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    p.add_argument("--no-late", action="store_true", help="skip the late-chunking variants")
    args = p.parse_args(argv)
    if not DEFAULT_LOCOMO.exists():
        p.error(f"LoCoMo data not found at {DEFAULT_LOCOMO} (set AMEM_BENCHDATA)")
    print(table(run(args.cache, late=not args.no_late)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
