"""The read path's cost in one process: what each feature adds to a search, and the index A/B.

    python -m benchmarks.readpath_bench --size 10000 --queries 60 [--optimize] --out r.json
    python -m benchmarks.readpath_bench --size 10000 --queries 60 --parts heat

One corpus (``search_bench``'s: LoCoMo turns recombined, the default embedder's vectors plus
noise), two stores filled alike, queries interleaved so that load elsewhere on the machine
hits both sides equally:

* ``ab``: the store as it is against the same store without the payload indexes issue 25
  added (``superseded_by``, ``supersedes``): full search, each leg, and the floor (the
  engine's hybrid query + the query embedding), so the gain of the indexes is measured on the
  same code, data and moment;
* ``shares``: the time inside one search spent in each feature's own step (measured by
  timing the step's function during real searches): heat and usage (the boosts and the
  retrieval-count writes), liveness (the links' visibility check), links (the expansion),
  supersede + expiry (the filter's clauses: the lapsed-successor read; their cost inside the
  engine's query is what ``ab`` shows), and the query embedding and engine legs;
* ``heat`` (``--parts heat``): two optimized stores, one searching without the retrieval-count
  writes, queries interleaved: what those writes cost the searches after them;
* ``import`` (``--parts import``): ``--size`` notes written by ``add_many`` (``--import-batch``
  items a call; the corpus's vectors stand in for the model on the notes, the default
  embedder embeds the queries) into a store on disk, which starts the background index build
  on a copy (``amem.index_build``); then searches while that build runs and after it ends:
  p50 / p95 and the floor, the store as a bulk import leaves it; the import's rate, the
  builds it ran (the import builds as it goes since issue 25's fourth round), their
  children's CPU, and the points left unindexed when the import returned;
* ``adds`` (``--parts adds``): two stores on disk, each ``--size`` notes by ``add_many`` and
  built, then ``--adds`` more written one ``add`` at a time, alternately, into a store that
  keeps its index built (``MemoryStore.keep_index_built``, as ``amem serve``) and into one
  that only counts them (a library owner's default); then searches of both, interleaved:
  what a day of single adds leaves for brute force;
* ``moves`` (``--parts moves``): two stores on disk, each ``--size`` notes by ``add_many`` and
  ``optimize()`` (as the nightly job leaves them); then a server's day of searches
  (``--day-searches``, every question of the corpus in turn, ten rounds, the retrieval counts
  written after each round as a server writes them every few minutes) moves the notes they
  return out of the index. One store counts those moves toward its builds and indexes small
  segments (as built), the other as before (moves not counted, the engine's own indexing
  threshold). Searches of both, interleaved, after the day and after the nightly
  ``optimize()``.

Figures are medians in ms; ratios against the floor of the same run.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import qdrant_edge as qe

from amem import MemoryStore, load_config
from amem.backends.base import Match, Where
from amem.backends.edge import EdgeBackend
from amem.embed import make_embedder
from amem import ranking
from amem.search import fuse, pipeline, usage

from ._util import write_result
from .embcache import CachedEmbedder
from .search_bench import build_corpus, fill, floor_where, time_floor, time_search

#: the payload indexes issue 25 added for the read path (the "old" store drops them)
NEW_INDEXES = ("superseded_by", "supersedes")


def _ms(samples: Sequence[float]) -> float:
    return round(1000 * statistics.median(samples), 3)


def _drop_indexes(store: MemoryStore) -> None:
    backend = store.index.backend
    assert isinstance(backend, EdgeBackend)
    for name in NEW_INDEXES:
        backend.shard.update(qe.UpdateOperation.delete_field_index(name))


def _interleaved(stores: dict[str, MemoryStore], floor_store: MemoryStore,
                 queries: Sequence[str], agent: str, ratios: dict[str, str]) -> dict[str, Any]:
    """Full search on each of ``stores`` and the floor on ``floor_store``, query by query (so
    load elsewhere hits all alike): medians in ms under each name, ``embed`` and ``engine``,
    and each ``ratios`` key = that store's full search over the floor."""
    where = floor_where(floor_store, agent)
    times: dict[str, list[float]] = {k: [] for k in (*stores, "embed", "engine")}
    for q in queries:
        for name, store in stores.items():
            t = time.perf_counter()
            store.search(q, limit=5, agent_id=agent)
            times[name].append(time.perf_counter() - t)
        embed_s, engine_s = time_floor(floor_store, q, where)
        times["embed"].append(embed_s)
        times["engine"].append(engine_s)
    out: dict[str, Any] = {k: _ms(v) for k, v in times.items()}
    floor = out["engine"] + out["embed"]
    for key, name in ratios.items():
        out[key] = round(out[name] / floor, 2)
    return out


