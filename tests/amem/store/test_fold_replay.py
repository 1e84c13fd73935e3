"""Item 11 of issue 12: the fold decision is a function of the inputs alone, so when deferred
re-embedding runs changes nothing in the result."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from amem import MemoryStore, load_config
from amem.embed.hashing import HashingEmbedder
from amem.importer import import_file

FOLDING = {"fold_threshold": 0.8, "pending_threshold": 0.6}
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
         "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def near_duplicates(count: int, seed: int) -> list[str]:
    """Runs of consecutive sentences from eight topics: many overlap, so many fold."""
    rng = random.Random(seed)
    topics = [[" ".join(rng.sample(WORDS, 6)).capitalize() + f" item {t}{s}." for s in range(8)]
              for t in range(8)]
    rows = []
    for _ in range(count):
        topic, start = topics[rng.randrange(8)], rng.randrange(5)
        rows.append(" ".join(topic[start:start + rng.randrange(2, 5)]))
    return rows


def write_rows(path: Path, rows: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": r}) + "\n" for r in rows), encoding="utf-8")
    return path


def snapshot(store: MemoryStore) -> list[tuple[str, str, tuple[str, ...], bool]]:
    return sorted((n.id, n.content, tuple(sorted(n.folded_hashes)), n.pending_merge)
                  for n, _ in store.iter_notes(include_inactive=True))


def test_when_re_embedding_runs_changes_no_fold(tmp_path: Path) -> None:
    src = write_rows(tmp_path / "rows.jsonl", near_duplicates(120, seed=1))
    results = {}
    for every in (0, 1, 1024):
        config = load_config(overrides={**FOLDING, "import_reembed_every": every})
        with MemoryStore(":memory:", config=config, embedder=HashingEmbedder(dim=256)) as store:
            report = import_file(store, src, batch=4)
            assert report.folded > 20 and report.skipped == 0
            results[every] = snapshot(store)
    # before: 26 notes with 0 and 1, 25 with 1024 (folds read vectors of earlier texts)
    assert results[0] == results[1] == results[1024]
