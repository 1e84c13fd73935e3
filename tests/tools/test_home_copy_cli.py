"""A copy of a data directory (``cp -a``, a tar restored) made while ``amem serve --http``
holds the original: the copy is its own store, never routed to the original's server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tools.remote import record_path

from .test_cli_console import amem, base_env
from .test_cli_server import Server

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("record", ["as written", "written before records named their home"])
def test_a_copy_of_a_served_home_writes_to_the_copy(tmp_path: Path, record: str) -> None:
    original = base_env(tmp_path / "original")
    amem(original, "add", "a note in the original", "--no-enrich")
    server = Server(original)
    try:
        # the copy holds the server's record and the store's LOCK naming the server's pid
        shutil.copytree(tmp_path / "original", tmp_path / "copy", symlinks=True)
        copied = record_path(tmp_path / "copy")
        if record != "as written":  # a server of an older version: the lock tells them apart
            data = json.loads(copied.read_text(encoding="utf-8"))
            del data["home"]
            copied.write_text(json.dumps(data), encoding="utf-8")
        copy = base_env(tmp_path / "copy")
        added = json.loads(amem(copy, "add", "a note for the copy only", "--json").stdout)
        # it went to the server of the original (2 notes there, 1 here) before
        listed = json.loads(amem(original, "list", "--json").stdout)
        assert [n["content"] for n in listed["notes"]] == ["a note in the original"]
    finally:
        server.stop()
    mine = json.loads(amem(copy, "list", "--json").stdout)
    assert added["id"] in [n["id"] for n in mine["notes"]] and mine["count"] == 2
