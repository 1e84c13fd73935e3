"""``amem restore DIR --merge``: a backup brought into a home already in use (a user who started
on the new machine before moving the old one over) without overwriting anything stored there;
a damaged backup refused before anything is written; the config file copied into a home that
reads none. One flow through the installed script, the cases in process."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmStore
from lcm.config import LcmConfig
from lcm.models import FileDescription
from lcm.errors import LcmValidationError
from lcm.operator.merge import check_backup, merge_backup
from tools.cli.backup import NOTES
from tools.cli.main import main

from .test_cli_console import amem

AGENT = "alice"


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": AGENT,
                "LCM_LOG_FILE_ENABLED": "false", "PYTHONPATH": str(Path(__file__).parents[2]),
                **extra})
    return env


def run(capsys: pytest.CaptureFixture[str], env: dict[str, str], *args: str,
        code: int = 0) -> str:
    got = main(list(args), env=env)
    out, err = capsys.readouterr()
    assert got == code, (args, got, out, err)
    return out if code == 0 else err


def texts(capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> dict[str, str]:
    rows = [json.loads(line) for line in run(capsys, env, "export", "-").splitlines()]
    return {r["note"]["id"]: r["note"]["content"] for r in rows}


def messages(home: Path) -> list[str]:
    with sqlite3.connect(home / "lcm.db") as c:
        return sorted(r[0] for r in c.execute("SELECT content FROM messages"))


def quiet(env: dict[str, str], *args: str) -> None:
    """A setup command, its output dropped (a module's fixture has no capsys)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(list(args), env=env) == 0, args


def fill(env: dict[str, str], tmp: Path, notes: list[dict[str, str]],
         messages: list[dict[str, object]]) -> None:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "notes.jsonl").write_text("".join(json.dumps(n) + "\n" for n in notes))
    quiet(env, "import", str(tmp / "notes.jsonl"), "--no-enrich")
    (tmp / "chat.jsonl").write_text("".join(json.dumps(m) + "\n" for m in messages))
    quiet(env, "lcm", "ingest", str(tmp / "chat.jsonl"), "--session-key", f"agent:{AGENT}:main")


