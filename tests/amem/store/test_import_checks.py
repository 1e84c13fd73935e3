"""What the importer refuses before writing anything, and how it reads Markdown code and a BOM.

A bad ``batch``; an id the file gives two texts, or one a stored note holds with other text
(found by the whole-file check, so nothing is written); fenced code blocks kept whole, their
lines never headings; a leading UTF-8 byte-order mark dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError
from amem.importer import ImportRejected, import_file, read_items
from amem.kernel.clock import ManualClock

from .conftest import make_store


def write_jsonl(path: Path, rows: Sequence[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def notes_of(path: Path, text: str, title: str | None = None
             ) -> list[tuple[int, str, list[str]]]:
    """(line, text, subjects) of each note ``read_items`` makes of a Markdown document."""
    path.write_text(text, encoding="utf-8")
    out = []
    for number, item in read_items(path, "text", title):
        assert isinstance(item, dict), item
        out.append((number, item["text"], item.get("subjects", [])))
    return out


# -- batch ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 0, True, 2.5, "8"])
def test_a_batch_below_one_or_not_a_whole_number_is_refused(
        tmp_path: Path, edge_store: MemoryStore, bad: object) -> None:
    """--batch -1 imported nothing and said success (no chunk was ever handed to the writer)."""
    src = write_jsonl(tmp_path / "n.jsonl", [{"text": f"note {i}"} for i in range(5)])
    with pytest.raises(ValidationError) as info:
        import_file(edge_store, src, enrich=False, batch=bad)  # type: ignore[arg-type]
    assert info.value.field == "batch" and "at least 1" in str(info.value)
    assert edge_store.count() == 0
    report = import_file(edge_store, src, enrich=False, batch=1)
    assert report.created == 5 and edge_store.count() == 5


# -- ids -----------------------------------------------------------------------------------------


def test_an_id_given_twice_with_other_text_imports_nothing(tmp_path: Path,
                                                           edge_store: MemoryStore) -> None:
    src = write_jsonl(tmp_path / "dupid.jsonl", [
        {"text": "First text with id X about owls", "id": "X"},
        {"text": "Third unrelated line about moths"},
        {"text": "First text with id X about owls", "id": "X"},  # the same note again: fine
        {"text": "Second different text with the same id X about bats", "id": "X"},
    ])
    with pytest.raises(ImportRejected) as info:
        import_file(edge_store, src, enrich=False)
    assert edge_store.count() == 0
    assert info.value.invalid == 1
    (error,) = info.value.errors
    assert error.startswith(f"{src}:4: ") and "'X'" in error and "line 1" in error
    # --skip-invalid: as before, the good lines are written and the clash is reported
    report = import_file(edge_store, src, enrich=False, skip_invalid=True)
    assert (report.created, report.deduplicated, report.skipped) == (2, 1, 1)
    assert edge_store.get("X").content == "First text with id X about owls"
    assert any(e.startswith(f"{src}:4: ") for e in report.errors)


def test_an_id_a_stored_note_holds_with_other_text_imports_nothing(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    kept = edge_store.add("Alice keeps bees in the garden", enrich=False)
    src = write_jsonl(tmp_path / "clash.jsonl", [
        {"text": "A new note about wasps"},
        {"text": "OVERWRITTEN", "id": kept.id},
        {"text": "Another new note about hornets"},
    ])
    with pytest.raises(ImportRejected) as info:
        import_file(edge_store, src, enrich=False)
    (error,) = info.value.errors
    assert error.startswith(f"{src}:2: ") and repr(kept.id) in error
    assert "already exists with different content" in error
    assert edge_store.count() == 1
    assert edge_store.get(kept.id).content == "Alice keeps bees in the garden"
    report = import_file(edge_store, src, enrich=False, skip_invalid=True)
    assert (report.created, report.skipped) == (2, 1)
    assert edge_store.get(kept.id).content == "Alice keeps bees in the garden"


def test_ids_that_are_free_to_take_pass_the_check(tmp_path: Path, edge_store: MemoryStore,
                                                  clock: ManualClock) -> None:
    """A re-run (same id, same text), a deleted note's id and an expired one's are no clash."""
    rows: list[dict[str, object]] = [{"text": f"line {i} with its own id", "id": f"n{i}"}
                                     for i in range(1100)]  # more than one lookup batch
    src = write_jsonl(tmp_path / "ids.jsonl", rows)
    assert import_file(edge_store, src, enrich=False).created == 1100
    again = import_file(edge_store, src, enrich=False)
    assert (again.created, again.deduplicated, again.skipped) == (0, 1100, 0)
    edge_store.delete("n5")
    edge_store.add("soon gone", id="gone", ttl=3600, enrich=False)
    clock.advance(7200)
    fresh = write_jsonl(tmp_path / "fresh.jsonl", [
        {"text": "a new text for a deleted note's id", "id": "n5"},
        {"text": "a new text for an expired note's id", "id": "gone"}])
    report = import_file(edge_store, fresh, enrich=False)
    assert (report.created, report.skipped) == (2, 0)
    assert edge_store.get("gone").content == "a new text for an expired note's id"


def test_every_clash_of_a_long_file_is_named_in_line_order(tmp_path: Path,
                                                            edge_store: MemoryStore) -> None:
    edge_store.add("stored text", id="held", enrich=False)
    rows: list[dict[str, object]] = [{"text": f"filler {i}"} for i in range(1500)]
    rows[700] = {"text": "other text", "id": "held"}
    rows[1200] = {"text": "not json-clean", "colour": "red"}
    rows[1300] = {"text": "filler 2", "id": "imp-x"}
    rows[1400] = {"text": "filler 3", "id": "imp-x"}
    src = write_jsonl(tmp_path / "long.jsonl", rows)
    with pytest.raises(ImportRejected) as info:
        import_file(edge_store, src, enrich=False)
    assert [int(e.split(":")[1]) for e in info.value.errors] == [701, 1201, 1401]
    assert edge_store.count() == 1


# -- fenced code ---------------------------------------------------------------------------------


RUNBOOK = """# Runbook

