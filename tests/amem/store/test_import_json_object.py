"""A JSON object wrapping the notes (``{"notes": [...]}``), read as its list (``amem.importarray``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.errors import ValidationError
from amem.importer import ImportRejected, import_file
from amem.kernel.jsonstream import list_items
from tests.fakes.reads import LargestRead


def test_the_list_under_a_known_key_is_imported_and_the_key_said(tmp_path: Path,
                                                                edge_store: MemoryStore) -> None:
    src = tmp_path / "export.json"
    src.write_text(json.dumps({"version": 2, "meta": {"app": "x"}, "memories": [
        {"text": "Alice likes tea"}, {"text": "Bob likes coffee", "tags": ["drink"]}],
        "exported": "2026-01-01"}), encoding="utf-8")
    report = import_file(edge_store, src, enrich=False)
    assert (report.read, report.created, report.json_key) == (2, 2, "memories")
    assert report.to_dict()["json_key"] == "memories"
    # a bad item is named by its place in that list, and nothing is written
    bad = tmp_path / "bad.json"
    bad.write_text('{"notes": [{"text": "ok"}, {"txt": "typo"}]}', encoding="utf-8")
    with pytest.raises(ImportRejected, match=r"bad.json item 2: missing field 'text'"):
        import_file(edge_store, bad, enrich=False)
    assert edge_store.count() == 2


def test_an_object_without_a_known_list_is_refused_naming_its_keys(tmp_path: Path,
                                                                   edge_store: MemoryStore) -> None:
    src = tmp_path / "pages.json"
    src.write_text('{"count": 2, "pages": [{"text": "a"}, {"text": "b"}]}', encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        import_file(edge_store, src, enrich=False)
    said = str(info.value)
    assert "'count' (a number), 'pages' (a list of 2)" in said
    assert f"jq '.pages' {src} | amem import -" in said
    one = tmp_path / "one.json"
    one.write_text('{"text": "a single note"}', encoding="utf-8")
    with pytest.raises(ValidationError, match=r"one note: wrap it in \[ \]"):
        import_file(edge_store, one, enrich=False)
    assert edge_store.count() == 0


def test_the_wrapped_list_streams_and_the_rest_of_the_object_is_checked() -> None:
    big = json.dumps({"app": "x", "notes": [{"text": "y" * 1000} for _ in range(2000)],
                      "after": [1, 2]})
    source = LargestRead(big)
    key, items = list_items(source, ("notes",), chunk=4096)
    assert key == "notes" and sum(1 for _ in items) == 2000
    assert source.most <= 8192  # never the whole file in one read
    key, items = list_items(io.StringIO('{"notes": [1], "x": }'), ("notes",), chunk=3)
    with pytest.raises(ValueError, match=r"the file:1: a value is not valid JSON"):
        list(items)
