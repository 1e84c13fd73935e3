"""Import memory and store-open cost against store size (hashing embedder, tiny notes).

    python -m benchmarks.open_bench                        # 20k and 100k notes
    python -m benchmarks.open_bench --sizes 2000 10000     # quick

For each size a JSONL file of tiny unique notes is written, then two fresh child processes run:

* ``import``: ``amem.importer.import_file(..., enrich=False)`` into a new embedded store;
  it reports the seconds and its peak RSS above what the process held before the import;
* ``open``: ``MemoryStore(path)`` then one ``search``; it reports the open and search seconds
  and the peak RSS above the interpreter with amem imported.

The claim under test is flatness: import memory must not grow with the file, and opening a
store must not grow with the store. So the figures that matter are the ratios between sizes
(the notes ratio is printed next to them); absolute times move with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._util import run_child

DEFAULT_SIZES = (20_000, 100_000)


def _peak_rss_mb() -> float:
    """The process's peak resident set (VmHWM), in MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _rss_split_mb() -> dict[str, float]:
    """Resident memory now, split: anonymous (heap: what must stay flat) and file-backed
    (the engine's memory-mapped segments and WAL: page cache the kernel can take back)."""
    out = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            key = line.split(":", 1)[0]
            if key in ("RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
    return out


def _reset_peak() -> None:
    """Start peak tracking from now (Linux: writing 5 to clear_refs resets VmHWM)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")


def write_notes(path: Path, size: int) -> None:
    words = ["tea", "deploy", "garden", "invoice", "bicycle", "allergy", "birthday", "kernel"]
    with path.open("w", encoding="utf-8") as out:
        for i in range(size):
            text = f"note {i}: {words[i % 8]} {words[(i // 8) % 8]} item {i % 997} batch {i // 997}"
            out.write(json.dumps({"text": text}) + "\n")


def child_import(store: Path, src: Path) -> dict[str, Any]:
    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder
    from amem.importer import import_file

    embedder = HashingEmbedder()
    _reset_peak()
    base, split = _peak_rss_mb(), _rss_split_mb()
    started = time.perf_counter()
    with MemoryStore(store, embedder=embedder) as memory:
        report = import_file(memory, src, enrich=False)
        end = _rss_split_mb()
    return {"seconds": round(time.perf_counter() - started, 2), "created": report.created,
            "peak_rss_mb": round(_peak_rss_mb() - base, 1),
            "anon_mb": round(end["RssAnon"] - split["RssAnon"], 1),
            "file_mb": round(end["RssFile"] - split["RssFile"], 1)}


def child_open(store: Path) -> dict[str, Any]:
    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder

    embedder = HashingEmbedder()
    from amem.search import Searcher  # noqa: F401  (the search modules load before the base)
    from amem.text import tokenize

    tokenize("预热 warm up")  # the tokenizers' dictionaries are a fixed cost, not the store's
    _reset_peak()
    base, split = _peak_rss_mb(), _rss_split_mb()
    started = time.perf_counter()
    memory = MemoryStore(store, embedder=embedder)
    opened = time.perf_counter()
    hits = memory.search("deploy garden item 5", limit=5)
    searched = time.perf_counter()
    end = _rss_split_mb()
    memory.close()
    return {"open_s": round(opened - started, 3), "search_s": round(searched - opened, 3),
            "hits": len(hits), "peak_rss_mb": round(_peak_rss_mb() - base, 1),
            "anon_mb": round(end["RssAnon"] - split["RssAnon"], 1),
            "file_mb": round(end["RssFile"] - split["RssFile"], 1)}


def _child(*args: str) -> dict[str, Any]:
    return run_child("benchmarks.open_bench", *args)


def run(sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="amem-open-bench-") as tmp:
        for size in sizes:
            src = Path(tmp) / f"notes-{size}.jsonl"
            store = Path(tmp) / f"store-{size}"
            write_notes(src, size)
            imported = _child("import", str(store), str(src))
            opened = _child("open", str(store))
            row = {"notes": size, "import": imported, "open": opened,
                   "load_avg": round(os.getloadavg()[0], 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Largest size over smallest: notes, import RSS, open seconds, open RSS."""
    small, large = rows[0], rows[-1]

    def r(a: float, b: float) -> float:
        return round(a / b, 2) if b else float("inf")

    return {"notes": r(large["notes"], small["notes"]),
            "import_peak_rss": r(large["import"]["peak_rss_mb"], small["import"]["peak_rss_mb"]),
            "import_anon": r(large["import"]["anon_mb"], small["import"]["anon_mb"]),
            "open_seconds": r(large["open"]["open_s"], small["open"]["open_s"]),
            "open_peak_rss": r(large["open"]["peak_rss_mb"], small["open"]["peak_rss_mb"]),
            "open_anon": r(large["open"]["anon_mb"], small["open"]["anon_mb"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--out", help="write the rows and ratios as JSON here")
    args = parser.parse_args(argv)
    if args.child:
        kind, *paths = args.child
        result = (child_import(Path(paths[0]), Path(paths[1])) if kind == "import"
                  else child_open(Path(paths[0])))
        print(json.dumps(result))
        return 0
    rows = run(sorted(args.sizes))
    summary = {"rows": rows, "ratios": ratios(rows) if len(rows) > 1 else {}}
    print(json.dumps(summary["ratios"]))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
