"""``amem restore DIR --merge`` killed at several points, then run again, leaves what one
uninterrupted run leaves: every note and message of both homes, none twice, in time order.

The fault points are the restore process's own events: the installed ``amem`` script runs with
a ``sitecustomize`` on its ``PYTHONPATH`` that adds a Python audit hook (PEP 578,
``sys.addaudithook``) and exits the process (``os._exit``: no close, no flush, as a kill) at the
Nth event of a kind it is told. No code of the restore is replaced or waited on by time: the
hook only watches what the process does. The points:

- the note store's metadata written (``meta.json`` renamed into place) after the notes: the
  conversations committed (restore writes them first), the notes written, their store's record not;
- a large file about to be renamed into this home's ``lcm-files`` inside the merge's
  transaction (its ``.tmp`` written): no committed row;
- ``lcm.merge.conversation``, the merge's own audit event: the conversation's messages
  inserted and renumbered by time, not committed, no note written yet, its large file written
  whole (after the rerun ``amem lcm doctor --clean`` lists that copy as an orphan file);
- ``keys.json`` renamed into place: the conversations committed, the keys not yet.

A kill inside a batch of the note engine's writes is the engine kill tests' (the notes'
writes run in the engine, where no Python event marks them: tests/amem/store/*_kill.py).
Each child must die at its point (exit 9: the point was reached); the rerun is in process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmStore
from lcm.config import LcmConfig
from tools.cli.main import main
from tools.keys import KeyStore

from .test_cli_console import AMEM, ROOT
from .test_restore_merge import AGENT, env_for, fill, quiet

#: the child's ``sitecustomize``: exits at the ``KILL_AT``-th ``KILL_EVENT`` whose arguments
#: name ``KILL_MATCH``; inert without ``KILL_EVENT``
HOOK = '''
import os, sys
_event, _match = os.environ.get("KILL_EVENT"), os.environ.get("KILL_MATCH", "")
_left = [int(os.environ.get("KILL_AT", "1"))]
def _hook(event, args):
    if event == _event and _match in repr(args):
        _left[0] -= 1
        if _left[0] == 0:
            os._exit(9)
if _event:
    sys.addaudithook(_hook)
'''

BIG = "a pasted build log line with numbers 31337 and words\n" * 2_500  # a large file
#: (why, audit event, what its arguments name, which one)
POINTS = [("notes written, their store's record not", "os.rename", "meta.json", 1),
          ("a large file written in the merge's transaction", "os.rename", "lcm-files", 1),
          ("messages inserted and reordered, not committed", "lcm.merge.conversation", "", 1),
          ("conversations committed, keys not", "os.rename", "keys.json", 1)]


#: a message's text as compared: a large file's reference (a random file id) as "file"
TEXT = "CASE WHEN file_id IS NULL THEN content ELSE 'file' END"


def _at(minute: int) -> str:
    return f"2026-01-05T10:{minute:02d}:00.000Z"


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the backup, a home in use) made once; each run works on a copy of the home."""
    tmp = tmp_path_factory.mktemp("kill")
    old = env_for(tmp / "old")
    kept: list[dict[str, object]] = [
        {"role": "user", "content": f"old {m}", "event_id": f"o{m}", "created_at": _at(m)}
        for m in (1, 3, 5)]
    kept.append({"role": "user", "content": BIG, "event_id": "big", "created_at": _at(7)})
    fill(old, tmp / "o", [{"id": f"o{i}", "text": f"old fact {i}: the red door {i} is locked"}
                          for i in range(12)], kept)
    quiet(old, "keys", "add", "--agent", "bob")
    quiet(old, "backup", str(tmp / "bk"))
    new = env_for(tmp / "new")
    said: list[dict[str, object]] = [{"role": "user", "content": f"new {m}", "created_at": _at(m)}
                                     for m in (2, 4, 6)]
    fill(new, tmp / "n", [{"id": "o1", "text": "old fact 1: the red door 1 is locked"},
                          {"id": "n1", "text": "Carol walks to work"}], said)
    return tmp / "bk", tmp / "new"


def _restore(home: Path, bk: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["restore", str(bk), "--merge", "--json"], env=env_for(home)) == 0


def _state(home: Path) -> dict[str, Any]:
    """What a user reads back: notes, conversations in order (messages and context), large
    files' texts, keys."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["export", "-"], env=env_for(home)) == 0
    notes = sorted((r["note"]["agent_id"], r["note"]["id"], r["note"]["content"])
                   for r in map(json.loads, out.getvalue().splitlines()))
    with contextlib.closing(sqlite3.connect(home / "lcm.db")) as c:
        convs = []
        for cid, key, active in c.execute("SELECT id, session_key, active FROM conversations "
                                          "ORDER BY session_key, created_at").fetchall():
            # a large file's message holds a reference naming the file's random id: compared
            # by the file's text below
            said = c.execute(f"SELECT role, {TEXT}, created_at, file_id IS NOT NULL FROM messages "
                             "WHERE conversation_id = ? ORDER BY seq", (cid,)).fetchall()
            context = [r[0] for r in c.execute(
                f"SELECT coalesce({TEXT}, ci.summary_id) FROM context_items ci LEFT JOIN messages m "
                "ON m.id = ci.message_id WHERE ci.conversation_id = ? ORDER BY ci.ordinal", (cid,))]
            convs.append((key, active, said, context))
        named = sorted(r[0] for r in c.execute("SELECT storage_path FROM large_files"))
    files = [(home / "lcm-files" / p).read_text(encoding="utf-8") for p in named]
    keys = sorted(k.id for k in KeyStore(home / "keys.json").list()) if (
        home / "keys.json").exists() else []
    return {"notes": notes, "conversations": convs, "files": files, "keys": keys}


@pytest.mark.slow
def test_a_killed_merge_run_again_leaves_what_one_run_leaves(
        homes: tuple[Path, Path], tmp_path: Path) -> None:
    bk, home = homes
    whole = tmp_path / "whole"
    shutil.copytree(home, whole, symlinks=True)
    _restore(whole, bk)
    expected = _state(whole)
    (conv,) = expected["conversations"]
    assert [m[1] for m in conv[2][:-1]] == ["old 1", "new 2", "old 3", "new 4", "old 5", "new 6"]
    assert conv[2][-1][3] == 1 and expected["files"] == [BIG]  # the last one, a large file
    assert len(expected["notes"]) == 13 and len(expected["keys"]) == 1

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    for n, (why, event, match, at) in enumerate(POINTS):
        run = tmp_path / f"run{n}"
        shutil.copytree(home, run, symlinks=True)
        env = env_for(run, KILL_EVENT=event, KILL_MATCH=match, KILL_AT=str(at))
        env["PYTHONPATH"] = f"{hook}{os.pathsep}{env['PYTHONPATH']}"
        done = subprocess.run([str(AMEM), "restore", str(bk), "--merge", "--json"], env=env,
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 9, (why, done.returncode, done.stdout, done.stderr)
        _restore(run, bk)
        assert _state(run) == expected, why
        with LcmStore(run / "lcm.db", LcmConfig(log_file_enabled=False,
                                                large_files_dir=str(run / "lcm-files"))) as lcm:
            orphans = lcm.doctor_clean().orphan_files
        # the file the killed transaction wrote whole is named by no row: the doctor lists it
        # (killed at the rename, only its ".tmp" was left: tests/lcm/test_leftover_files.py)
        assert len(orphans) == (1 if event == "lcm.merge.conversation" else 0), (why, orphans)
