"""``Database.snapshot``: one read transaction that other writers do not disturb (what
``amem lcm migrate`` reads its source in)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmStore

from .conftest import chat

KEY = "agent:main:chat"


def test_a_snapshot_reads_the_state_at_its_start_while_another_handle_writes(
        make_store: Callable[..., LcmStore], open_again: Callable[[LcmStore], LcmStore], tmp_path: Path) -> None:
    reader = make_store(str(tmp_path / "lcm.db"))
    writer = open_again(reader)
    writer.ingest(KEY, chat(4))
    with reader.db.snapshot() as c:
        assert c.execute("SELECT count(*) FROM messages").fetchone()[0] == 4
        writer.ingest(KEY, chat(4, start=4))  # another connection commits meanwhile (WAL: not blocked)
        assert c.execute("SELECT count(*) FROM messages").fetchone()[0] == 4
        assert c.execute("SELECT count(*) FROM context_items").fetchone()[0] == 4
    assert reader.db.scalar("SELECT count(*) FROM messages") == 8


def test_a_snapshot_cannot_start_inside_a_write(store: LcmStore) -> None:
    with store.db.atomic(), pytest.raises(sqlite3.ProgrammingError, match="inside a write transaction"):
        with store.db.snapshot():
            pass
