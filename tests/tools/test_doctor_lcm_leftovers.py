"""``amem doctor`` names the ``.tmp`` files that large-file writes killed at their rename left
in the conversation store's file directory, and ``--fix`` deletes them through lcm's own clean
(``LcmStore.doctor_clean(apply=True)``): one that is young or that a writer holds stays."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from lcm.largefiles import LEFTOVER_AGE_S
from tools.cli import main


def _doctor(capsys: pytest.CaptureFixture[str], env: dict[str, str], *flags: str) -> dict[str, Any]:
    code = main(["doctor", *flags, "--json"], env=env)
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert isinstance(data, dict)
    return data


def _tmp(directory: Path, name: str, age_s: float) -> Path:
    path = directory / name
    path.write_text("half a payload")
    path.chmod(0o600)  # as lcm writes it: a wide file would be a finding of its own
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_amem_doctor_names_lcm_leftovers_and_fix_removes_only_the_safe_ones(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": "default"}
    conv = home / "lcm-files" / "c1"
    conv.mkdir(parents=True, mode=0o700)
    for level in (home, home / "lcm-files"):
        level.chmod(0o700)
    killed = _tmp(conv, "file_00000000000000aa.txt.tmp", LEFTOVER_AGE_S + 60)
    young = _tmp(conv, "file_00000000000000bb.txt.tmp", 5)  # a write under way now
    held = _tmp(conv, "file_00000000000000cc.txt.tmp", LEFTOVER_AGE_S + 60)
    writer = os.open(held, os.O_WRONLY)  # a slow write: its writer holds the lock
    try:
        fcntl.flock(writer, fcntl.LOCK_EX)
        report = _doctor(capsys, env)
        said = [w for w in report["warnings"] if "leftover" in w]
        assert len(said) == 1, report["warnings"]
        assert "c1/" + killed.name in said[0] and "`amem doctor --fix`" in said[0]
        assert young.name not in said[0] and held.name not in said[0]
        assert report["ok"] is True  # nothing stored is lost: not damage
        assert killed.exists()  # a report deletes nothing

        fixed = _doctor(capsys, env, "--fix")
        assert fixed["lcm_leftovers_removed"] == ["c1/" + killed.name]
        assert not [w for w in fixed["warnings"] if "leftover" in w]
    finally:
        os.close(writer)
    assert not killed.exists() and young.exists() and held.exists()