def ab(new: MemoryStore, old: MemoryStore, queries: Sequence[str], agent: str
       ) -> dict[str, Any]:
    """Full search and the floor on both stores, query by query."""
    return _interleaved({"new_full": new, "old_full": old}, new, queries, agent,
                        {"new_over_floor": "new_full", "old_over_floor": "old_full"})


def heat_ab(on: MemoryStore, off: MemoryStore, queries: Sequence[str], agent: str
            ) -> dict[str, Any]:
    """Full search on two stores alike but for the retrieval-count writes (``off`` makes
    none), queries interleaved: what a search's heat writes cost the searches after it.

    ``off`` counts nothing: its searcher's write step is replaced by a no-op for the run (the
    ranking is the same, as both stores' counts start at 0 and ``heat_boost`` of a count of 0
    or 1 differs by under 0.2%).
    """
    off.searcher._bump_heat = lambda matches, now: None  # type: ignore[method-assign]
    try:
        return _interleaved({"heat_on": on, "heat_off": off}, off, queries, agent,
                            {"on_over_floor": "heat_on", "off_over_floor": "heat_off"})
    finally:
        del off.searcher._bump_heat


#: the feature whose time overlaps another's (the BM25 leg beside the query embedding)
BESIDE = "engine: BM25 leg (on a worker, beside the query embedding)"


class _Timer:
    """Wraps named functions so that the time spent inside them is summed per feature."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        #: each call's time per feature (a mean can hide a few long calls: GC, load)
        self.calls: dict[str, list[float]] = {}
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, name: str, feature: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                took = time.perf_counter() - t
                self.spent[feature] = self.spent.get(feature, 0.0) + took
                self.calls.setdefault(feature, []).append(took)

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, inner))

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()


def shares(store: MemoryStore, queries: Sequence[str], agent: str) -> dict[str, Any]:
    """Per-feature time inside searches (ms per search) and its share of the full search."""
    timer = _Timer()
    timer.wrap(pipeline.Searcher, "_bump_heat", "heat: retrieval-count writes")
    timer.wrap(ranking, "heat_boost", "heat: boost")
    timer.wrap(ranking, "usage_boost", "usage: boost")
    timer.wrap(usage, "best_cosine", "usage: boost")
    timer.wrap(pipeline, "live_ids", "liveness: links shown")
    timer.wrap(pipeline, "expand", "links: expansion")
    timer.wrap(store.searcher._lapsed, "ids", "supersede+expiry: lapsed successors")
    timer.wrap(pipeline, "history_order", "supersede: history order")
    timer.wrap(pipeline, "fill_cosines", "fusion: cosines of BM25-only candidates")
    timer.wrap(fuse, "fill_cosines", "fusion: cosines of BM25-only candidates")
    timer.wrap(store.index, "embed_query", "query embedding")
    backend = store.index.backend
    timer.wrap(backend, "search_legs", "engine: dense leg + BM25 hits' cosines (one batch)")
    # runs on a worker while the query is embedded (amem.search.beside): its time is part of
    # the embedding's wall time, so it is shown but not subtracted from the rest
    timer.wrap(backend, "sparse_search", BESIDE)
    total = 0.0
    try:
        for q in queries:
            t = time.perf_counter()
            store.search(q, limit=5, agent_id=agent)
            total += time.perf_counter() - t
    finally:
        timer.restore()
    n = len(queries)
    # the retrieve inside fill_cosines is counted with fusion, the matches' read in "rest"
    accounted = sum(v for k, v in timer.spent.items() if k != BESIDE)
    rows = {k: {"ms": round(1000 * v / n, 3), "share": round(v / total, 3),
                "call_p50_ms": _ms(timer.calls[k]), "calls": len(timer.calls[k])}
            for k, v in sorted(timer.spent.items(), key=lambda kv: -kv[1])}
    rows["rest (filters, fusion, results, the matches' read)"] = {
        "ms": round(1000 * (total - accounted) / n, 3),
        "share": round((total - accounted) / total, 3)}
    return {"full_ms_mean": round(1000 * total / n, 3), "steps": rows}


class CorpusVectors:
    """The default embedder for queries; for notes, the corpus's vectors (embedding 100k notes
    would take an hour here and does not change what a search costs). A note text not in the
    corpus is embedded by the model (counted in ``misses``)."""

    def __init__(self, inner: Any, texts: Sequence[str], vecs: np.ndarray) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        if hasattr(inner, "cosine_baseline"):
            self.cosine_baseline = inner.cosine_baseline
        self._by_text = dict(zip(texts, vecs))
        self.misses = 0

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        if kind == "query":
            return np.asarray(self.inner.embed(list(texts), kind=kind), dtype=np.float32)
        rows = []
        for text in texts:
            vec = self._by_text.get(text)
            if vec is None:
                self.misses += 1
                vec = np.asarray(self.inner.embed([text], kind=kind)[0], dtype=np.float32)
            rows.append(vec)
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)


def _majflt() -> int:
    """Major page faults of this process so far (pages read from disk, not the page cache)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt


