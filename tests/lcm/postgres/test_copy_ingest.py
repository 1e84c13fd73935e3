"""Ingest's COPY path on PostgreSQL: the same rows as the INSERT path, and a dropped connection mid-COPY stores nothing."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import LcmValidationError, StoreUnavailableError
from lcm.pg.db import PgDatabase
from lcm.pg.store import PgLcmStore

from ..conftest import chat

KEY = "agent:main:s"
_DUMP = {"messages": "SELECT seq, role, content, token_count, identity_hash, stable_event_key, file_id, created_at, "
                     "CASE WHEN file_id IS NULL THEN words::text END FROM messages ORDER BY seq",  # the file id is in its words
         "context_items": "SELECT ordinal, item_type, message_id - (SELECT min(id) FROM messages), summary_id "
                          "FROM context_items ORDER BY ordinal",
         "large_files": "SELECT file_id, name, mime_type, size_bytes, token_count, exploration_summary, created_at "
                        "FROM large_files ORDER BY file_id"}  # fmt: skip


class _InsertingStore(PgLcmStore):
    _copy_ingest = False


def _dump(store: LcmStore) -> dict[str, list[tuple[object, ...]]]:
    # a large file's id is random: the same placeholder in both stores
    def same(v: object) -> object:
        return re.sub(r"file_[0-9a-f]{16}", "file_ID", v) if isinstance(v, str) else v

    return {table: [tuple(same(v) for v in r) for r in store.db.query(sql)] for table, sql in _DUMP.items()}


def test_copy_and_insert_store_the_same_rows(pg_url: str, pg_clean_url: str, clock: ManualClock, tmp_path: Path) -> None:
    payload = "\n".join(f"row {i}: value={i * 7}" for i in range(2000))
    batch = [*chat(5), {"role": "tool", "content": payload, "name": "dump.log"},
             {"role": "user", "content": "空 \\N \t tab, newline\nand a backslash \\", "event_id": "e-1"},
             {"role": "assistant", "content": "", "responseId": "r-1"}]  # fmt: skip
    cfg = LcmConfig(large_file_threshold_tokens=1000, large_files_dir=str(tmp_path / "files"), log_file_enabled=False)
    dumps = []
    for cls, url in ((PgLcmStore, pg_clean_url), (_InsertingStore, pg_url)):
        with cls(url, cfg, clock=clock) as store:
            first = store.ingest(KEY, batch)
            again = store.ingest(KEY, [*batch[6:], *chat(2, start=5)])  # the re-sent keyed ones are skipped
            assert (first.stored, again.stored, again.skipped_duplicates) == (8, 2, 2)
            dumps.append(_dump(store))
    assert dumps[0] == dumps[1]
    assert len(dumps[0]["messages"]) == 10 and len(dumps[0]["large_files"]) == 1
    assert dumps[0]["messages"][6][2] == batch[6]["content"]  # COPY's escapes round-trip


def test_a_connection_dropped_mid_copy_stores_nothing(pg_clean_url: str) -> None:
    store = LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False))
    try:
        store.ingest(KEY, chat(2))
        db: PgDatabase = store.db  # type: ignore[assignment]
        with pytest.raises(StoreUnavailableError, match="dropped the connection"):
            with db.atomic() as c:
                c.copy_rows("conversations", ("session_key", "active", "created_at", "updated_at"),
                            [("half", 1, "x", "x")])  # fmt: skip
                with psycopg.connect(pg_clean_url, autocommit=True) as killer:
                    killer.execute("SELECT pg_terminate_backend(%s)", [c.raw.info.backend_pid])
                c.copy_rows("conversations", ("session_key", "active", "created_at", "updated_at"),
                            [("half2", 1, "x", "x")])  # fmt: skip
        assert store.conversation("half") is None and store.conversation("half2") is None
        assert store.ingest(KEY, chat(2, start=2)).stored == 2
    finally:
        store.close()


def test_copy_rows_refuses_what_it_cannot_send(pg_clean_url: str) -> None:
    db = PgDatabase(pg_clean_url)
    try:
        with db.atomic() as c:
            with pytest.raises(ValueError, match="not a plain SQL name"):
                c.copy_rows("messages; DROP TABLE messages", ("id",), [])
            with pytest.raises(ValueError, match="not a plain SQL name"):
                c.copy_rows("conversations", ("session_key) FROM PROGRAM 'x' --",), [])
            with pytest.raises(LcmValidationError, match="NUL"):
                c.copy_rows("conversations", ("session_key", "active", "created_at", "updated_at"),
                            [("a\x00b", 1, "x", "x")])  # fmt: skip
        assert db.scalar("SELECT count(*) FROM conversations") == 0
    finally:
        db.close()
