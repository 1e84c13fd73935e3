"""The embedded engine's search threads: one store, opened once per thread count, searched in turn.

    python -m benchmarks.search_threads --size 10000 --threads 1,2,8 [--optimize] [--table]

The engine reads its segments on a pool of ``search_threads`` threads (``AmemConfig``; 0 =
``amem.backends.edge.auto_search_threads``). This benchmark fills one store as
``search_bench`` does (LoCoMo turns recombined to the size, their e5 vectors plus noise),
optionally optimizes it (``--segment-mb`` sets its segment limit and ``--optimize-every`` builds
as the writes go, so a smaller store can have as many segments as a larger one), closes it and opens a copy of it for each thread count, all in this
process. Each query is then searched on every copy, the copies' order alternating from one
query to the next, with ``search_bench.time_search``: the full search and its floor (the query
embedding and the engine's own hybrid query). So every figure of a row is read against the
other rows of the same run; a loaded machine moves them together.

The engine's own default on a 2-CPU machine is a pool of eight threads: ``8`` is that
default, named.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any, Sequence

from amem import MemoryStore, load_config
from amem.backends.edge import auto_search_threads
from amem.embed import make_embedder

from ._util import write_result
from .search_bench import build_corpus, fill, floor_where, time_search


def _p50_ms(samples: Sequence[float]) -> float:
    return round(1000 * statistics.median(samples), 3)


def run(size: int, threads: Sequence[int], *, optimize: bool, table: bool, n_queries: int,
        embedder_name: str = "e5-small", segment_mb: int | None = None,
        optimize_every: int = 0) -> dict[str, Any]:
    embedder = make_embedder(embedder_name)
    texts, vecs, queries = build_corpus(embedder, size)
    qs = list(queries[:n_queries])
    with tempfile.TemporaryDirectory(prefix="amem-threads-") as tmp:
        base = Path(tmp) / "base"
        made = {"heat": True} if segment_mb is None else {"heat": True, "segment_mb": segment_mb}
        with MemoryStore(base, config=load_config(overrides=made), embedder=embedder) as store:
            # optimized every ``optimize_every`` notes, as the index build after bulk writes
            # does (``optimize_after``): the segments then pile up to the segment limit
            step = optimize_every or size
            for start in range(0, size, step):
                fill(store, texts[start:start + step], vecs[start:start + step], "bench",
                     first=start)
                if optimize_every:
                    store.optimize()
            if optimize:
                store.optimize()
            segments = store.index.backend.shard.info().segments_count
        stores: dict[int, MemoryStore] = {}
        try:
            for n in threads:
                copy = Path(tmp) / f"t{n}"
                shutil.copytree(base, copy)
                config = load_config(overrides={"heat": True, "search_threads": n})
                stores[n] = MemoryStore(copy, config=config, embedder=embedder)
                if table:
                    stores[n].keep_ranking_fields(wait=600)
            where = floor_where(next(iter(stores.values())), "bench")
            for q in qs[:5]:  # warm-up: the model, each copy's pages
                for store in stores.values():
                    store.search(q, limit=5, agent_id="bench")
            times: dict[int, list[tuple[float, float, float]]] = {n: [] for n in threads}
            for i, q in enumerate(qs):
                order = list(threads) if i % 2 == 0 else list(reversed(threads))
                for n in order:
                    times[n].append(time_search(stores[n], q, "bench", where,
                                                floor_first=(i // 2) % 2 == 1))
        finally:
            for store in stores.values():
                store.close()
    rows: dict[str, Any] = {}
    first = None
    for n in threads:
        full, embed, engine = (_p50_ms([t[k] for t in times[n]]) for k in range(3))
        first = first or full
        rows[str(n)] = {"full_p50_ms": full, "engine_p50_ms": engine, "embed_p50_ms": embed,
                        "full_over_engine_plus_embed": round(full / (engine + embed), 2),
                        "full_over_first_row": round(full / first, 3)}
    return {"size": size, "optimized": optimize, "segments": segments, "table": table,
            "queries": len(qs),
            "auto_search_threads": auto_search_threads(), "threads": rows}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.search_threads", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=10000)
    p.add_argument("--threads", default="1,2,8", help="thread counts, comma-separated")
    p.add_argument("--optimize", action="store_true", help="optimize() the store first")
    p.add_argument("--table", action="store_true", help="keep the ranking table (a server)")
    p.add_argument("--segment-mb", type=int, default=None,
                   help="the store's segment limit (default: the setting's), e.g. 10 to give "
                        "100k notes as many segments as 1M notes have by default")
    p.add_argument("--optimize-every", type=int, default=0,
                   help="optimize() after every N notes written (0: once, with --optimize)")
    p.add_argument("--queries", type=int, default=150)
    p.add_argument("--embedder", default="e5-small")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    if not threads or min(threads) < 1:
        p.error("--threads takes counts >= 1")
    result = run(args.size, threads, optimize=args.optimize, table=args.table,
                 n_queries=args.queries, embedder_name=args.embedder,
                 segment_mb=args.segment_mb, optimize_every=args.optimize_every)
    print(write_result(result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
