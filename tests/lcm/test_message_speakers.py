"""Speakers and spelled roles kept on SQLite (``speakers_case``); a store written before the
migration reads its messages without them."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore, ManualClock

from .speakers_case import (
    KEY,
    check_grep_hits_name_the_speaker,
    check_grown_window_respects_speakers,
    check_speakers_are_kept,
    check_speakers_tell_equal_messages_apart,
    check_summaries_say_who_spoke,
)


def test_speakers_and_spelled_roles_are_kept(store: LcmStore) -> None:
    check_speakers_are_kept(store)


def test_summaries_say_who_spoke(make_store: Callable[..., LcmStore]) -> None:
    check_summaries_say_who_spoke(make_store(fresh_tail_count=4, leaf_chunk_tokens=200))


def test_a_store_from_before_gets_the_columns_and_its_messages_read_as_before(
        tmp_path: Path, make_store: Callable[..., LcmStore]) -> None:
    path = str(tmp_path / "lcm.db")
    make_store(path).ingest(KEY, [{"role": "user", "content": "written before names were kept"}])
    with sqlite3.connect(path) as c:  # what migration 0014 added, taken away again
        c.execute("DELETE FROM lcm_migrations WHERE name = '0014_message_speakers'")
        c.execute("ALTER TABLE messages DROP COLUMN name")
        c.execute("ALTER TABLE messages DROP COLUMN source_role")
    again = make_store(path)
    (item,) = again.assemble(KEY, 1000).items
    assert (item.content, item.name, item.source_role) == ("written before names were kept", None, None)


def test_a_snapshot_restored_keeps_them(store: LcmStore) -> None:
    from lcm.operator.snapshot import dump_conversation, restore_snapshot

    from .speakers_case import CHAT

    store.ingest(KEY, CHAT)
    conv = store.conversation(KEY)
    assert conv is not None
    with store.db.atomic() as c:
        old, rows = dump_conversation(c, conv.id)
        restore_snapshot(c, store.files, old, rows, "agent:a1:restored", "2026-01-01T00:00:00Z")
    got = [(it.name, it.source_role) for it in store.assemble("agent:a1:restored", 10_000).items]
    assert got == [(None, "developer"), ("alice", None), ("bob", None), (None, None),
                   ("calendar_add", "function")]


def test_speakers_tell_equal_messages_apart(store: LcmStore) -> None:
    check_speakers_tell_equal_messages_apart(store)


def test_a_grown_window_respects_speakers(store: LcmStore) -> None:
    check_grown_window_respects_speakers(store)


def test_grep_hits_name_the_speaker(clock: ManualClock) -> None:
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False), clock=clock,
                  embedder=HashingEmbedder(64)) as store:
        check_grep_hits_name_the_speaker(store)
