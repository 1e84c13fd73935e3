"""Full search against its floor on a saved store, in wall and CPU time, for an A/B of two trees.

    python -m benchmarks.readpath_cpu --store /tmp/s10k --size 10000 --build --cache <dir>
    PYTHONPATH=<tree> python benchmarks/readpath_cpu.py --store /tmp/s10k --passes 2

``--build`` writes ``search_bench``'s corpus of ``--size`` notes into ``--store`` and
optimizes it (once; ``--no-optimize`` leaves the segments plain). A measuring run copies the
store (so the heat its searches write never reaches the saved one) and, per question: embeds
it once (timed), times the full ``search`` with that vector handed to it and the engine's
hybrid RRF query (the floor is engine + embed), in alternating order (whichever runs first
reads the candidates' float vectors from disk for both; ``--search-first`` keeps the old
order). ``--cold all`` drops the copy's files from the page cache before it is opened
(``fsync``, then ``POSIX_FADV_DONTNEED``: no root needed), so every page a search touches
first is a disk read, as after a reboot or on a machine that pages out unused file pages;
``--cold payload`` then reads the payload documents back, which shows what the search's own
reads of its candidates' fields cost when they come from disk; the process's major page
faults are counted. Wall medians, and the CPU time of the process
(``time.process_time``: every thread of it, none of the waits), which a loaded machine moves
far less than wall time.

Run as a script with ``PYTHONPATH=<tree>`` to measure another checkout: ``python -m`` (and
``-c``) put the current folder first on ``sys.path``, so from the branch's folder they import
the branch whatever ``PYTHONPATH`` says.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import amem
from amem import MemoryStore, load_config
from amem.backends.base import Match, Where
from amem.bm25 import query_vector
from amem.embed import make_embedder
from amem.text import tokenize
from benchmarks._util import current_rss_mb
from benchmarks.datasets import DEFAULT_LOCOMO, load_locomo


def build(store: Path, size: int, cache: Path | None, optimize: bool) -> dict[str, Any]:
    from benchmarks.embcache import CachedEmbedder
    from benchmarks.search_bench import build_corpus, fill

    embedder = CachedEmbedder(make_embedder("e5-small"), cache)
    texts, vecs, _ = build_corpus(embedder, size)
    embedder.save()
    with MemoryStore(store, config=load_config(overrides={"heat": True}),
                     embedder=embedder.inner) as s:
        fill_s = fill(s, texts, vecs, "bench")
        t = time.perf_counter()
        if optimize:
            s.optimize()
        return {"built": str(store), "notes": size, "fill_s": round(fill_s, 1),
                "optimize_s": round(time.perf_counter() - t, 1) if optimize else None}


#: what ``--cold`` leaves in the page cache: nothing, or the payload documents read back
COLD = ("off", "all", "payload")


def evict(root: Path, keep: str) -> dict[str, int]:
    """Drop every file under ``root`` from the page cache, then read back the payload storage
    when ``keep`` is ``"payload"``; the bytes dropped and read back."""
    dropped = kept = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        dropped += path.stat().st_size
    if keep == "payload":
        for path in sorted(p for p in root.rglob("payload_storage/*") if p.is_file()):
            with path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    kept += len(chunk)
    return {"dropped_bytes": dropped, "read_back_bytes": kept}


def measure(store: Path, n_queries: int, passes: int, alternate: bool = True,
            cold: str = "off", table: bool = False) -> dict[str, Any]:
    if cold not in COLD:
        raise ValueError(f"cold must be one of {COLD}, got {cold!r}")
    copy = store.with_name(store.name + ".run")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store, copy)
    cache = evict(copy, cold) if cold != "off" else {}
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    questions = [q.text for c in load_locomo(DEFAULT_LOCOMO) for q in c.queries][:n_queries]
    wall: dict[str, list[float]] = {"full": [], "own": [], "engine": [], "embed": []}
    cpu: dict[str, list[float]] = {"own": [], "engine": [], "embed": []}
    clock = time.process_time
    try:
        with MemoryStore(copy, config=load_config(overrides={"heat": True}),
                         embedder=make_embedder("e5-small")) as s:
            where = Where(must=(Match("agent_id", "bench"), Match("is_active", True)))
            embed = s.index.embed_query
            filled: dict[str, Any] = {}
            if table:  # as `amem serve` does; timed to its end, before any search
                before, t = current_rss_mb() or 0.0, time.perf_counter()
                s.keep_ranking_fields(wait=600)
                filled = {"table_fill_s": round(time.perf_counter() - t, 3),
                          "table": s.index.backend.field_table(),
                          "table_rss_mb": round((current_rss_mb() or 0.0) - before, 1)}
            for q in questions[:3]:  # warm-up: the model, the engine's pages
                s.search(q, limit=5, agent_id="bench")

            def timed(kind: str, work: Callable[[], Any]) -> Any:
                c, t = clock(), time.perf_counter()
                out = work()
                wall[kind].append(time.perf_counter() - t)
                cpu[kind].append(clock() - c)
                return out

            def own(q: str, qv: Any) -> None:
                s.index.embed_query = lambda text: qv  # type: ignore[method-assign]
                try:
                    timed("own", lambda: s.search(q, limit=5, agent_id="bench"))
                finally:
                    del s.index.embed_query

            def floor(q: str, qv: Any) -> None:
                timed("engine", lambda: s.index.backend.hybrid_rrf(
                    qv, query_vector(tokenize(q)), where, 5, prefetch=50))

            for _ in range(passes):
                for i, q in enumerate(questions):
                    qv = timed("embed", lambda: embed(q))
                    # whichever runs first reads the candidates' float vectors from disk for
                    # both: the two orders alternate, so each pays that half the time
                    for step in ((own, floor) if i % 2 == 0 or not alternate else (floor, own)):
                        step(q, qv)
                    wall["full"].append(wall["own"][-1] + wall["embed"][-1])
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults

    def ms(xs: Sequence[float]) -> float:
        return round(1000 * statistics.median(xs), 3)

    w = {k: ms(v) for k, v in wall.items()}
    c = {k: ms(v) for k, v in cpu.items()}
    full = sorted(wall["full"])
    return {
        "tree": str(Path(amem.__file__).parents[1]), "searches": len(full),
        "wall_ms": w, "full_p95_ms": round(1000 * full[int(0.95 * (len(full) - 1))], 3),
        "wall_full_over_floor": round(w["full"] / (w["engine"] + w["embed"]), 2),
        "wall_own_over_engine": round(w["own"] / w["engine"], 2),
        "cpu_ms": c,
        "cpu_full_over_floor": round((c["own"] + c["embed"]) / (c["engine"] + c["embed"]), 2),
        "cpu_own_over_engine": round(c["own"] / c["engine"], 2),
        "cold": cold, **cache, "major_faults": faults, **filled,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/readpath_cpu.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", type=Path, required=True, help="the saved store's directory")
    p.add_argument("--build", action="store_true", help="write the store first")
    p.add_argument("--size", type=int, default=10000, help="notes, with --build")
    p.add_argument("--no-optimize", action="store_true", help="with --build: no optimize()")
    p.add_argument("--cache", type=Path, help="embedding cache directory, with --build")
    p.add_argument("--queries", type=int, default=60)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--search-first", action="store_true",
                   help="always time the full search before its floor (the old order: the "
                        "floor then finds the vectors the search read in memory)")
    p.add_argument("--cold", choices=COLD, default="off",
                   help="drop the store's files from the page cache before opening it (all), "
                        "then read the payload documents back (payload)")
    p.add_argument("--table", action="store_true",
                   help="keep the ranking table (as `amem serve` does), filled before the "
                        "first search; its fill time and memory are reported")
    args = p.parse_args(argv)
    if args.build:
        if args.store.exists():
            p.error(f"{args.store} exists: --build writes a new store")
        print(json.dumps(build(args.store, args.size, args.cache, not args.no_optimize)))
    elif not args.store.is_dir():
        p.error(f"no store at {args.store}: write one with --build")
    else:
        print(json.dumps(measure(args.store, args.queries, args.passes,
                                 alternate=not args.search_first, cold=args.cold,
                                 table=args.table)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
