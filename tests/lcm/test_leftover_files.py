"""A large-file write killed at its rename leaves a ``.tmp`` that no row names: the doctor
names it once it is old and no writer holds it, and ``doctor_clean(apply=True)`` deletes it."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lcm import LcmStore
from lcm.largefiles import LEFTOVER_AGE_S
from lcm.models import FileDescription

KEY = "agent:main:main"
BIG = "\n".join(f"row {i}: value={i * 7} status=ok" for i in range(1000))


def _aged(path: Path, seconds: float) -> Path:
    """``path`` with its modification time ``seconds`` in the past (a write that long ago)."""
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_the_doctor_names_an_old_leftover_and_clean_apply_removes_only_it(
        make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_store(str(tmp_path / "lcm.db"), large_file_threshold_tokens=1000)
    stored = store.ingest(KEY, [{"role": "tool", "content": BIG, "name": "dump.log"}]).file_ids
    files = tmp_path / "lcm-files"
    (recorded,) = [p for p in files.rglob("file_*") if p.is_file()]
    conv = files / recorded.parent.name
    # a write killed at its rename, long ago; one under way now; one old but still being
    # written (a slow disk, a stopped writer): its writer holds the lock
    killed = conv / "file_00000000000000aa.txt.tmp"
    killed.write_text("half")
    _aged(killed, LEFTOVER_AGE_S + 60)
    young = conv / "file_00000000000000bb.txt.tmp"
    young.write_text("now")
    held = conv / "file_00000000000000cc.txt.tmp"
    held.write_text("slow")
    _aged(held, LEFTOVER_AGE_S + 60)
    writer = os.open(held, os.O_WRONLY)
    try:
        fcntl.flock(writer, fcntl.LOCK_EX)
        report = store.doctor()
        found = [i for i in report.issues if i.check == "leftover_temp_files"]
        assert [(i.severity, i.id) for i in found] == [("warning", f"{conv.name}/{killed.name}")]
        assert "killed" in found[0].detail and "--clean --apply" in found[0].detail
        assert report.ok  # nothing stored is lost: not damage
        dry = store.doctor_clean()
        assert dry.leftover_files == [f"{conv.name}/{killed.name}"] and dry.removed_files == []
        assert killed.exists()  # a report first
        done = store.doctor_clean(apply=True)
        assert done.removed_files == [f"{conv.name}/{killed.name}"]
    finally:
        os.close(writer)
    assert not killed.exists() and young.exists() and held.exists() and recorded.exists()
    # its writer gone (a process stopped for good), the old one held is a leftover too
    assert store.doctor_clean().leftover_files == [f"{conv.name}/{held.name}"]
    kept = store.describe(stored[0], offset=0, limit=10)  # the recorded file still reads
    assert isinstance(kept, FileDescription) and kept.slice_text == BIG[:10]


def test_a_large_file_is_locked_while_it_is_written_and_renamed(
        make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    # the doctor must never take a file being written for a leftover, however slow the write
    from amem.kernel.files import flock_held

    seen: list[bool] = []
    watching: list[bool] = []

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if watching and event == "os.rename" and str(args[0]).endswith(".tmp"):
            seen.append(flock_held(Path(args[0])))

    sys.addaudithook(hook)  # audit hooks cannot be removed: this one only looks while asked
    store = make_store(str(tmp_path / "lcm.db"), large_file_threshold_tokens=1000)
    watching.append(True)
    try:
        store.ingest(KEY, [{"role": "tool", "content": BIG, "name": "dump.log"}])
    finally:
        watching.clear()
    assert seen == [True]
