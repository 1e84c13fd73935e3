"""Embedding throughput: notes per second for every embedder on the same real LoCoMo turns.

    python -m benchmarks.embed_bench                 # 256 turns, every embedder and thread count
    python -m benchmarks.embed_bench --quick         # 48 turns, a smoke run
    python -m benchmarks.embed_bench --data PATH --out benchmarks/out/embed.json

Texts are LoCoMo dialog turns as the store holds them (``"<speaker>: <text>"`` plus the shared
image's caption), read from ``../shared/benchdata/locomo_dev.json`` beside the repository by
default. For each configuration it reports the load time (first construction and first call, so
model files are read), bulk throughput with ``kind="passage"`` in the embedder's batches (median
and best of ``--repeat`` runs; a shared machine's load makes single runs noisy), and
the latency of one query (the search path embeds one query at a time). Figures are also given
as ratios to the default (``e5-small`` on one thread) and to the fastest model in the same run
(the hashing embedder is listed but is no model),
because absolute numbers move with the machine's load; the load average is recorded.

Only embedders whose packages are installed are measured; the others are listed as skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import time
from functools import partial
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from amem.embed import Embedder, make_embedder
from amem.errors import MissingExtraError

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "benchdata" / "locomo_dev.json"
BASELINE = "e5-small/t1"

#: label -> (make_embedder name, options). Thread counts 1 and 2 for the engines that honour them.
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "e5-small/t1": ("e5-small", {"threads": 1}),
    "e5-small/t2": ("e5-small", {"threads": 2}),
    "e5-small/t1/batch1": ("e5-small", {"threads": 1, "batch_size": 1}),
    "e5-small/t1/batch128": ("e5-small", {"threads": 1, "batch_size": 128}),
    "minilm/t1": ("minilm", {"threads": 1}),
    "minilm/t2": ("minilm", {"threads": 2}),
    "fast/t1": ("fast", {"threads": 1}),
    "hashing": ("hashing", {"dim": 384}),
}
# The fast runs keep one configuration per model plus the thread comparison of the default.
QUICK_CONFIGS = ("e5-small/t1", "e5-small/t2", "minilm/t1", "fast/t1", "hashing")


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
    """Load time, bulk notes/s (median and best of ``repeat`` runs) and one-query latency."""
    load_s = _timed(lambda: embedder.embed(list(texts[:4])))
    rates = [len(texts) / _timed(lambda: embedder.embed(list(texts))) for _ in range(repeat)]
    latencies = [_timed(partial(embedder.embed, [q], kind="query")) * 1000 for q in queries]
    return {
        "model_id": embedder.model_id,
        "dim": embedder.dim,
        "load_s": round(load_s, 2),
        "notes": len(texts),
        "notes_per_s": round(statistics.median(rates), 1),
        "best_notes_per_s": round(max(rates), 1),
        "query_p50_ms": round(statistics.median(latencies), 1),
    }


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
    texts = load_turns(data, 48 if quick else 256)
    queries = texts[-8:] if quick else texts[-24:]
    repeat = repeat or (1 if quick else 2)
    result: dict[str, Any] = {
        "data": str(data),
        "notes": len(texts),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        },
        "embedders": {},
        "skipped": {},
    }
    for label in labels:
        name, options = CONFIGS[label]
        try:
            embedder = make_embedder(name, **options)
            result["embedders"][label] = measure(embedder, texts, queries, repeat)
        except MissingExtraError as exc:
            result["skipped"][label] = str(exc)
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
    return result


def _table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['notes']} LoCoMo turns, {result['machine']['cpus']} CPUs, "
        f"load {result['machine']['loadavg_start']} -> {result['machine']['loadavg_end']}",
        f"{'config':24} {'notes/s':>9} {'best':>7} {'x default':>9} {'x fastest':>9} {'query ms':>9} "
        f"{'load s':>7}  model",
    ]
    for label, row in result["embedders"].items():
        lines.append(
            f"{label:24} {row['notes_per_s']:>9} {row['best_notes_per_s']:>7} "
            f"{row.get('x_default', '-'):>9} "
            f"{row['x_fastest']:>9} {row['query_p50_ms']:>9} {row['load_s']:>7}  {row['model_id']}"
        )
    for label, why in result["skipped"].items():
        lines.append(f"{label:24} skipped: {why}")
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    configs = args.configs.split(",") if args.configs else None
    result = run(args.quick, args.data, configs, args.repeat)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
