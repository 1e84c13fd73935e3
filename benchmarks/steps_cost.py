"""What the ranking steps 1b (common words, centroid), 4b (neighbour lift), 4c (MMR), 4d (time)
and 5b (replies) add to a search.

    python -m benchmarks.steps_cost --size 10000 --corpus conv-30 --cache benchmarks/out/embcache

One crowded store (``benchmarks.crowd``: a LoCoMo conversation among the others' renamed turns,
each turn at its session's time plus one second per earlier turn), the conversation's
questions searched at limit 10 with heat on, under seven settings interleaved query by query
(so load elsewhere on the machine hits all alike): every step (the default), without the
query moved off what the notes share (1b: common words and centroid), without the lift (4b),
without MMR (4c), without questions stepping back (4e), without the steps of issue 29's third
round (4d time lift, 4e, 5b replies first), without 4b and 4c.
Prints the median and p95 per setting and the ratio of medians to "neither".
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Sequence

from amem import MemoryStore, load_config
from amem.embed import make_embedder

from .crowd import crowd
from .datasets import DEFAULT_LOCOMO, load_locomo
from .embcache import CachedEmbedder
from .retrieval import turn_time


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.steps_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=10000, help="notes in the crowded store")
    p.add_argument("--corpus", default="conv-30", help="the LoCoMo conversation searched")
    p.add_argument("--queries", type=int, default=120)
    p.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    args = p.parse_args(argv)
    corpora = load_locomo(DEFAULT_LOCOMO)
    target = next((c for c in corpora if c.name == args.corpus), None)
    if target is None:
        p.error(f"no LoCoMo conversation named {args.corpus!r}")
    corpus = crowd(target, corpora, args.size)
    embedder = CachedEmbedder(make_embedder("e5-small"), args.cache)
    config = load_config(overrides={"heat": True})
    variants = {"both": config, "no 1b": config.replace(centering=0.0, common_words=0.0),
                "no lift": config.replace(neighbour_weight=0.0),
                "no mmr": config.replace(mmr_lambda=1.0),
                "no 4e": config.replace(question_penalty=0.0),
                "no 4d, 4e, 5b": config.replace(time_lift=0.0, question_share=0.0),
                "neither": config.replace(neighbour_weight=0.0, mmr_lambda=1.0)}
    with MemoryStore(":memory:", config=config, embedder=embedder) as store:
        told: dict[str, int] = {}
        store.add_many([{"text": f"[{d.date_label}] {d.text}", "id": d.id,
                         **({"timestamp": turn_time(d.timestamp, told)} if d.timestamp else {})}
                        for d in corpus.docs], enrich=False, agent_id=corpus.name)
        embedder.save()
        queries = [q.text for q in corpus.queries][:args.queries]
        for q in queries[:5]:  # warm-up: the model's first runs, the engine's caches
            store.search(q, limit=10, agent_id=corpus.name)
        times: dict[str, list[float]] = {k: [] for k in variants}
        for q in queries:
            for name, settings in variants.items():
                store.searcher._config = settings  # the same store and data for all seven
                t = time.perf_counter()
                store.search(q, limit=10, agent_id=corpus.name)
                times[name].append(time.perf_counter() - t)
        store.searcher._config = config
    floor = statistics.median(times["neither"])
    print(f"| setting | p50 ms | p95 ms | p50 / neither |  ({args.corpus}, {args.size} notes)")
    print("|---|---|---|---|")
    for name, samples in times.items():
        mid = statistics.median(samples)
        p95 = sorted(samples)[int(0.95 * (len(samples) - 1))]
        print(f"| {name} | {1000 * mid:.1f} | {1000 * p95:.1f} | {mid / floor:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
