"""Bulk import: formats, bad lines, idempotence, a killed import run again, export round trip."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Sequence

import pytest

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError
from amem.export import export_store, import_export, load_export
from amem.importer import ImportRejected, import_file

from .conftest import make_store


def write_jsonl(path: Path, rows: Sequence[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)
                              for r in rows) + "\n", encoding="utf-8")
    return path


def test_jsonl_import_reports_bad_lines_with_numbers(tmp_path: Path, edge_store: MemoryStore) -> None:
    src = write_jsonl(tmp_path / "notes.jsonl", [
        {"text": "first note", "subjects": ["alice"], "tags": ["t"]},
        "{not json",
        {"text": ""},
        {"text": "dated", "timestamp": "2024-02-03"},
        ["a list"],
        {"text": "bad ts", "timestamp": "soon"},
        {"text": "unknown field", "colour": "red"},
        {"text": "first note"},  # duplicate of line 1
        {"text": "北京的冬天很冷", "id": "zh-1"},
    ])
    with pytest.raises(ImportRejected) as info:  # checked whole first: nothing written
        import_file(edge_store, src, enrich=False)
    assert info.value.invalid == 5 and info.value.field == "file" and edge_store.count() == 0
    assert [int(e.split(":")[1]) for e in info.value.errors] == [2, 3, 5, 6, 7]
    report = import_file(edge_store, src, enrich=False, skip_invalid=True)
    assert (report.read, report.created, report.deduplicated, report.skipped) == (9, 3, 1, 5)
    lines = sorted(int(e.split(":")[1]) for e in report.errors)
    assert lines == [2, 3, 5, 6, 7]
    assert all(str(src) in e for e in report.errors)
    assert "colour" in " ".join(report.errors)
    assert edge_store.count() == 3
    assert edge_store.get("zh-1").content == "北京的冬天很冷"
    assert edge_store.get("zh-1").subjects == []


def test_text_and_markdown_one_note_per_paragraph(tmp_path: Path, edge_store: MemoryStore) -> None:
    md = tmp_path / "notes.md"
    md.write_text("# Heading one\nline a\nline b\n\nsecond paragraph\n## Heading two\nthird\n",
                  encoding="utf-8")
    report = import_file(edge_store, md, enrich=False)
    assert report.created == 3
    contents = sorted(n.content for n in edge_store.list(limit=10)[0])
    assert contents == ["# Heading one\nline a\nline b", "## Heading two\nthird", "second paragraph"]


def test_a_markdown_heading_is_never_a_note_of_its_own(tmp_path: Path, edge_store: MemoryStore) -> None:
    """A heading followed by a blank line was stored as a note holding only '# Travel'."""
    md = tmp_path / "notes.md"
    md.write_text("# Travel\n\nAlice flew to Lisbon in May.\n\n## Food\n\n### Lunch\nBob likes "
                  "ramen.\n\nplain paragraph\n\n# A heading with nothing after it\n",
                  encoding="utf-8")
    report = import_file(edge_store, md, enrich=False)
    contents = sorted(n.content for n in edge_store.list(limit=10)[0])
    assert contents == ["# Travel\nAlice flew to Lisbon in May.", "### Lunch\nBob likes ramen.",
                        "plain paragraph"]
    assert report.created == 3


def test_import_twice_is_idempotent(tmp_path: Path, edge_store: MemoryStore) -> None:
    src = write_jsonl(tmp_path / "n.jsonl", [{"text": f"note number {i}"} for i in range(40)])
    first = import_file(edge_store, src, enrich=False, batch=7)
    second = import_file(edge_store, src, enrich=False, batch=7)
    assert first.created == 40 and second.created == 0 and second.deduplicated == 40
    assert edge_store.count() == 40


def test_import_rejects_unknown_format_and_missing_file(tmp_path: Path, edge_store: MemoryStore) -> None:
    (tmp_path / "x.pdf").write_text("a,b\n")
    with pytest.raises(ValidationError) as info:
        import_file(edge_store, tmp_path / "x.pdf")
    assert info.value.field == "format"
    with pytest.raises(ValidationError):
        import_file(edge_store, tmp_path / "nope.jsonl")


KILL_SCRIPT = textwrap.dedent("""
    import sys
    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder
    from amem.importer import import_file
    store_path, src = sys.argv[1], sys.argv[2]
    def progress(done, total):
        print("PROGRESS", done, flush=True)
    with MemoryStore(store_path, embedder=HashingEmbedder(dim=64)) as store:
        report = import_file(store, src, enrich=False, batch=20, progress=progress)
        print("DONE", report.created, report.deduplicated, store.count(), flush=True)
