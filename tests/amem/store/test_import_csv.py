"""A CSV table of notes, a row each (``amem.importcsv``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore
from amem.errors import ValidationError
from amem.importdir import walk
from amem.importer import ImportRejected, import_file, read_items


def test_rows_become_notes_with_their_columns(tmp_path: Path) -> None:
    src = tmp_path / "notes.csv"
    src.write_text('\ufeffID,Content,Tags,Created,Title,Source URL,keywords\n'
                   'n1,"Alice moved to Lisbon,\nlast spring",Travel; Big Move,2024-03-01,Alice,'
                   'https://x.org,lisbon|move\n'
                   '\n'
                   ',Bob likes tea,,,,,\n', encoding="utf-8")
    got = list(read_items(src, "csv"))
    assert got == [
        (2, {"id": "n1", "text": "Alice moved to Lisbon,\nlast spring",
             "tags": ["travel", "big-move"], "event_time": "2024-03-01", "subjects": ["Alice"],
             "metadata": {"Source_URL": "https://x.org"}, "keywords": ["lisbon", "move"]}),
        (4, {"text": "Bob likes tea"}),  # a blank row is skipped, still counted as a row
    ]
    semi = tmp_path / "excel.csv"  # Excel in much of Europe separates with ';'
    semi.write_text("note;tags\nUses a comma, here;a,b\n", encoding="utf-8")
    assert list(read_items(semi, "csv")) == [(2, {"text": "Uses a comma, here",
                                                  "tags": ["a", "b"]})]


def test_bad_rows_are_named_by_row_and_skip_invalid_imports_the_rest(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    src = tmp_path / "notes.csv"
    src.write_text("text,created\nfirst,2024-01-01\n,2024-01-02\nthird,soon\n"
                   "fourth,2024-01-04,extra\nfifth,\n", encoding="utf-8")
    with pytest.raises(ImportRejected) as info:
        import_file(edge_store, src, enrich=False)
    assert [e.split(": ", 1)[0] for e in info.value.errors] == [
        f"{src} row 3", f"{src} row 4", f"{src} row 5"]
    said = " ".join(info.value.errors)
    assert "the text cell is empty" in said and "event_time must be an ISO 8601" in said
    assert "3 cells, and the header names 2 columns" in said
    assert "3 of 5 rows are invalid" in str(info.value) and edge_store.count() == 0
    report = import_file(edge_store, src, enrich=False, skip_invalid=True)
    assert (report.read, report.created, report.skipped) == (5, 2, 3)
    dated = next(n for n in edge_store.list(limit=5)[0] if n.content == "first")
    assert edge_store.get(dated.id).event_time.startswith("2024-01-01")
    again = import_file(edge_store, src, enrich=False, skip_invalid=True)
    assert (again.created, again.deduplicated) == (0, 2)  # a re-run stores nothing twice


def test_a_table_without_a_text_column_is_refused_naming_its_columns(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    src = tmp_path / "people.csv"
    src.write_text("name,age\nAna,30\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"no text column: its header names 'name', 'age'"):
        import_file(edge_store, src, enrich=False)
    assert edge_store.count() == 0
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "db.csv").write_text("text\nx\n", encoding="utf-8")
    files, left = walk(tmp_path / "vault")  # a folder's tables are data, left out and named
    assert files == [] and "a .csv table" in left[0][1]


def test_a_long_cell_is_read_whole_and_the_process_csv_limit_is_left_as_it_was(
        tmp_path: Path) -> None:
    """The csv module's field limit is one per process: a server's import must not change
    it for every other reader of a table (it is raised only while a row is read)."""
    import csv

    long = "word " * 40_000  # 200,000 characters: past the module's default 128 KiB
    src = tmp_path / "long.csv"
    src.write_text(f'text,tags\n"{long}",a\nshort,b\n', encoding="utf-8")
    before = csv.field_size_limit()
    rows = read_items(src, "csv", max_chars=300_000)
    first = next(rows)
    assert first == (2, {"text": long.strip(), "tags": ["a"]})
    assert csv.field_size_limit() == before  # between rows too: the reader is suspended
    assert list(rows) == [(3, {"text": "short", "tags": ["b"]})]
    assert csv.field_size_limit() == before
    with pytest.raises(csv.Error, match="field larger than field limit"):
        list(csv.reader([f'"{long}"']))  # another reader still has the limit it had
