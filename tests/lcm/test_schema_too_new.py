"""A conversation store migrated by a newer amem is refused by name, as on PostgreSQL.

Older code opened such a file silently and wrote rows without what the newer migrations
added (found by opening the stores of five older revisions with each other's code)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmStore
from lcm.errors import SchemaTooNewError


def test_a_store_with_an_unknown_migration_is_refused_by_name(
        tmp_path: Path, make_store: Callable[..., LcmStore]) -> None:
    path = str(tmp_path / "lcm.db")
    make_store(path).ingest("agent:a:main", [{"role": "user", "content": "kept"}])
    with sqlite3.connect(path) as c:  # what a later amem records when it migrates the file
        c.execute("INSERT INTO lcm_migrations VALUES ('0099_from_the_future', '2027-01-01T00:00:00Z')")
    with pytest.raises(SchemaTooNewError, match="newer amem") as caught:
        make_store(path)
    assert caught.value.unknown == ["0099_from_the_future"]
    assert caught.value.code == "schema_too_new"
    with sqlite3.connect(path) as c:  # refused before anything was written
        assert c.execute("SELECT count(*) FROM messages").fetchone() == (1,)


def test_a_store_this_code_migrated_opens_again(tmp_path: Path, make_store: Callable[..., LcmStore]) -> None:
    path = str(tmp_path / "lcm.db")
    make_store(path).ingest("agent:a:main", [{"role": "user", "content": "kept"}])
    assert make_store(path).status().messages == 1
