"""Search latency: the full ``search`` pipeline against the raw engine and an openclaw-style baseline.

    python -m benchmarks.search_bench --sizes 1000,10000,100000 --out benchmarks/out/search.json

For each store size (notes in one agent of an embedded qdrant-edge store) it times, in the same
process and on the same queries:

* ``full``: ``MemoryStore.search`` (query embedding, BM25 + dense queries, RRF, heat, links);
* ``engine``: the engine's own hybrid RRF query (one call, dense + sparse prefetch), plus the
  query embedding measured separately (``embed``): the floor any pipeline on this engine pays;
* ``baseline``: openclaw-amem's way: rank-bm25 rebuilt over every note on every query, plus a
  dense search, fused by RRF.

Then the same after ``optimize()`` (HNSW built) when ``--optimize`` is given. Each stage is
measured twice: as a one-shot process searches (``before_optimize``, ``after_optimize``), then
as ``amem serve`` does, with the ranking table kept (``*_table``: every note's ranking fields
read into RAM before the first search, ``amem.backends._edge_table``; ``--no-table`` skips it).

Notes are real LoCoMo turns, recombined to reach the size; vectors are the e5 vectors of the
source turns plus small noise (embedding 100k notes would take an hour on this machine and
does not change what a search costs). Figures are ratios against the baselines of the run.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from amem import MemoryStore, load_config
from amem.backends.base import Where
from amem.bm25 import query_vector
from amem.notes import Note, content_hash
from amem.search.pipeline import RANK_FIELDS
from amem.kernel.fusion import rrf
from amem.text import tokenize

from ._util import current_rss_mb, write_result
from .datasets import DEFAULT_LOCOMO, load_locomo


def _pcts(samples: Sequence[float]) -> dict[str, float]:
    ms = sorted(1000 * s for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(p95, 3), "n": len(ms)}


def build_corpus(embedder: Any, size: int, seed: int = 7, data: Path = DEFAULT_LOCOMO
                 ) -> tuple[list[str], np.ndarray, list[str]]:
    corpora = load_locomo(data)
    turns = [d.text for c in corpora for d in c.docs]
    queries = [q.text for c in corpora for q in c.queries]
    base = embedder.embed(turns, kind="passage")
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    texts, rows = [], []
    for i in range(size):
        j = i % len(turns) if i < len(turns) else rng.randrange(len(turns))
        words = turns[rng.randrange(len(turns))].split() if i >= len(turns) else []
        # some turns have fewer than three words: sample what there is
        extra = "" if i < len(turns) else " " + " ".join(rng.sample(words, min(3, len(words))))
        texts.append(turns[j] + extra)
        rows.append(j)
    vecs = base[rows] + nrng.normal(0, 0.02, size=(size, base.shape[1])).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return texts, vecs.astype(np.float32), queries


def fill(store: MemoryStore, texts: Sequence[str], vecs: np.ndarray, agent: str,
         first: int = 0) -> float:
    """Write ``texts`` with their ``vecs`` as notes ``n<first>``, ``n<first + 1>``, ...; seconds."""
    t0 = time.perf_counter()
    batch = []
    stamp = "2026-01-01T00:00:00+00:00"
    for i, (text, vec) in enumerate(zip(texts, vecs), start=first):
        note = Note(id=f"n{i}", content=text, agent_id=agent, timestamp=stamp,
                    last_accessed=stamp, hash=content_hash(text))
        batch.append(store.index.make_point(note, vec))
        if len(batch) == 1000:
            store.index.write_points(batch)
            batch = []
    if batch:
        store.index.write_points(batch)
    store.flush()
    return time.perf_counter() - t0


def floor_where(store: MemoryStore, agent: str) -> Where:
    """The filter of the floor's engine query: the tenant's active notes, said as the store's
    search says them (``NoteIndex.tenant_filter`` with the store's facts, read as a search
    reads them): the tenant left out when the agent owns every note, ``is_active`` when every
    note is active, the expiry while it hides nothing, and the tenant beside another
    condition as the one live key (``amem.backends._edge_tenants``, ``amem.backends._edge_live``,
    ``base.LIVE_KEY``; on a plain segment each condition costs the engine's scan, and the
    floor is what a pipeline on this engine pays). Supersession is left to the pipeline."""
    index = store.index
    return index.read_as_tenant(agent, lambda facts: Where(
        must=tuple(index.tenant_filter(agent, facts=facts))))


def time_floor(store: MemoryStore, query: str, where: Where) -> tuple[float, float]:
    """The floor of one search, in seconds: the query embedding, then the engine's own hybrid
    RRF query (the cost a search cannot go under; full search is read against their sum)."""
    t = time.perf_counter()
    qv = store.index.embed_query(query)
    t1 = time.perf_counter()
    store.index.backend.hybrid_rrf(qv, query_vector(tokenize(query)), where, 5, prefetch=50)
    return t1 - t, time.perf_counter() - t1


def time_search(store: MemoryStore, query: str, agent: str, where: Where,
                floor_first: bool = False) -> tuple[float, float, float]:
    """One full search at limit 5 and its floor (``time_floor``), in seconds: (full, embed,
    engine). Whichever runs first reads the candidates' float vectors from disk for both (an
    optimized store keeps them there): callers alternate ``floor_first`` so each pays that
    half the time (always the search first made it 1.96x at 10k after ``optimize()``)."""
    floor = time_floor(store, query, where) if floor_first else None
    t = time.perf_counter()
    store.search(query, limit=5, agent_id=agent)
    full = time.perf_counter() - t
    return (full, *(floor or time_floor(store, query, where)))


def measure(store: MemoryStore, texts: Sequence[str], queries: Sequence[str], agent: str,
            n_queries: int, n_baseline: int) -> dict[str, Any]:
    where = floor_where(store, agent)
    qs = list(queries[:n_queries])
    for q in qs[:3]:  # warm-up: model, caches
        store.search(q, limit=5, agent_id=agent)
    full, engine, embed = [], [], []
    for i, q in enumerate(qs):
        full_s, embed_s, engine_s = time_search(store, q, agent, where, floor_first=i % 2 == 1)
        full.append(full_s)
        embed.append(embed_s)
        engine.append(engine_s)
    base = []
    ids = [f"n{i}" for i in range(len(texts))]
    from rank_bm25 import BM25Okapi

    for q in qs[:n_baseline]:
        t0 = time.perf_counter()
        bm = BM25Okapi([re.findall(r"\w+", t.lower()) for t in texts])  # rebuilt per query
        scores = bm.get_scores(re.findall(r"\w+", q.lower()))
        bm_rank = [ids[i] for i in np.argsort(-scores)[:50] if scores[i] > 0]
        qv = store.index.embed_query(q)
        dense = [h.payload["id"] for h in store.index.backend.dense_search(qv, where, 50)]
        rrf([bm_rank, dense], k=60)[:5]
        base.append(time.perf_counter() - t0)
    out = {"full": _pcts(full), "engine": _pcts(engine), "embed": _pcts(embed),
           "baseline": _pcts(base)}
    floor = out["engine"]["p50_ms"] + out["embed"]["p50_ms"]
    out["ratios"] = {
        "full_over_engine_plus_embed_p50": round(out["full"]["p50_ms"] / floor, 2),
        "baseline_over_full_p50": round(out["baseline"]["p50_ms"] / out["full"]["p50_ms"], 1),
    }
    return out


def with_table(store: MemoryStore, texts: Sequence[str], queries: Sequence[str],
               n_queries: int, n_baseline: int) -> dict[str, Any]:
    """``measure`` as ``amem serve`` searches: with the ranking table kept (filled before the
    first search; the fill's time and the memory it took reported), then dropped again."""
    rss = current_rss_mb() or 0.0
    t = time.perf_counter()
    store.keep_ranking_fields(wait=600)
    fill_s = time.perf_counter() - t
    grown = (current_rss_mb() or 0.0) - rss
    out = measure(store, texts, queries, "bench", n_queries, n_baseline)
    out["table"] = {**(store.info().rank_table or {}), "fill_wall_s": round(fill_s, 2),
                    # the resident set's change over the fill: at small sizes within the
                    # allocator's noise, so it may be negative (memory freed meanwhile)
                    "rss_change_mb": round(grown, 1)}
    store.index.backend.keep_fields(RANK_FIELDS, 0)  # the next stage measures without it
    return out


def run(quick: bool = False, sizes: Sequence[int] | None = None, optimize: bool = False,
        embedder_name: str = "e5-small", n_queries: int = 100, table: bool = True
        ) -> dict[str, Any]:
    from amem.embed import make_embedder

    sizes = sizes or ([1000] if quick else [1000, 10000, 100000])
    embedder = make_embedder(embedder_name)
    result: dict[str, Any] = {"embedder": embedder.model_id, "sizes": {}}
    config = load_config(overrides={"heat": True})
    for size in sizes:
        texts, vecs, queries = build_corpus(embedder, size)
        n_base = 20 if size <= 10000 else 5
        nq, nb = (20, 3) if quick else (n_queries, n_base)
        with MemoryStore(":memory:", config=config, embedder=embedder) as store:
            fill_s = fill(store, texts, vecs, "bench")
            row: dict[str, Any] = {"fill_s": round(fill_s, 2), "upserts_per_s": round(size / fill_s),
                                   "before_optimize": measure(store, texts, queries, "bench", nq, nb)}
            if table:
                row["before_optimize_table"] = with_table(store, texts, queries, nq, nb)
            if optimize:
                t0 = time.perf_counter()
                store.optimize()
                row["optimize_s"] = round(time.perf_counter() - t0, 1)
                row["after_optimize"] = measure(store, texts, queries, "bench", nq, nb)
                if table:
                    row["after_optimize_table"] = with_table(store, texts, queries, nq, nb)
        result["sizes"][str(size)] = row
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.search_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--optimize", action="store_true", help="also measure after optimize()")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--embedder", default="e5-small")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--no-table", action="store_true",
                   help="measure only without the ranking table (a one-shot process's search)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if not args.quick else None
    result = run(args.quick, sizes, args.optimize, args.embedder, args.queries,
                 table=not args.no_table)
    print(write_result(result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
