"""A line far over the note limit is refused without building the note first: the id's hash
and the draft of a 50 MB one-line file took 900 MB only to refuse it (``amem.importer``)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from amem import MemoryStore
from amem.importer import import_file


def test_a_huge_line_is_refused_in_about_its_own_size(tmp_path: Path,
                                                      edge_store: MemoryStore) -> None:
    big = tmp_path / "one-line.txt"
    text = "moth " * 1_000_000  # 5 MB, one paragraph
    big.write_text(text + "\n\nA small paragraph about herons.\n", encoding="utf-8")
    del text
    tracemalloc.start()
    try:
        report = import_file(edge_store, big, enrich=False, skip_invalid=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.created == 1 and report.skipped == 1
    assert report.errors == [f"{big}:1: text is 4999999 characters; the limit is 32000"]
    assert peak < 40_000_000, peak  # was ~80 MB: the hash's normal form and the draft's copies