def _timed_searches(store: MemoryStore, queries: Sequence[str], agent: str,
                    keep_going: Callable[[int], bool]) -> dict[str, Any]:
    """Full searches and the floor (engine hybrid query, query embedding), query by query,
    while ``keep_going(i)``; p50 / p95 in ms, full / floor, and the major page faults taken
    (a shard whose pages are not in the page cache shows there)."""
    where = floor_where(store, agent)
    full: list[float] = []
    engine: list[float] = []
    embed: list[float] = []
    faults = _majflt()
    i = 0
    while keep_going(i):
        full_s, embed_s, engine_s = time_search(store, queries[i % len(queries)], agent, where,
                                                floor_first=i % 2 == 1)
        full.append(full_s)
        embed.append(embed_s)
        engine.append(engine_s)
        i += 1
    if not full:
        return {"searches": 0}
    return {"searches": len(full), **_summary(full, embed, engine),
            "major_faults": _majflt() - faults}


def _summary(full: Sequence[float], embed: Sequence[float], engine: Sequence[float]
             ) -> dict[str, Any]:
    """p50 / p95 in ms of full searches and their floors (seconds), and full / floor."""
    out: dict[str, Any] = {"full_p50": _ms(full), "full_p95": _p95(full),
                           "engine_p50": _ms(engine), "engine_p95": _p95(engine),
                           "embed_p50": _ms(embed)}
    out["full_over_floor"] = round(out["full_p50"] / (out["engine_p50"] + out["embed_p50"]), 2)
    return out