@pytest.fixture(scope="module")
def backup(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with a key and a config file, backed up (once for the module: each test that
    damages it works on a copy)."""
    tmp = tmp_path_factory.mktemp("old")
    (tmp / "amem.toml").write_text('embedder = "hashing"\n[lcm]\nfreshTailCount = 9\n')
    old = env_for(tmp / "home", AMEM_CONFIG=str(tmp / "amem.toml"))
    fill(old, tmp / "in",
         [{"id": "tea", "text": "Alice drinks green tea every morning"},
          {"id": "bike", "text": "Bob rides a blue bicycle to work"},
          {"id": "door", "text": "The blue door code is 4711"}],
         [{"role": "user", "content": "remember the blue door code 4711", "event_id": "e1"},
          {"role": "assistant", "content": "noted: 4711", "created_at": "2026-01-02T03:04:05Z"}])
    quiet(old, "keys", "add", "--agent", "bob")
    quiet(old, "backup", str(tmp / "bk"))
    return tmp / "bk"


@pytest.fixture
def new(tmp_path: Path) -> dict[str, str]:
    """The home the user started on the new machine: one note of a backed-up id and text, one
    of a backed-up id and another text, a conversation of the same key; no config file."""
    env = env_for(tmp_path / "new")
    fill(env, tmp_path / "n",
         [{"id": "tea", "text": "Alice drinks green tea every morning"},
          {"id": "bike", "text": "Carol walks to work"}],
         [{"role": "user", "content": "the new laptop is called nimbus"}])
    return env


def test_a_merge_brings_in_what_the_home_lacks_and_overwrites_nothing(
        backup: Path, new: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bk = backup
    config = bk.parent / "amem.toml"
    manifest = json.loads((bk / "manifest.json").read_text())
    assert manifest["config"]["on_restore"].startswith("copied into a home that reads no config")
    refused = run(capsys, new, "restore", str(bk), code=2)
    assert "already holds" in refused and "--merge" in refused

    done = amem(new, "restore", str(bk), "--merge", "--json")  # the installed script
    merged = json.loads(done.stdout)
    notes = merged["notes"]
    # tea: the same id and text here (unchanged when imported in the same second, else kept)
    assert (notes["created"], notes["unchanged"] + notes["kept"], notes["clashes"]) == (
        1, 1, [f"{AGENT}/bike"])
    assert f"note {AGENT}/bike is stored here with another text" in done.stderr
    assert texts(capsys, new) == {"tea": "Alice drinks green tea every morning",
                                  "bike": "Carol walks to work",  # the clash: kept as here
                                  "door": "The blue door code is 4711"}
    conv = merged["conversations"]
    assert (conv["how"], conv["messages_added"], conv["conversations_merged"]) == ("merged", 2, 1)
    assert messages(tmp_path / "new") == ["noted: 4711", "remember the blue door code 4711",
                                          "the new laptop is called nimbus"]
    assert merged["keys"]["added"] == 1 and "agent 'bob'" in run(capsys, new, "keys", "list")
    copied = tmp_path / "new" / "amem.toml"
    assert merged["config"]["copied_to"] == str(copied)
    assert copied.read_text() == config.read_text()
    assert copied.stat().st_mode & 0o777 == 0o600

    # again: nothing comes in twice (the messages by their event key or time), nothing changes
    again = json.loads(run(capsys, new, "restore", str(bk), "--merge", "--json"))
    n = again["notes"]
    assert (n["created"], n["unchanged"] + n["kept"], n["clashes"]) == (0, 2, [f"{AGENT}/bike"])
    assert (again["conversations"]["messages_added"], again["conversations"]["messages_skipped"]) == (0, 2)
    assert again["keys"] == {"path": str(tmp_path / "new" / "keys.json"), "added": 0,
                             "already_here": 1}
    assert again["config"]["copied_to"] is None and "left alone" in again["config"]["said"]
    assert len(messages(tmp_path / "new")) == 3


def test_a_damaged_backup_is_refused_before_anything_is_written(
        backup: Path, new: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bk = tmp_path / "bk"
    shutil.copytree(backup, bk)
    db = bk / "lcm.db"
    data = bytearray(db.read_bytes())
    data[4096 * 2:4096 * 6] = b"\xff" * (4096 * 4)  # pages of the tables, past the header
    db.write_bytes(bytes(data))
    before = texts(capsys, new)
    err = run(capsys, new, "restore", str(bk), "--merge", code=2)
    assert "is damaged" in err and "nothing was restored" in err
    assert texts(capsys, new) == before
    assert messages(tmp_path / "new") == ["the new laptop is called nimbus"]
    assert not (tmp_path / "new" / "keys.json").exists()
    assert not (tmp_path / "new" / "amem.toml").exists()


def test_a_damaged_notes_file_is_refused_before_the_conversations_are_written(
        backup: Path, new: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The conversations go in first (whole or not at all), so the notes' own check must run
    before them: a backup whose notes file has a damaged line changes nothing."""
    bk = tmp_path / "bk"
    shutil.copytree(backup, bk)
    notes = bk / NOTES
    notes.write_text(notes.read_text(encoding="utf-8") + '{"note": {"id": "cut\n',
                     encoding="utf-8")
    before = texts(capsys, new)
    err = run(capsys, new, "restore", str(bk), "--merge", code=2)
    assert NOTES in err
    assert texts(capsys, new) == before
    assert messages(tmp_path / "new") == ["the new laptop is called nimbus"]
    assert not (tmp_path / "new" / "keys.json").exists()


def test_a_restore_into_an_empty_home_copies_the_config_it_reads_none_of(
        backup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fresh = env_for(tmp_path / "fresh")
    done = json.loads(run(capsys, fresh, "restore", str(backup), "--json"))
    assert done["config"]["copied_to"] == str(tmp_path / "fresh" / "amem.toml")
    assert (tmp_path / "fresh" / "amem.toml").read_text() == (backup.parent / "amem.toml").read_text()
    assert done["conversations"]["how"] == "copied"
    # a home that reads a config file of its own keeps it; the backup's is only named
    (tmp_path / "own.toml").write_text('embedder = "hashing"\n')
    other = env_for(tmp_path / "other", AMEM_CONFIG=str(tmp_path / "own.toml"))
    kept = json.loads(run(capsys, other, "restore", str(backup), "--json"))["config"]
    assert kept["copied_to"] is None and f"this home reads {tmp_path / 'own.toml'}" in kept["said"]
    assert not (tmp_path / "other" / "amem.toml").exists()


def _store(path: Path, **cfg: Any) -> LcmStore:
    return LcmStore(path, config=LcmConfig(log_file_enabled=False, **cfg))


def test_merged_messages_keep_keys_archives_and_large_files(tmp_path: Path) -> None:
    big = "line of a pasted log with numbers 12345\n" * 600
    with _store(tmp_path / "a" / "lcm.db", large_file_threshold_tokens=2000) as a:
        a.ingest("agent:x:main", [{"role": "user", "content": "first era", "event_id": "k1"}])
        a.reset("agent:x:main")  # the first conversation archived
        a.ingest("agent:x:main", [{"role": "user", "content": big, "event_id": "k3"},
                                  {"role": "user", "content": "the same event", "event_id": "k2"},
                                  {"role": "user", "content": "ok"},
                                  {"role": "user", "content": "ok"}])
    src = tmp_path / "a" / "lcm.db"
    with _store(tmp_path / "b" / "lcm.db", large_file_threshold_tokens=2000) as b:
        b.ingest("agent:x:main", [{"role": "user", "content": "renamed on this side", "event_id": "k2"}])
        report = merge_backup(b, src, tmp_path / "a" / "lcm-files", "2026-02-01T00:00:00.000Z")
        # k2 is the same event here (kept as here); the archived conversation stays archived
        assert (report.conversations_created, report.conversations_merged) == (1, 1)
        assert report.messages_skipped == 1 and report.messages_added == 4
        assert report.large_files_added == 1
        convs = b.conversations("agent:x:main")
        assert [c.active for c in convs] == [True, False]
        with contextlib.closing(sqlite3.connect(tmp_path / "b" / "lcm.db")) as c:
            rows = c.execute("SELECT content, file_id FROM messages ORDER BY id").fetchall()
        assert [r[0] for r in rows][:2] == ["renamed on this side", "first era"]
        assert [r[0] for r in rows].count("ok") == 2  # two anonymous "ok"s stay two
        big_row = next(r for r in rows if r[1] is not None)
        file = b.describe(big_row[1], limit=len(big) + 1)
        assert isinstance(file, FileDescription) and file.slice_text == big
        again = merge_backup(b, src, tmp_path / "a" / "lcm-files", "2026-02-01T00:00:01.000Z")
        assert (again.messages_added, again.conversations_created) == (0, 0)


def test_a_damaged_large_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A large file the backup names that is there but cut short or not UTF-8 text was found
    only when the merge read it back, mid-merge (a UnicodeDecodeError, after restore had
    written the notes; a file cut short at a character came in short): the check reads each
    whole against its record."""
    big = "line of a pasted log with numbers 12345\n" * 600
    with _store(tmp_path / "a" / "lcm.db", large_file_threshold_tokens=2000) as a:
        a.ingest("agent:x:main", [{"role": "user", "content": big}])
    (path,) = [p for p in (tmp_path / "a" / "lcm-files").rglob("file_*") if p.is_file()]
    intact = path.read_bytes()
    with _store(tmp_path / "b" / "lcm.db") as b:
        b.ingest("agent:x:main", [{"role": "user", "content": "here before"}])
        for damaged, said in ((intact[:100] + b"\xff\xfe" + intact[102:], "is not UTF-8 text"),
                              (intact[:1000], "1000 bytes where its record says 24000")):
            path.write_bytes(damaged)
            (problem,) = check_backup(tmp_path / "a" / "lcm.db", tmp_path / "a" / "lcm-files")
            assert path.name in problem and said in problem
            with pytest.raises(LcmValidationError, match=said):
                merge_backup(b, tmp_path / "a" / "lcm.db", tmp_path / "a" / "lcm-files", "2026-02-01T00:00:00.000Z")
        with contextlib.closing(sqlite3.connect(tmp_path / "b" / "lcm.db")) as c:
            assert [r[0] for r in c.execute("SELECT content FROM messages")] == ["here before"]


def test_a_merged_large_file_keeps_its_text_byte_for_byte(tmp_path: Path) -> None:
    """The merge read a backed-up large file back in text mode, which turns each "\\r\\n" into
    "\\n": a pasted Windows log came in 600 bytes shorter, silently."""
    big = "line of a pasted log with numbers 12345\r\n" * 600
    with _store(tmp_path / "a" / "lcm.db", large_file_threshold_tokens=2000) as a:
        a.ingest("agent:x:main", [{"role": "user", "content": big}])
    with _store(tmp_path / "b" / "lcm.db", large_file_threshold_tokens=2000) as b:
        assert merge_backup(b, tmp_path / "a" / "lcm.db", tmp_path / "a" / "lcm-files",
                            "2026-02-01T00:00:00.000Z").large_files_added == 1
    (merged,) = [p for p in (tmp_path / "b" / "lcm-files").rglob("file_*") if p.is_file()]
    assert merged.read_bytes() == big.encode("utf-8")


def _at(minute: int) -> str:
    return f"2026-01-05T10:{minute:02d}:00.000Z"


def _said(c: sqlite3.Connection, conversation_id: int) -> tuple[list[str], list[str]]:
    """A conversation's messages in sequence order, and its context's message items in order."""
    by_seq = [r[0] for r in c.execute("SELECT content FROM messages WHERE conversation_id = ? "
                                      "ORDER BY seq", (conversation_id,))]
    context = [r[0] for r in c.execute(
        "SELECT m.content FROM context_items ci JOIN messages m ON m.id = ci.message_id "
        "WHERE ci.conversation_id = ? ORDER BY ci.ordinal", (conversation_id,))]
    return by_seq, context


def test_a_conversation_on_both_sides_reads_in_time_order_after_a_merge(tmp_path: Path) -> None:
    """The backup's messages take their places by time among the home's (each side's own
    order kept), in the messages' sequence and in the context; the home's rows keep their ids
    (what summaries, context items and large files point at)."""
    with _store(tmp_path / "a" / "lcm.db") as a:
        a.ingest("agent:x:main", [{"role": "user", "content": f"old {m}", "event_id": f"o{m}",
                                   "created_at": _at(m)} for m in (1, 3, 5, 7)])
    with _store(tmp_path / "b" / "lcm.db") as b:
        b.ingest("agent:x:main", [{"role": "user", "content": f"new {m}", "created_at": _at(m)}
                                  for m in (2, 3, 6)])
        conv = b.conversation("agent:x:main")
        assert conv is not None
        with contextlib.closing(sqlite3.connect(tmp_path / "b" / "lcm.db")) as c:
            ids_before = dict(c.execute("SELECT content, id FROM messages").fetchall())
        report = merge_backup(b, tmp_path / "a" / "lcm.db", None, "2026-02-01T00:00:00.000Z")
        assert (report.conversations_merged, report.messages_added) == (1, 4)
        order = ["old 1", "new 2", "new 3", "old 3", "old 5", "new 6", "old 7"]  # a tie: here first
        with contextlib.closing(sqlite3.connect(tmp_path / "b" / "lcm.db")) as c:
            assert _said(c, conv.id) == (order, order)
            ids_after = dict(c.execute("SELECT content, id FROM messages").fetchall())
        assert {k: ids_after[k] for k in ids_before} == ids_before
        assert report.conversations_reordered == 1
        assert [m["content"] for m in b.assemble("agent:x:main", 100_000).messages] == order
        b.ingest("agent:x:main", [{"role": "user", "content": "new 9", "created_at": _at(9)}])
        again = merge_backup(b, tmp_path / "a" / "lcm.db", None, "2026-02-01T00:00:01.000Z")
        assert (again.messages_added, again.conversations_reordered) == (0, 0)
        with contextlib.closing(sqlite3.connect(tmp_path / "b" / "lcm.db")) as c:
            assert _said(c, conv.id) == (order + ["new 9"], order + ["new 9"])
        assert b.doctor().ok


def test_merged_messages_older_than_a_summary_here_are_flagged_not_hidden(tmp_path: Path) -> None:
    """A merged message older than what a summary here covers cannot go inside that summary:
    it stays raw in the context just after it (nothing lost), the merge report counts it and
    the doctor names the conversation, until compaction summarizes it."""
    with _store(tmp_path / "a" / "lcm.db") as a:
        a.ingest("agent:x:main", [{"role": "user", "content": "old 1", "event_id": "o1",
                                   "created_at": _at(1)},
                                  {"role": "user", "content": "old 50", "event_id": "o50",
                                   "created_at": _at(50)}])
    with _store(tmp_path / "b" / "lcm.db", fresh_tail_count=2, leaf_chunk_tokens=150,
                leaf_min_fanout=2) as b:
        b.ingest("agent:x:main", [{"role": "user", "content": f"new {m} " + "words " * 30,
                                   "created_at": _at(m)} for m in range(2, 20)])
        assert b.compact("agent:x:main", force=True).leaf_summaries
        conv = b.conversation("agent:x:main")
        assert conv is not None
        assert b.doctor().checks.get("context_out_of_time_order") == 0
        report = merge_backup(b, tmp_path / "a" / "lcm.db", None, "2026-02-01T00:00:00.000Z")
        assert report.messages_added == 2 and report.older_than_summaries == 1
        assert any("older than what a summary here covers" in n for n in report.notes)
        with contextlib.closing(sqlite3.connect(tmp_path / "b" / "lcm.db")) as c:
            by_seq, context = _said(c, conv.id)
        assert by_seq[0] == "old 1" and by_seq[-1] == "old 50"
        assert context[0] == "old 1" and context[-1] == "old 50"  # first after the summaries
        doctor = b.doctor()
        found = [i for i in doctor.issues if i.check == "context_out_of_time_order"]
        assert [(i.severity, i.conversation_id) for i in found] == [("info", conv.id)]
        assert "1 message" in found[0].detail and "compaction" in found[0].detail
        assert doctor.ok  # a finding, not damage
        b.compact("agent:x:main", force=True)  # compaction summarizes it: the finding is gone
        assert b.doctor().checks["context_out_of_time_order"] == 0


def test_a_restore_from_a_directory_that_is_not_there_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a mistyped path was "not a backup made by `amem backup` (no manifest.json)"
    env = env_for(tmp_path / "home")
    for merge in ((), ("--merge",)):
        err = run(capsys, env, "restore", str(tmp_path / "bakcup"), *merge, code=2)
        assert f"no such directory: {tmp_path / 'bakcup'}" in err and "nothing restored" in err
    (tmp_path / "notes.jsonl").write_text("{}\n")  # the notes file, given for its folder
    err = run(capsys, env, "restore", str(tmp_path / "notes.jsonl"), "--merge", code=2)
    assert "notes.jsonl is a file, not the directory `amem backup` wrote" in err
    assert not (tmp_path / "home").exists()