""")


def test_killed_import_run_again_ends_with_exact_unique_notes(tmp_path: Path) -> None:
    rows = [{"text": f"bulk note {i} " + "word " * (i % 13)} for i in range(1200)]
    rows += [{"text": "bulk note 5 " + "word " * 5}] * 10  # duplicates of one row
    src = write_jsonl(tmp_path / "bulk.jsonl", rows)
    script = tmp_path / "run_import.py"
    script.write_text(KILL_SCRIPT)
    store_path = tmp_path / "store"
    with subprocess.Popen([sys.executable, str(script), str(store_path), str(src)],
                          stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:  # kill it mid-import, after some batches landed
            if line.startswith("PROGRESS"):
                seen += 1
                if seen == 12:
                    proc.send_signal(signal.SIGKILL)
                    break
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    out = subprocess.run([sys.executable, str(script), str(store_path), str(src)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    done = [l for l in out.stdout.splitlines() if l.startswith("DONE")][0].split()
    assert int(done[3]) == 1200  # exactly the unique notes
    assert int(done[2]) > 0  # the first run's notes were recognised, not written twice


def test_export_then_import_moves_a_store_between_backends(edge_store: MemoryStore) -> None:
    for i in range(25):
        edge_store.add(f"exported note {i}", id=f"e{i}", enrich=False, agent_id="a" if i % 2 else "b")
    edge_store.delete("e3", agent_id="a")
    edge_store.search("exported note 4", agent_id="b")
    buf = io.StringIO()
    assert export_store(edge_store, buf) == 25
    buf.seek(0)
    target = make_store("qdrant-local", HashingEmbedder(dim=256), ManualClock("2026-01-10T12:00:00+00:00"))
    with target:
        assert import_export(target, buf) == 25
        assert target.count(agent_id="a") == 11 and target.count(agent_id="b") == 13
        assert target.get("e4", agent_id="b").retrieval_count == 1
        for agent in ("a", "b"):
            q = "exported note 7"
            assert [r.id for r in target.search(q, agent_id=agent, heat=False)] == \
                   [r.id for r in edge_store.search(q, agent_id=agent, heat=False)]


def test_an_id_clash_imports_nothing_or_with_skip_invalid_skips_that_line(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    edge_store.add("original text", id="fixed", enrich=False)
    src = write_jsonl(tmp_path / "clash.jsonl", [
        {"text": "other text", "id": "fixed"}, {"text": "fine"},
        {"text": "twin a", "id": "t"}, {"text": "twin b", "id": "t"}])
    # found by the whole-file check: nothing is written (test_import_checks.py has more)
    with pytest.raises(ImportRejected) as info:
        import_file(edge_store, src, enrich=False)
    assert [int(e.split(":")[1]) for e in info.value.errors] == [1, 4]
    assert edge_store.count() == 1
    report = import_file(edge_store, src, enrich=False, skip_invalid=True)
    assert (report.created, report.skipped) == (2, 2)
    assert sorted(int(e.split(":")[1]) for e in report.errors) == [1, 4]
    assert edge_store.get("fixed").content == "original text"
    assert edge_store.get("t").content == "twin a"


def _export_with_bad_line(store: MemoryStore, tmp_path: Path, bad_at: int, bad: str) -> Path:
    store.add_many([{"text": f"exported note number {i}", "id": f"x{i}"}
                    for i in range(bad_at + 20)], enrich=False)
    buf = io.StringIO()
    export_store(store, buf)
    lines = buf.getvalue().splitlines()
    lines[bad_at - 1] = bad
    path = tmp_path / "dump.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("bad", [
    "{broken json",
    '{"note": {"id": "x", "agent_id": "default", "content": ""}}',
    '{"note": {"id": 5, "agent_id": "default", "content": "text"}}',
    '{"note": {"id": "v", "agent_id": "default", "content": "t"}, "embedder": "hashing-v1-d256", '
    '"vector": [1, 2]}',
])
def test_a_rejected_export_writes_nothing(tmp_path: Path, edge_store: MemoryStore,
                                          bad: str) -> None:
    src = _export_with_bad_line(edge_store, tmp_path, 301, bad)
    target = make_store("edge", HashingEmbedder(dim=256), ManualClock("2026-01-10T12:00:00+00:00"))
    with target:
        assert edge_store.embedder.model_id == target.embedder.model_id
        with pytest.raises(ImportRejected) as info:  # wrote 256 notes before the fix
            load_export(target, src)
        assert target.info().points == 0
        assert info.value.errors[0].startswith(f"{src}:301:")
        report = load_export(target, src, skip_invalid=True)  # the same choice as import_file
        assert (report.created, report.skipped) == (320, 1) and target.info().points == 320


def test_import_and_export_refuse_the_same_way(tmp_path: Path, edge_store: MemoryStore) -> None:
    src = write_jsonl(tmp_path / "n.jsonl", [{"text": "good"}, {"text": ""}])
    with pytest.raises(ImportRejected) as plain:
        import_file(edge_store, src, enrich=False)
    dump = _export_with_bad_line(edge_store, tmp_path, 2, '{"note": 1}')
    target = make_store("edge", HashingEmbedder(dim=256), ManualClock("2026-01-10T12:00:00+00:00"))
    with target, pytest.raises(ImportRejected) as export:
        load_export(target, dump)
    assert (plain.value.field, plain.value.code) == (export.value.field, export.value.code)
    assert "nothing was imported" in str(plain.value) and "nothing was imported" in str(export.value)


def test_a_file_that_is_not_utf8_is_refused_before_writing(tmp_path: Path,
                                                           edge_store: MemoryStore) -> None:
    src = tmp_path / "latin.jsonl"
    src.write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(ValidationError) as info:
        import_file(edge_store, src, enrich=False)
    assert info.value.field == "file" and edge_store.count() == 0


def test_a_stale_bm25_count_in_meta_json_is_corrected_at_open(tmp_path: Path) -> None:
    """A SIGKILL between writes and the next metadata save leaves meta.json behind the engine."""
    with MemoryStore(tmp_path / "s", embedder=HashingEmbedder(dim=64)) as store:
        store.add_many([{"text": f"note {i} " + "word " * (i % 5)} for i in range(40)],
                       enrich=False)
        store.delete(store.list(limit=1)[0][0].id)  # soft: still a BM25 document
        avgdl = store.index.stats.avgdl
    meta_file = tmp_path / "s" / "meta.json"
    meta = json.loads(meta_file.read_text())
    assert meta["bm25_stats"]["docs"] == 40
    meta["bm25_stats"] = {"docs": 13, "tokens": round(13 * avgdl)}  # as a killed process left it
    meta_file.write_text(json.dumps(meta))
    with MemoryStore(tmp_path / "s", embedder=HashingEmbedder(dim=64)) as store:
        assert store.index.stats.docs == 40  # stayed at 13 before
        assert store.index.stats.avgdl == pytest.approx(avgdl, rel=0.01)
    assert json.loads(meta_file.read_text())["bm25_stats"]["docs"] == 40


def test_export_reports_progress(edge_store: MemoryStore) -> None:
    edge_store.add_many([{"text": f"progress note {i}"} for i in range(5)], enrich=False)
    seen: list[tuple[int, int | None]] = []
    assert export_store(edge_store, io.StringIO(), progress=lambda d, t: seen.append((d, t))) == 5
    assert seen[-1] == (5, 5)


def test_the_same_text_about_other_people_imports_as_their_own_notes(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    """The id an import derives took the text alone: the bob line got the alice line's id and
    was refused mid-write ("a note with id ... already exists with different content"), exit 1,
    though the file gives no id and such a text about another person is its own note."""
    text = "Prefers window seats on flights."
    src = write_jsonl(tmp_path / "seats.jsonl", [
        {"text": text, "subjects": ["alice"]}, {"text": text, "subjects": ["bob"]},
        {"text": text, "subjects": ["bob", "alice"]}])  # about both: one of theirs
    report = import_file(edge_store, src, enrich=False)
    assert (report.created, report.deduplicated, report.skipped) == (2, 1, 0), report.errors
    assert sorted(n.subjects[0] for n in edge_store.list(limit=10)[0]) == ["alice", "bob"]
    again = import_file(edge_store, src, enrich=False)  # a re-run writes nothing new
    assert (again.created, again.deduplicated, again.skipped) == (0, 3, 0)
    assert edge_store.count() == 2
