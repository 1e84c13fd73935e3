"""Single ``add``s from one thread before, during and after an index build on a copy.

    python -m benchmarks.build_writes_bench [--size 20000] [--pace 0.025]

Fills an edge store with ``--size`` hashing-embedded notes (no index built; ``index_build_bench``'s
fill), then one thread adds notes for 4 s, keeps adding while ``optimize_on_copy`` builds the
index, and adds for 4 s after it. ``--pace`` sleeps between adds (0: flat out). Prints the
rates per second and the ratio during / before (issue 25's aim: >= 0.8).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path

from amem import MemoryStore
from amem.backends.edge import EdgeBackend

from .index_build_bench import fill


def _adds(store: MemoryStore, tag: str, pace: float, *, seconds: float | None = None,
          stop: threading.Event | None = None) -> list[float]:
    """Add notes until ``seconds`` pass or ``stop`` is set; the time of each add."""
    stamps: list[float] = []
    start = time.perf_counter()
    i = 0
    while (time.perf_counter() - start < seconds) if seconds is not None else not (
            stop is not None and stop.is_set()):
        store.add(f"{tag} write {i} about topic {i % 97} in place {i % 31}", enrich=False)
        i += 1
        if pace:
            time.sleep(pace)
        stamps.append(time.perf_counter() - start)
    return stamps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=20000)
    ap.add_argument("--pace", type=float, default=0.025, help="seconds between adds (0: flat out)")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="amem-build-writes-"))
    store = fill(root / "store", args.size)
    try:
        backend = store.index.backend
        assert isinstance(backend, EdgeBackend)
        before = _adds(store, "before", args.pace, seconds=4.0)
        stop, during = threading.Event(), []  # type: threading.Event, list[float]
        writer = threading.Thread(target=lambda: during.extend(
            _adds(store, "during", args.pace, stop=stop)))
        started = time.perf_counter()
        writer.start()
        outcome = backend.optimize_on_copy()
        build = time.perf_counter() - started
        stop.set()
        writer.join()
        after = _adds(store, "after", args.pace, seconds=4.0)
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    normal, busy = len(before) / 4.0, len(during) / build
    per_second = [sum(1 for t in during if k <= t < k + 1) for k in range(int(build))]
    print(f"size {args.size}, pace {args.pace} s: build {build:.1f} s ({outcome})")
    print(f"adds/s before {normal:.1f}, during {busy:.1f}, after {len(after) / 4.0:.1f}; "
          f"during / before {busy / normal:.2f}x")
    print("during, per second:", per_second)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
