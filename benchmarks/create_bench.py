"""A new store's cost: the engine's own creation against one written from the blank.

    python -m benchmarks.create_bench                      # 20 of each, temporary stores, 384-d
    python -m benchmarks.create_bench --stores 40 --kind path --out benchmarks/out/create.json

``amem.backends._edge_blank`` keeps the first shard a process creates (its payload indexes
made) and writes every later new store from it. Here, in one process, creations alternate:
one with the blank dropped first (``_edge_blank.forget()``: the engine creates the shard and
each index, as before), one written from the blank; each timed from the constructor to the
end of ``close()`` (the store's whole life when nothing is written), CPU of the process
(user + system) and wall. ``--kind temporary`` makes ``EdgeBackend.temporary`` stores (what
``MemoryStore(":memory:")`` opens: not synced to disk), ``--kind path`` stores in a directory
(synced, as a new home's). The figure is the ratio of the two medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from amem.backends import EdgeBackend, _edge_blank

from ._util import write_result


def _one(kind: str, dim: int, root: Path, i: int) -> tuple[float, float]:
    cpu, wall = os.times(), time.perf_counter()
    backend = (EdgeBackend.temporary(dim) if kind == "temporary"
               else EdgeBackend(root / f"s{i}", dim))
    backend.close()
    done = os.times()
    return ((done.user + done.system) - (cpu.user + cpu.system)) * 1000, \
        (time.perf_counter() - wall) * 1000


def run(stores: int, dim: int, kind: str) -> dict[str, Any]:
    if kind not in ("temporary", "path"):
        raise ValueError(f"kind must be temporary or path, got {kind!r}")
    engine: list[tuple[float, float]] = []
    blank: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="amem-create-bench-") as tmp:
        root = Path(tmp)
        _one(kind, dim, root, -1)  # imports and the first blank, out of the figures
        for i in range(stores):
            _edge_blank.forget()
            engine.append(_one(kind, dim, root, 2 * i))  # the engine's own (kept again)
            blank.append(_one(kind, dim, root, 2 * i + 1))  # written from it

    def medians(rows: list[tuple[float, float]]) -> dict[str, float]:
        return {"cpu_ms_p50": round(statistics.median(r[0] for r in rows), 1),
                "wall_ms_p50": round(statistics.median(r[1] for r in rows), 1)}

    by_engine, by_blank = medians(engine), medians(blank)
    return {"kind": kind, "dim": dim, "stores": stores, "engine": by_engine, "blank": by_blank,
            "blank_over_engine_cpu": round(by_blank["cpu_ms_p50"]
                                           / max(by_engine["cpu_ms_p50"], 1e-9), 3),
            "blank_over_engine_wall": round(by_blank["wall_ms_p50"]
                                            / max(by_engine["wall_ms_p50"], 1e-9), 3)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.create_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=int, default=20, help="creations of each kind (20)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--kind", choices=["temporary", "path"], default="temporary")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON too")
    args = parser.parse_args(argv)
    if args.stores < 1:
        parser.error("--stores must be at least 1")
    result = run(args.stores, args.dim, args.kind)
    print(write_result(result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
