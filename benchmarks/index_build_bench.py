"""Search latency while the engine's index is built: on a copy (after a bulk write) or in place.

``python -m benchmarks.index_build_bench [N]`` fills two stores with N hashing-embedded notes
(no index built), then searches from a second thread for as long as a build runs:
``optimize_on_copy`` (what a bulk write starts, ``amem.index_build``) and ``optimize()``
(the nightly job: the shard is closed while a child optimises it). Prints p50/p95/max.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from amem import MemoryStore, load_config
from amem.backends.edge import EdgeBackend
from amem.embed.hashing import HashingEmbedder


def fill(path: Path, n: int) -> MemoryStore:
    store = MemoryStore(path, config=load_config(overrides={"optimize_after": 0}),
                        embedder=HashingEmbedder(dim=384))
    items = [{"text": f"note {i} about topic {i % 97} place {i % 31} thing {i % 13}"}
             for i in range(n)]
    for start in range(0, n, 2000):
        store.add_many(items[start:start + 2000], enrich=False)
    return store


def searches(store: MemoryStore, seconds: float | None, stop: threading.Event) -> list[float]:
    """Search latencies (s) until ``stop`` is set, or for ``seconds``."""
    out: list[float] = []
    began = time.perf_counter()
    i = 0
    while not stop.is_set() and (seconds is None or time.perf_counter() - began < seconds):
        t = time.perf_counter()
        store.search(f"topic {i % 97} place {i % 31}", limit=5, heat=False)
        out.append(time.perf_counter() - t)
        i += 1
    return out


def ms(values: list[float], q: float) -> float:
    return sorted(values)[int(q * (len(values) - 1))] * 1000


def run(mode: str, n: int, root: Path) -> str:
    store = fill(root / mode, n)
    try:
        before = searches(store, 3.0, threading.Event())
        stop, during = threading.Event(), []
        worker = threading.Thread(target=lambda: during.extend(searches(store, None, stop)))
        worker.start()
        started = time.perf_counter()
        backend = store.index.backend
        assert isinstance(backend, EdgeBackend)
        if mode == "copy":
            backend.optimize_on_copy()
        else:
            backend.optimize()
        build = time.perf_counter() - started
        stop.set()
        worker.join()
        after = searches(store, 3.0, threading.Event())
    finally:
        store.close()
    return (f"{mode}: N={n} build {build:.1f} s; before p50 {ms(before, .5):.1f} ms; during "
            f"{len(during)} searches p50 {ms(during, .5):.1f} p95 {ms(during, .95):.1f} max "
            f"{max(during) * 1000:.0f} ms; after p50 {ms(after, .5):.1f} ms")


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 20_000
    root = Path(tempfile.mkdtemp(prefix="amem-index-build-"))
    try:
        for mode in ("copy", "inplace"):
            sys.stdout.write(run(mode, n, root) + "\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