def _children_cpu() -> float:
    """User + system CPU seconds of this process's ended children (the build's)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _p95(samples: Sequence[float]) -> float:
    ms = sorted(samples)
    return round(1000 * ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))], 3)


def import_then_search(embedder: Any, texts: Sequence[str], vecs: np.ndarray,
                       queries: Sequence[str], *, batch: int, after_queries: int
                       ) -> dict[str, Any]:
    """Bulk-write the corpus with ``add_many`` (the background index build starts as it
    would in a long-lived server), then search while the build runs and after it ends."""
    corpus = CorpusVectors(embedder, texts, vecs)
    config = load_config(overrides={"heat": True})
    items = [{"text": t} for t in texts]
    out: dict[str, Any] = {"notes": len(texts), "import_batch": batch,
                           "optimize_after": config.optimize_after}
    with tempfile.TemporaryDirectory(prefix="amem-rp-import-") as tmp:
        with MemoryStore(Path(tmp) / "store", config=config, embedder=corpus) as store:
            t0 = time.perf_counter()
            cpu0 = _children_cpu()
            for start in range(0, len(items), batch):
                store.add_many(items[start:start + batch], enrich=False, agent_id="bench")
            took = time.perf_counter() - t0
            out["import_s"] = round(took, 1)
            out["import_notes_per_s"] = round(len(items) / took) if took > 0 else None
            out["stored"] = store.index.backend.count(Where(must=(Match("agent_id", "bench"),)))
            out["vector_misses"] = corpus.misses
            build = store.index.build
            out["build_running_at_end"] = build.state == "running"
            # what the searches right after the import brute-force: the points written since
            # the last build started (all of them when the import builds only at its end)
            out["unindexed_at_end"] = build.unindexed
            out["builds_during_import"] = getattr(build, "runs", None)
            # how long the import waited for builds to keep up (amem.index_build.BACKLOG)
            out["import_waited_s"] = round(getattr(build, "waited_s", 0.0), 1)
            t1 = time.perf_counter()
            out["during_build"] = _timed_searches(
                store, queries, "bench", lambda i: build.state == "running")
            build.wait()
            out["build_s_after_import"] = round(time.perf_counter() - t1, 1)
            out["import_and_builds_s"] = round(time.perf_counter() - t0, 1)
            # the build children's CPU (the optimiser and the catch-up), import and after
            out["build_children_cpu_s"] = round(_children_cpu() - cpu0, 1)
            out["builds"] = getattr(build, "runs", None)
            out["build"] = build.to_dict()
            out["after_build"] = _timed_searches(store, queries, "bench",
                                                 lambda i: i < after_queries)
            # the same questions again: what the first pass paid for pages and fields not yet
            # read since the swap shows as the difference
            out["after_build_again"] = _timed_searches(store, queries, "bench",
                                                       lambda i: i < after_queries)
    return out


def _interleaved_searches(stores: dict[str, MemoryStore], queries: Sequence[str]
                          ) -> dict[str, dict[str, Any]]:
    """Each query on every store, the order alternating, the floor first every other pair."""
    names = list(stores)
    timed: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
    where = floor_where(stores[names[0]], "bench")
    for i, q in enumerate(queries):
        for name in names if i % 2 == 0 else names[::-1]:
            timed[name].append(time_search(stores[name], q, "bench", where,
                                           floor_first=(i // 2) % 2 == 1))
    return {name: _summary(*zip(*timed[name])) for name in names}


def single_adds_then_search(embedder: Any, texts: Sequence[str], vecs: np.ndarray,
                            queries: Sequence[str], *, size: int,
                            optimize_after: int | None = None,
                            embed_adds: bool = False) -> dict[str, Any]:
    """``texts[:size]`` by ``add_many`` (built), the rest by single adds, into two stores:
    one built as the adds pile up (``keep_index_built``), one only counting them.
    ``embed_adds``: the model embeds each single add (the pace of a real one, which the
    builds beside it share the CPU with), not the corpus."""
    corpus = CorpusVectors(embedder, texts[:size] if embed_adds else texts,
                           vecs[:size] if embed_adds else vecs)
    overrides: dict[str, Any] = {"heat": True}
    if optimize_after is not None:
        overrides["optimize_after"] = optimize_after
    config = load_config(overrides=overrides)
    names = ("kept built", "counted only")
    out: dict[str, Any] = {"notes_bulk": size, "single_adds": len(texts) - size,
                           "optimize_after": config.optimize_after, "adds_embedded": embed_adds}
    with tempfile.TemporaryDirectory(prefix="amem-rp-adds-") as tmp:
        stores = {name: MemoryStore(Path(tmp) / str(i), config=config, embedder=corpus)
                  for i, name in enumerate(names)}
        try:
            for store in stores.values():
                store.add_many([{"text": t} for t in texts[:size]], enrich=False,
                               agent_id="bench")
                store.index.build.wait()
            stores["kept built"].keep_index_built()
            took = dict.fromkeys(names, 0.0)
            for text in texts[size:]:
                for name, store in stores.items():
                    t0 = time.perf_counter()
                    store.add(text, enrich=False, agent_id="bench")
                    took[name] += time.perf_counter() - t0
            for name, store in stores.items():
                build = store.index.build
                out[name] = {"adds_s": round(took[name], 1),
                             "build_running_after_adds": build.state == "running"}
                build.wait()
                out[name].update(builds=build.runs, unindexed=build.unindexed,
                                 points_moved=build.points_moved)
            for q in queries[:3]:  # warm-up: pages of the swapped-in shard
                for store in stores.values():
                    store.search(q, limit=5, agent_id="bench")
            per = _interleaved_searches(stores, queries)
            for name in names:
                out[name]["search"] = per[name]
            out["kept_over_counted_adds_s"] = round(
                took["kept built"] / took["counted only"], 3) if took["counted only"] else None
            out["counted_over_kept_full_p50"] = round(
                per["counted only"]["full_p50"] / per["kept built"]["full_p50"], 2)
        finally:
            for store in stores.values():
                store.close()
    return out


def _engine_state(store: MemoryStore) -> dict[str, Any]:
    """The engine's segments and indexed vectors, and what the builder counts unindexed."""
    backend = store.index.backend
    assert isinstance(backend, EdgeBackend)  # the embedded engine's own counts
    info = backend.shard.info()
    build = store.index.build
    return {"segments": info.segments_count, "points": info.points_count,
            "indexed_vectors": info.indexed_vectors_count, "builds": build.runs,
            "points_since": build.points_since, "points_moved": build.points_moved}


