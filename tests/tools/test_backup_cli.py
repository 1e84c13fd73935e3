"""Backups as an operator takes them: ``amem export`` to a file, through the console script."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

import pytest

from tests.tools.test_cli_console import AMEM, ROOT, amem, amem_json, base_env

pytestmark = pytest.mark.slow


def _limit_file_size(limit: int) -> None:
    # the kernel stops a write past ``limit`` bytes with SIGXFSZ: the export dies mid-file,
    # as one killed by an operator or an out-of-memory killer does
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def test_an_export_cut_short_leaves_the_previous_backup_whole(tmp_path: Path) -> None:
    env = base_env(tmp_path / "home")
    notes = tmp_path / "notes.jsonl"
    notes.write_text("".join(json.dumps({"text": f"note {i}: the deploy of service {i} failed",
                                         "id": f"n{i}"}) + "\n" for i in range(40)),
                     encoding="utf-8")
    amem(env, "import", str(notes), "--no-enrich")
    backup = tmp_path / "backup.jsonl"
    assert amem_json(env, "export", str(backup))["exported"] == 40  # type: ignore[index]
    restored = amem(base_env(tmp_path / "restored"), "import", str(backup), "--from-export")
    # a restore judges nothing: the notes keep their marks (it said "deferred to nightly")
    assert "supersession marks kept as exported" in restored.stdout, restored.stdout
    assert "deferred" not in restored.stdout
    whole = backup.read_bytes()
    assert len(whole) > 8000
    done = subprocess.run([str(AMEM), "export", str(backup)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          preexec_fn=lambda: _limit_file_size(4000))
    assert done.returncode != 0, done.stderr
    # the file at the name is the previous export, not its first 4000 bytes (a cut that ends
    # at a line end imports without a word: 40 notes became 10)
    assert backup.read_bytes() == whole


def test_an_export_is_written_whole_and_private_and_devices_are_written_in_place(
        tmp_path: Path) -> None:
    env = base_env(tmp_path / "home")
    amem(env, "add", "one note to back up", "--no-enrich")
    out = tmp_path / "new" / "backup.jsonl"  # a folder that is not there yet is made
    assert amem_json(env, "export", str(out))["exported"] == 1  # type: ignore[index]
    assert out.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in out.parent.iterdir()] == ["backup.jsonl"]
    assert amem_json(env, "export", "/dev/null")["exported"] == 1  # type: ignore[index]
    assert Path("/dev/null").is_char_device()


def test_lcm_backup_copies_a_store_in_use_whole_into_one_file(tmp_path: Path) -> None:
    import sqlite3

    from tools.runtime import Runtime

    env = base_env(tmp_path / "home")
    with Runtime.load(env) as runtime:  # a writer that keeps the store open, as a server does
        runtime.lcm.ingest("agent:console:main", [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} of the talk"}
            for i in range(30)])
        db = tmp_path / "home" / "lcm.db"
        # the turns are still in the write-ahead log: the database file alone lacks them
        copied = tmp_path / "copied.db"
        copied.write_bytes(db.read_bytes())
        with sqlite3.connect(copied) as plain:
            assert "messages" not in {r[0] for r in plain.execute(
                "SELECT name FROM sqlite_master")} or plain.execute(
                "SELECT count(*) FROM messages").fetchone()[0] < 30
        out = tmp_path / "backups" / "lcm.db"
        report = amem_json(env, "lcm", "backup", str(out))
    assert isinstance(report, dict) and report["path"] == str(out)
    assert out.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(out) as backup:
        assert backup.execute("SELECT count(*) FROM messages").fetchone()[0] == 30
        assert backup.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert sorted(p.name for p in out.parent.iterdir()) == ["lcm.db"]  # one file, no -wal
    # the backup is a store: a home holding it answers from it
    restored = base_env(tmp_path / "restored")
    (tmp_path / "restored").mkdir(mode=0o700)
    (tmp_path / "restored" / "lcm.db").write_bytes(out.read_bytes())
    grep = amem_json(restored, "lcm", "grep", "turn 29", "--json")
    assert "turn 29" in json.dumps(grep)


def test_lcm_backup_of_a_store_that_is_no_file_says_what_to_do(tmp_path: Path) -> None:
    env = base_env(tmp_path / "home", LCM_DATABASE_PATH=":memory:")
    done = amem(env, "lcm", "backup", str(tmp_path / "out.db"), code=1)
    assert "not a SQLite file" in done.stderr and "pg_dump" in done.stderr
    assert not (tmp_path / "out.db").exists()
