"""What an import's report says beyond its counts.

The writer's warnings reach the report with their file and line (a duplicate line's subjects
its stored note lacks, its event time not stored), capped for a huge file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from amem import MemoryStore
from amem.importer import MAX_WARNINGS, import_file

TEXT = "The office wifi password is hunter2."


def write_jsonl(path: Path, rows: Sequence[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- the writer's warnings -----------------------------------------------------------------------


def test_a_duplicate_lines_unstored_fields_are_warned_with_its_line(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    """The report counted "deduplicated 2" and said nothing of the subjects and event time
    that were not stored (findings D4)."""
    src = write_jsonl(tmp_path / "d4.jsonl", [
        {"text": TEXT, "subjects": ["office"]},
        {"text": TEXT, "subjects": ["office", "guest"]},
        {"text": TEXT, "event_time": "2025-01-01T00:00:00Z"}])
    report = import_file(edge_store, src, enrich=False)
    assert (report.created, report.deduplicated) == (1, 2)
    assert len(report.warnings) == 2
    assert report.warnings[0].startswith(f"{src}:2: ") and "not added: guest" in \
        report.warnings[0]
    assert report.warnings[1].startswith(f"{src}:3: ") and "event_time" in report.warnings[1]
    # run again: line 1 is its own stored note (nothing lost), lines 2 and 3 warn again
    again = import_file(edge_store, src, enrich=False)
    assert [w.split(":")[1] for w in again.warnings] == ["2", "3"]


def test_the_warnings_of_a_huge_import_are_capped_and_counted(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    extra = 37
    src = write_jsonl(tmp_path / "many.jsonl", [
        {"text": TEXT, "subjects": ["office", f"person{i}"][:1 + bool(i)]}
        for i in range(MAX_WARNINGS + extra + 1)])
    report = import_file(edge_store, src, enrich=False)
    assert report.deduplicated == MAX_WARNINGS + extra
    assert len(report.warnings) == MAX_WARNINGS + 1
    assert report.warnings[0].startswith(f"{src}:2: ")
    assert report.warnings[-1] == f"... and {extra} more line warnings"
