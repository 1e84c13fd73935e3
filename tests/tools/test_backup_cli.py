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
