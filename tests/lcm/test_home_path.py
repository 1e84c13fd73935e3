"""``~`` in an lcm path is the home directory, as in amem (sqlite would make a ``./~`` folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcm import LcmStore
from lcm.config import load_config


def test_tilde_paths_expand_to_the_home_directory(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    cfg = load_config(None, env={}, overrides={"largeFilesDir": "~/lcm-big"})
    with LcmStore("~/data/lcm.db", config=cfg) as store:
        store.ingest("agent:a:main", [{"role": "user", "content": "hello"}])
        assert store.db.path == str(home / "data" / "lcm.db")
        assert store.files.base_dir == home / "lcm-big"
    assert (home / "data" / "lcm.db").is_file()
    assert not (work / "~").exists()