def moves_then_search(embedder: Any, texts: Sequence[str], vecs: np.ndarray,
                      queries: Sequence[str], *, day_searches: int, limit: int = 10,
                      rounds: int = 10, optimize_after: int | None = None,
                      day_queries: Sequence[str] | None = None) -> dict[str, Any]:
    """A server's day of searches on two built stores: one counting the notes their
    retrieval counts move out of the index toward its builds (``keep_index_built``, the
    indexing threshold ``INDEXING_KB``), one as before (not kept built: only adds built it
    before; the engine's own threshold). The day asks ``day_queries`` in turn (``queries``
    when None). Then ``queries`` on both, and again after ``optimize()``."""
    day_queries = list(day_queries or queries)
    corpus = CorpusVectors(embedder, texts, vecs)
    overrides: dict[str, Any] = {"heat": True}
    if optimize_after is not None:
        overrides["optimize_after"] = optimize_after
    config = load_config(overrides=overrides)
    names = ("moves counted", "as before")
    out: dict[str, Any] = {"notes": len(texts), "day_searches": day_searches, "limit": limit,
                           "rounds": rounds, "optimize_after": config.optimize_after}
    with tempfile.TemporaryDirectory(prefix="amem-rp-moves-") as tmp:
        stores = {
            "moves counted": MemoryStore(Path(tmp) / "0", config=config, embedder=corpus),
            "as before": MemoryStore(config=config, embedder=corpus, backend=EdgeBackend(
                Path(tmp) / "1", corpus.dim, indexing_kb=None)),
        }
        try:
            for store in stores.values():
                store.add_many([{"text": t} for t in texts], enrich=False, agent_id="bench")
                store.index.build.wait()
                store.optimize()  # as the nightly job leaves it: every point indexed
            out["built"] = {name: _engine_state(store) for name, store in stores.items()}
            out["built_search"] = _interleaved_searches(stores, queries)
            stores["moves counted"].keep_index_built()
            per_round = max(1, day_searches // rounds)
            took = dict.fromkeys(names, 0.0)
            asked = 0
            for _ in range(rounds):
                for name, store in stores.items():
                    t0 = time.perf_counter()
                    for j in range(per_round):
                        store.search(day_queries[(asked + j) % len(day_queries)],
                                     limit=limit, agent_id="bench")
                    store.flush()  # the retrieval counts, as a server writes them (MAX_AGE_S)
                    took[name] += time.perf_counter() - t0
                asked += per_round
            for store in stores.values():  # the next search finds the last round's build due
                store.search(day_queries[asked % len(day_queries)], limit=limit,
                             agent_id="bench")
                store.index.build.wait()
            out["day_s"] = {name: round(took[name], 1) for name in names}
            out["day_distinct_questions"] = len(set(day_queries[:asked + 1]))
            out["after_day"] = {name: _engine_state(store) for name, store in stores.items()}
            out["after_day_search"] = _interleaved_searches(stores, queries)
            out["optimize_s"] = {}
            for name, store in stores.items():  # the nightly job
                t0 = time.perf_counter()
                store.optimize()
                out["optimize_s"][name] = round(time.perf_counter() - t0, 2)
            out["after_optimize"] = {name: _engine_state(store) for name, store in stores.items()}
            out["after_optimize_search"] = _interleaved_searches(stores, queries)
        finally:
            for store in stores.values():
                store.close()
    return out


def run(size: int, n_queries: int, optimize: bool, cache: Path | None, *,
        parts: Sequence[str] = ("ab", "shares"), import_batch: int = 0,
        adds: int = 0, embed_adds: bool = False, day_searches: int = 3000,
        optimize_after: int | None = None) -> dict[str, Any]:
    embedder = CachedEmbedder(make_embedder("e5-small"), cache)
    adds = (adds or size // 2) if "adds" in parts else 0
    texts, vecs, queries = build_corpus(embedder, size + adds)
    embedder.save()
    if adds:  # the bulk part is the corpus every other part reads; the adds come after it
        all_texts, all_vecs = texts, vecs
        texts, vecs = texts[:size], vecs[:size]
    config = load_config(overrides={"heat": True})
    qs = list(queries[:n_queries])
    result: dict[str, Any] = {"size": size, "queries": len(qs), "embedder": embedder.model_id}
    if "ab" in parts or "shares" in parts:
        with MemoryStore(":memory:", config=config, embedder=embedder.inner) as new, \
                MemoryStore(":memory:", config=config, embedder=embedder.inner) as old:
            fill(new, texts, vecs, "bench")
            fill(old, texts, vecs, "bench")
            _drop_indexes(old)
            for q in qs[:3]:  # warm-up: model, caches
                new.search(q, limit=5, agent_id="bench")
                old.search(q, limit=5, agent_id="bench")
            result["before_optimize"] = {"ab": ab(new, old, qs, "bench"),
                                         "shares": shares(new, qs, "bench")}
            if optimize:
                new.optimize()
                old.optimize()
                result["after_optimize"] = {"ab": ab(new, old, qs, "bench"),
                                            "shares": shares(new, qs, "bench")}
    if "heat" in parts:  # two optimized stores with the indexes, one without the heat writes
        with MemoryStore(":memory:", config=config, embedder=embedder.inner) as on, \
                MemoryStore(":memory:", config=config, embedder=embedder.inner) as off:
            fill(on, texts, vecs, "bench")
            fill(off, texts, vecs, "bench")
            on.optimize()
            off.optimize()
            for q in qs[:3]:
                on.search(q, limit=5, agent_id="bench")
                off.search(q, limit=5, agent_id="bench")
            result["heat_after_optimize"] = heat_ab(on, off, qs, "bench")
    if "import" in parts:
        result["import"] = import_then_search(embedder.inner, texts, vecs, qs,
                                              batch=import_batch or size,
                                              after_queries=len(qs))
    if adds:
        result["adds"] = single_adds_then_search(embedder.inner, all_texts, all_vecs, qs,
                                                 size=size, embed_adds=embed_adds)
    if "moves" in parts:
        result["moves"] = moves_then_search(embedder.inner, texts, vecs, qs,
                                            day_searches=day_searches, day_queries=queries,
                                            optimize_after=optimize_after)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.readpath_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=10000)
    p.add_argument("--queries", type=int, default=60)
    p.add_argument("--optimize", action="store_true", help="also measure after optimize()")
    p.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    p.add_argument("--parts", default="ab,shares",
                   help="comma-separated: ab, shares, heat (the heat writes' cost after "
                        "optimize(): two optimized stores, one without the writes), import "
                        "(searches while and after the index build a bulk import starts), "
                        "adds (single adds into a store kept built and one only counting), "
                        "moves (a day of searches' retrieval counts, counted toward builds "
                        "or not)")
    p.add_argument("--import-batch", type=int, default=0,
                   help="items per add_many call for --parts import (default: all at once)")
    p.add_argument("--adds", type=int, default=0,
                   help="single adds after the bulk part for --parts adds (default: size / 2)")
    p.add_argument("--embed-adds", action="store_true",
                   help="with --parts adds: the model embeds each single add (a real add's pace)")
    p.add_argument("--day-searches", type=int, default=3000,
                   help="with --parts moves: the day's searches (limit 10, in ten rounds)")
    p.add_argument("--optimize-after", type=int, default=None,
                   help="with --parts moves: the stores' optimize_after (default: the setting's)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    result = run(args.size, args.queries, args.optimize, args.cache,
                 parts=[x.strip() for x in args.parts.split(",") if x.strip()],
                 import_batch=args.import_batch, adds=args.adds, embed_adds=args.embed_adds,
                 day_searches=args.day_searches, optimize_after=args.optimize_after)
    print(write_result(result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