Intro paragraph about the runbook for the payments service.

## Restarts

To restart payments, run `systemctl restart payments` on pay-1.

```bash
# this is a comment in code, not a heading
systemctl status payments

journalctl -u payments
```

### Deep heading

Deep content about the failover to pay-2 in region eu-west.
"""


def test_a_fenced_code_block_is_one_note_and_its_lines_are_no_headings(tmp_path: Path) -> None:
    code = ("```bash\n# this is a comment in code, not a heading\nsystemctl status payments\n\n"
            "journalctl -u payments\n```")
    assert notes_of(tmp_path / "runbook.md", RUNBOOK) == [
        (3, "# Runbook\nIntro paragraph about the runbook for the payments service.",
         ["Runbook"]),
        (7, "## Restarts\nTo restart payments, run `systemctl restart payments` on pay-1.",
         ["Runbook", "Restarts"]),
        (9, code, ["Runbook", "Restarts"]),
        (18, "### Deep heading\nDeep content about the failover to pay-2 in region eu-west.",
         ["Runbook", "Restarts", "Deep heading"]),
    ]


def test_a_fence_sits_in_its_paragraph_and_only_its_own_marker_closes_it(tmp_path: Path) -> None:
    doc = ("Add two numbers:\n~~~~python\ndef add(a, b):\n\n    return a + b\n~~~\n```\n~~~~\n"
           "after the code\n\n```\nnever closed\n\n# not a heading\n")
    assert notes_of(tmp_path / "code.md", doc, title="") == [
        (1, "Add two numbers:\n~~~~python\ndef add(a, b):\n\n    return a + b\n~~~\n```\n~~~~\n"
            "after the code", []),
        # a fence never closed runs to the end of the file (CommonMark)
        (11, "```\nnever closed\n\n# not a heading", []),
    ]
    said: list[tuple[int, str]] = []
    list(read_items(tmp_path / "code.md", "text", warn=lambda n, m: said.append((n, m))))
    assert said == [(11, "a fenced code block opened here is never closed: the rest of the file "
                         "was read as its code")]
    # not a fence: two backticks, four spaces of indent, a backtick in a backtick info string
    assert [t for _, t, _ in notes_of(tmp_path / "no.md", "``\n\n    ```\n\n``` a`b\n\nx\n")] == [
        "``", "```", "``` a`b", "x"]


def test_a_code_block_longer_than_a_note_is_cut_between_lines_and_said(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    body = "".join(f"print({i:03d})  # line {i:03d}\n" for i in range(60))  # 27 chars a line
    doc = f"# Code\n\nThe loop:\n```python\n{body}```\nafter it\n\nlast paragraph\n"
    md = tmp_path / "long.md"
    md.write_text(doc, encoding="utf-8")
    with make_store("edge", embedder, clock, max_text_chars=600) as store:
        report = import_file(store, md, enrich=False)
        notes = [n.content for n in store.list(limit=50)[0]]
    code = [n for n in notes if "print(" in n]
    assert len(code) == 3 and all(len(n) <= 600 for n in notes)
    # every part is fenced again, and together they hold every line once, in order
    assert all(n.count("```python\n") == 1 and n.count("```") == 2 for n in code)
    assert "".join(sorted(line + "\n" for n in code for line in n.splitlines()
                          if line.startswith("print("))) == body
    assert "last paragraph" in notes and report.skipped == 0
    (warning,) = [w for w in report.warnings if "code block" in w]
    assert warning.startswith(f"{md}:4: ") and "600" in warning and "3 notes" in warning


# -- byte-order mark -----------------------------------------------------------------------------


def test_a_leading_byte_order_mark_is_dropped(tmp_path: Path, edge_store: MemoryStore) -> None:
    md = tmp_path / "bom.md"
    md.write_bytes(b"\xef\xbb\xbf# BOM Title\r\n\r\nParagraph one about herons.\r\n")
    lines = tmp_path / "bom.jsonl"
    lines.write_bytes(b'\xef\xbb\xbf{"text": "a JSONL line after a BOM", "id": "j1"}\n')
    assert import_file(edge_store, md, enrich=False).created == 1
    assert import_file(edge_store, lines, enrich=False).created == 1
    notes = {n.content: n.subjects for n in edge_store.list(limit=10)[0]}
    assert notes == {"# BOM Title\nParagraph one about herons.": ["BOM Title"],
                     "a JSONL line after a BOM": []}
