"""What the supersede judgement costs an import: the same file with the check on and off.

    python -m benchmarks.supersede_import_bench --size 300            # e5-small, offline rule
    python -m benchmarks.supersede_import_bench --size 300 --embedder hashing
    python -m benchmarks.supersede_import_bench --size 300 --change-every 1   # the worst case

The notes are ``benchmarks.import_bench``'s (real LoCoMo turns with their dates). In one
process, with one embedder instance, it imports the file into fresh in-memory stores with
``supersede=False`` and ``supersede=True`` alternately, ``--rounds`` times each (the order
flips every round, so a warm cache or a load spike favours neither), and reports the median
seconds of each and their ratio. The offline rule judges only notes that state a change
(``amem.write.bulk``), so the cost is one engine query per such note. Real chat states a change
rarely; ``--change-every N`` appends a change ("I switched to tea now.") to every Nth note to
see the cost when many do (1: every note, the worst case).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from amem import MemoryStore, load_config
from amem.embed import Embedder, make_embedder
from amem.importer import import_file
from amem.supersede import change_marker

from ._util import ratio, timed
from .import_bench import build_items, write_jsonl


def _one(embedder: Embedder, path: Path, supersede: bool) -> tuple[float, dict[str, Any]]:
    with MemoryStore(":memory:", config=load_config(), embedder=embedder) as store:
        seconds, report = timed(lambda: import_file(store, path, supersede=supersede))
        return seconds, report.to_dict()


def run(size: int, embedder_name: str, rounds: int, change_every: int = 0) -> dict[str, Any]:
    embedder = make_embedder(embedder_name)
    items = build_items(size)
    if change_every:
        items = [{**item, "text": item["text"] + " I switched to tea now."}
                 if n % change_every == 0 else item for n, item in enumerate(items)]
    changes = sum(1 for item in items if change_marker(item["text"]))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_jsonl(items, Path(tmp) / "notes.jsonl")
        _one(embedder, path, False)  # warm-up: model load, caches
        times: dict[bool, list[float]] = {False: [], True: []}
        reports: dict[bool, dict[str, Any]] = {}
        for n in range(rounds):
            for flag in ((False, True) if n % 2 == 0 else (True, False)):
                seconds, reports[flag] = _one(embedder, path, flag)
                times[flag].append(seconds)
    off, on = statistics.median(times[False]), statistics.median(times[True])
    return {"size": size, "embedder": embedder_name, "rounds": rounds,
            "change_every": change_every,
            "notes_stating_a_change": changes,
            "seconds_off": round(off, 3), "seconds_on": round(on, 3),
            "on_over_off": ratio(on, off, 3),
            "superseded": reports[True]["superseded"], "judged_by": reports[True]["supersede"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=300, help="notes to import")
    parser.add_argument("--embedder", default="e5-small", help="e5-small, hashing, ...")
    parser.add_argument("--rounds", type=int, default=3, help="imports per setting")
    parser.add_argument("--change-every", type=int, default=0, metavar="N",
                        help="append a change statement to every Nth note (0: none)")
    args = parser.parse_args(argv)
    if args.size < 1 or args.rounds < 1 or args.change_every < 0:
        parser.error("--size and --rounds must be positive, --change-every 0 or more")
    json.dump(run(args.size, args.embedder, args.rounds, args.change_every), sys.stdout,
              indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
