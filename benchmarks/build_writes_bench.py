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
          stop: threading.Event | None = None, cpu: list[float] | None = None) -> list[float]:
    """Add notes until ``seconds`` pass or ``stop`` is set; the time of each add (``cpu``
    gets this thread's CPU seconds)."""
    stamps: list[float] = []
    began_cpu = time.thread_time()
    start = time.perf_counter()
    i = 0
    while (time.perf_counter() - start < seconds) if seconds is not None else not (
            stop is not None and stop.is_set()):
        store.add(f"{tag} write {i} about topic {i % 97} in place {i % 31}", enrich=False)
        i += 1
        if pace:
            time.sleep(pace)
        stamps.append(time.perf_counter() - start)
    if cpu is not None:
        cpu.append(time.thread_time() - began_cpu)
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
        cpu_before: list[float] = []
        before = _adds(store, "before", args.pace, seconds=4.0, cpu=cpu_before)
        stop, during, cpu_during = threading.Event(), [], []  # type: threading.Event, list[float], list[float]
        writer = threading.Thread(target=lambda: during.extend(
            _adds(store, "during", args.pace, stop=stop, cpu=cpu_during)))
        started, started_cpu = time.perf_counter(), time.process_time()
        writer.start()
        outcome = backend.optimize_on_copy()
        build = time.perf_counter() - started
        stop.set()
        writer.join()
        process_cpu = time.process_time() - started_cpu
        after = _adds(store, "after", args.pace, seconds=4.0)
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    normal, busy = len(before) / 4.0, len(during) / build
    per_second = [sum(1 for t in during if k <= t < k + 1) for k in range(int(build))]
    print(f"size {args.size}, pace {args.pace} s: build {build:.1f} s ({outcome})")
    print(f"adds/s before {normal:.1f}, during {busy:.1f}, after {len(after) / 4.0:.1f}; "
          f"during / before {busy / normal:.2f}x")
    # CPU figures do not move with the machine's load as the rates do: the writer's CPU per
    # add (the change log's cost shows here), and the CPU this process spent on the build
    # outside the writer thread (the copy, the catch-up if it runs here, the swap)
    print(f"writer CPU per add: before {1e6 * cpu_before[0] / len(before):.0f} us, during "
          f"{1e6 * cpu_during[0] / max(1, len(during)):.0f} us; this process's CPU on the build "
          f"besides the writer: {process_cpu - cpu_during[0]:.1f} s")
    gaps = [b - a for a, b in zip([0.0, *during], during)]
    print(f"longest wait between two adds during the build: {1000 * max(gaps, default=0.0):.0f} ms")
    print("during, per second:", per_second)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
