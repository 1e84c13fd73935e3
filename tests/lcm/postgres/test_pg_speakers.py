"""Speakers and spelled roles kept on PostgreSQL as on SQLite (``speakers_case``), and carried
by ``amem lcm migrate``'s copy."""

from __future__ import annotations

from collections.abc import Callable

from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore, ManualClock
from lcm.pg.copy import copy_sqlite_to_postgres
from lcm.pg.db import PgDatabase

from ..speakers_case import (
    CHAT,
    KEY,
    check_grep_hits_name_the_speaker,
    check_grown_window_respects_speakers,
    check_speakers_are_kept,
    check_speakers_tell_equal_messages_apart,
    check_summaries_say_who_spoke,
)


def test_speakers_and_spelled_roles_are_kept(make_pg_store: Callable[..., LcmStore]) -> None:
    check_speakers_are_kept(make_pg_store())


def test_summaries_say_who_spoke(make_pg_store: Callable[..., LcmStore]) -> None:
    check_summaries_say_who_spoke(make_pg_store(fresh_tail_count=4, leaf_chunk_tokens=200))


def test_speakers_tell_equal_messages_apart(make_pg_store: Callable[..., LcmStore]) -> None:
    check_speakers_tell_equal_messages_apart(make_pg_store())


def test_a_grown_window_respects_speakers(make_pg_store: Callable[..., LcmStore]) -> None:
    check_grown_window_respects_speakers(make_pg_store())


def test_grep_hits_name_the_speaker(pg_clean_url: str, clock: ManualClock) -> None:
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False), clock=clock,
                  embedder=HashingEmbedder(64)) as store:
        check_grep_hits_name_the_speaker(store)


def test_the_copy_to_postgresql_keeps_them(make_store: Callable[..., LcmStore], pg_clean_url: str) -> None:
    lite = make_store()
    lite.ingest(KEY, CHAT)
    dst = PgDatabase(pg_clean_url)
    try:
        copy_sqlite_to_postgres(lite.db, dst)
    finally:
        dst.close()
    with LcmStore(pg_clean_url) as pg:
        got = [(it.name, it.source_role) for it in pg.assemble(KEY, 10_000).items]
    assert got == [(None, "developer"), ("alice", None), ("bob", None), (None, None),
                   ("calendar_add", "function")]
