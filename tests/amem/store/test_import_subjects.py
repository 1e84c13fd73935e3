"""What a text or Markdown document gives its notes as subjects (``amem.importer``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore
from amem.errors import ValidationError
from amem.importer import heading_text, import_file, read_items


def items(path: Path, text: str, title: str | None = None) -> list[tuple[str, list[str]]]:
    path.write_text(text, encoding="utf-8")
    out = []
    for _, item in read_items(path, "text", title):
        assert isinstance(item, dict)
        out.append((item["text"], item.get("subjects", [])))
    return out


def test_heading_words_lose_their_marks() -> None:
    assert heading_text("## Food ##\n") == "Food"
    assert heading_text("   ### C# tips\n") == "C# tips"
    assert heading_text("# ##\n") == ""
    assert heading_text("# " + "x" * 300) == "x" * 200


def test_the_heading_path_follows_the_levels(tmp_path: Path) -> None:
    got = items(tmp_path / "guide.md", "intro before any heading\n\n# Guide\n## Install\n"
                "### Linux\napt it\n\n## Use ##\nrun it\n#\nbare heading above\n")
    assert got == [
        ("intro before any heading", ["guide"]),  # text first: the file name is the title
        # the text keeps the nearest heading only, as before; the subjects hold the whole path
        ("### Linux\napt it", ["guide", "Install", "Linux"]),  # "Guide" is "guide" once
        ("## Use ##\nrun it", ["guide", "Use"]),
        ("#\nbare heading above", ["guide"]),  # an empty level-1 heading closes the path
    ]


def test_a_level_one_heading_first_is_the_title_unless_one_is_given(tmp_path: Path) -> None:
    doc = "# Lisbon trip\nday one\n\n# Appendix\nsandals\n"
    assert items(tmp_path / "a.md", doc) == [
        ("# Lisbon trip\nday one", ["Lisbon trip"]),
        ("# Appendix\nsandals", ["Lisbon trip", "Appendix"])]
    assert items(tmp_path / "a.md", doc, "Summer") == [
        ("# Lisbon trip\nday one", ["Summer", "Lisbon trip"]),
        ("# Appendix\nsandals", ["Summer", "Appendix"])]
    assert items(tmp_path / "a.md", doc, "") == [
        ("# Lisbon trip\nday one", ["Lisbon trip"]), ("# Appendix\nsandals", ["Appendix"])]
    assert items(tmp_path / "plain.txt", "one\n\ntwo\n", "") == [("one", []), ("two", [])]


def test_a_title_is_checked_and_refused_for_jsonl(tmp_path: Path, edge_store: MemoryStore) -> None:
    lines = tmp_path / "n.jsonl"
    lines.write_text('{"text": "a note", "subjects": ["mine"]}\n', encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        import_file(edge_store, lines, enrich=False, title="T")
    assert info.value.field == "title"
    doc = tmp_path / "d.md"
    doc.write_text("text\n", encoding="utf-8")
    for bad in ("x" * 201, "   ", "a\x00b"):
        with pytest.raises(ValidationError) as info:
            import_file(edge_store, doc, enrich=False, title=bad)
        assert info.value.field == "title"
    assert edge_store.count() == 0
    import_file(edge_store, lines, enrich=False)  # a JSONL line keeps the subjects it gives
    assert edge_store.get(edge_store.list(limit=1)[0][0].id).subjects == ["mine"]


def test_a_paragraph_in_many_files_takes_only_a_few_of_their_names(store: MemoryStore,
                                                                   tmp_path: Path) -> None:
    # a signature or template each file holds whole: one note, and the first file names
    # added to it stop at MAX_TITLED (each file is all of it: no rename can be told apart)
    from amem.importtitle import MAX_TITLED

    for day in range(1, MAX_TITLED + 4):
        doc = tmp_path / f"2025-03-{day:02d}.md"
        doc.write_text("Sent from my phone.\n", encoding="utf-8")
        report = import_file(store, doc, enrich=False)
        assert report.created == (1 if day == 1 else 0)
        assert report.title_added == (1 if 1 < day <= MAX_TITLED else 0)
    (note,), _ = store.list(limit=5)
    assert note.subjects == [f"2025-03-{day:02d}" for day in range(1, MAX_TITLED + 1)]
