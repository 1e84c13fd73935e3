"""What an import's report says beyond its counts.

The writer's warnings reach the report with their file and line (a duplicate line's subjects
its stored note lacks, its event time not stored), capped for a huge file. An export loaded
again counts the notes already there as unchanged, not created, and keeps the BM25 statistics
equal to the engine's points; its ``batch`` is checked as an import's is.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Sequence

import pytest

from amem import MemoryStore
from amem.bm25 import payload_terms
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError
from amem.export import export_store, load_export
from amem.importer import MAX_WARNINGS, import_file
from amem.kernel.clock import ManualClock

from .conftest import make_store

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


# -- an export loaded again ----------------------------------------------------------------------


def exported(store: MemoryStore) -> io.StringIO:
    store.add("Alice likes green tea", id="a", enrich=False)
    store.add("Bob moved to Paris in 2020", id="b", enrich=False, subjects=["bob"])
    store.add("The server listens on port 8080", id="c", enrich=False)
    store.delete("c")
    out = io.StringIO()
    assert export_store(store, out) == 3
    return out


def assert_stats_match_the_engine(store: MemoryStore) -> None:
    backend = store.index.backend
    points = list(backend.iterate(None))
    assert store.index.stats.docs == backend.count(None) == len(points)
    assert store.index.stats.tokens == sum(len(payload_terms(p.payload)) for p in points)


def test_an_export_loaded_twice_counts_unchanged_notes_and_keeps_bm25_statistics(
        tmp_path: Path, edge_store: MemoryStore, embedder: HashingEmbedder, clock: ManualClock,
        caplog: pytest.LogCaptureFixture) -> None:
    """The second load said "created 3" (nothing was new) and counted each note's terms
    again: 6 documents for 3 points until the next open, which blamed a killed process
    (findings D9)."""
    path = tmp_path / "exp.jsonl"
    path.write_text(exported(edge_store).getvalue(), encoding="utf-8")
    home = tmp_path / "target"
    with MemoryStore(home, embedder=embedder, clock=clock) as target:
        first = load_export(target, path)
        assert (first.read, first.created, first.unchanged, first.replaced) == (3, 3, 0, 0)
        again = load_export(target, path)
        assert (again.read, again.created, again.unchanged, again.replaced) == (3, 0, 3, 0)
        assert_stats_match_the_engine(target)
        assert target.index.build.points_since == 3  # nothing written the second time
        # a note changed since the export is written back as the export has it
        target.update("b", content="Bob moved to Lyon in 2023")
        third = load_export(target, path)
        assert (third.created, third.unchanged, third.replaced) == (0, 2, 1)
        assert target.get("b").content == "Bob moved to Paris in 2020"
        assert_stats_match_the_engine(target)
    with caplog.at_level(logging.WARNING, logger="amem.index"):
        with MemoryStore(home, embedder=embedder, clock=clock) as reopened:
            assert_stats_match_the_engine(reopened)
    assert "BM25 statistics" not in caplog.text


def test_a_line_the_export_repeats_is_written_once(tmp_path: Path, edge_store: MemoryStore,
                                                   embedder: HashingEmbedder,
                                                   clock: ManualClock) -> None:
    lines = exported(edge_store).getvalue().splitlines(keepends=True)
    path = tmp_path / "twice.jsonl"
    path.write_text(lines[0] + "".join(lines) + lines[1], encoding="utf-8")
    with make_store("edge", embedder, clock) as target:
        report = load_export(target, path, batch=2)  # one repeat in a batch, one across
        assert (report.read, report.created, report.unchanged, report.replaced) == (5, 3, 2, 0)
        assert_stats_match_the_engine(target)


@pytest.mark.parametrize("bad", [-1, 0, True, 2.5, "8"])
def test_an_export_batch_below_one_or_not_a_whole_number_is_refused(
        tmp_path: Path, edge_store: MemoryStore, embedder: HashingEmbedder, clock: ManualClock,
        bad: object) -> None:
    path = tmp_path / "exp.jsonl"
    path.write_text(exported(edge_store).getvalue(), encoding="utf-8")
    with make_store("edge", embedder, clock) as target:
        with pytest.raises(ValidationError) as info:
            load_export(target, path, batch=bad)  # type: ignore[arg-type]
        assert info.value.field == "batch" and "at least 1" in str(info.value)
        assert target.index.backend.count(None) == 0
        assert load_export(target, path, batch=1).created == 3
