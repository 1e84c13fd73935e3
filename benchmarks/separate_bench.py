"""Undoing every join of a real import: how often ``amem separate`` gives a note its text back
exactly, and whether anything joins again.

    python -m benchmarks.separate_bench                      # LoCoMo dev, e5-small, offline
    python -m benchmarks.separate_bench --embedder hashing   # quicker, fewer folds

Every LoCoMo dev turn is added (its id ``<conversation>:<turn>``, each at its session time
plus a second per earlier turn), enriched offline; then every tenth turn is told again with the
next turn appended (``--retell``), which folds; then the nightly consolidation merges what it
finds. Then every join still recorded on a live note is
separated, newest first on each note (``--oldest-first``: the other way, where a later join
holding a sentence of an earlier one keeps that one's text: ``amem.joins``). It reports the joins, how many gave the note its text back
exactly, the reasons the others kept it, the seconds per separation, what the parts' own notes
got (a folded text's links and the older facts it was judged to replace, as an add's; the
notes pointed back at a merged note); then checks that every
turn is a live note of its own id holding its own text, that adding every turn again folds
none and that a second consolidation merges none.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from amem import MemoryStore, load_config
from amem.embed import make_embedder
from amem.joins import joined

from .datasets import DEFAULT_LOCOMO, load_locomo


def _items(data: Path) -> list[dict[str, Any]]:
    items = []
    for corpus in load_locomo(data):
        for n, doc in enumerate(corpus.docs):
            stamp = datetime.fromisoformat(doc.timestamp) + timedelta(seconds=n) \
                if doc.timestamp else None
            items.append({"id": f"{corpus.name}:{doc.id}", "text": doc.text,
                          **({"timestamp": stamp.isoformat()} if stamp else {})})
    return items


def _retold(items: list[dict[str, Any]], every: int) -> list[dict[str, Any]]:
    """Every ``every``-th turn told again with the next turn of its conversation appended, at
    the same time: the near-duplicates a fold exists for (LoCoMo's turns, each at its own
    time, fold hardly ever)."""
    out = []
    for n in range(0, len(items) - 1, every):
        turn, after = items[n], items[n + 1]
        if turn["id"].split(":")[0] == after["id"].split(":")[0]:
            out.append({**turn, "id": f"{turn['id']}+retold",
                        "text": f"{turn['text']} {after['text']}"})
    return out


def run(embedder_name: str, data: Path, retell: int, oldest_first: bool = False,
        limit: int | None = None) -> dict[str, Any]:
    items = _items(data)[:limit]
    with MemoryStore(":memory:", config=load_config(), embedder=make_embedder(embedder_name),
                     agent_id="bench") as store:
        added = store.add_many(items)
        if retell:
            items += _retold(items, retell)
            added += store.add_many(items[len(added):])
        statuses = Counter(r.status for r in added)
        merges = store.consolidate().merges
        kinds: Counter[str] = Counter()
        kept: Counter[str] = Counter()
        restored = 0
        seconds: list[float] = []
        # what the parts' own notes got: a folded text's links and judgement (as an add's),
        # the notes pointed back at a merged note
        given: Counter[str] = Counter()
        todo = [n.id for n, _ in store.iter_notes()]
        while todo:  # a note brought back may hold joins of its own (a survivor merged later)
            note_id = todo.pop()
            joins = joined(store.get(note_id, record_usage=False).evolution_history)
            for join in (joins if oldest_first else reversed(joins)):
                started = time.perf_counter()
                result = store.separate(note_id, join.part)
                seconds.append(time.perf_counter() - started)
                todo.append(result.note)
                kinds[result.joined_by] += 1
                restored += result.text_restored
                given[f"{result.joined_by}_links"] += len(result.links)
                given[f"{result.joined_by}_notes_linked"] += bool(result.links)
                given["supersedes"] += len(result.supersedes)
                given["relinked"] += len(result.relinked)
                for warning in result.warnings:
                    if "kept" in warning:
                        kept[warning.split(":")[0]] += 1
        by_id = {n.id: n.content for n, _ in store.iter_notes()}
        missing = [i["id"] for i in items if by_id.get(i["id"]) != i["text"]]
        again = Counter(r.status for r in store.add_many(items))
        after = store.consolidate().agents.get("bench")
        merged_after = after.merged if after is not None else []
        apart = {n.id: set(n.kept_apart) for n, _ in store.iter_notes(include_inactive=True)}
        rejoined = [(loser, into) for loser, into in merged_after
                    if into in apart.get(loser, ()) or loser in apart.get(into, ())]
    seconds.sort()
    return {"embedder": embedder_name, "oldest_first": oldest_first, "notes_added": len(items), "add": dict(statuses),
            "nightly_merges": merges, "separated": dict(kinds),
            "text_restored": restored, "text_kept": dict(kept),
            "seconds_per_separation_p50": round(seconds[len(seconds) // 2], 4) if seconds else None,
            "seconds_per_separation_p90": round(seconds[len(seconds) * 9 // 10], 4) if seconds else None,
            "parts_got": dict(given),
            "turns_not_their_own_note_after": len(missing), "missing_examples": missing[:5],
            "added_again": dict(again),
            # notes merged after: two texts each separated from a third are not kept apart
            # from each other (only from the note they were taken out of)
            "merges_after": len(merged_after), "merges_after_of_a_separated_pair": len(rejoined)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="e5-small", help="e5-small, hashing, ...")
    parser.add_argument("--data", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo JSON")
    parser.add_argument("--retell", type=int, default=10, metavar="N",
                        help="tell every Nth turn again with the next one appended (0: none)")
    parser.add_argument("--oldest-first", action="store_true",
                        help="separate each note's joins oldest first (a later join may then "
                             "hold a sentence of an earlier one, which keeps the text)")
    args = parser.parse_args(argv)
    if args.retell < 0:
        parser.error("--retell must be 0 or more")
    json.dump(run(args.embedder, args.data, args.retell, args.oldest_first), sys.stdout,
              indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
