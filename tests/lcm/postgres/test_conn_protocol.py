"""Both engines' connections satisfy lcm.conn.Connection, the type of lcm's shared SQL functions
(mypy checks the assignments below statically; the asserts check the same at run time)."""

from __future__ import annotations

import sqlite3

from lcm import LcmConfig, LcmStore
from lcm.conn import Connection, Cursor, Row
from lcm.db import Database
from lcm.migrations import migrate
from lcm.pg.db import PgDatabase
from lcm.sessions import find_active, resolve_conversation


def _shared(c: Connection) -> tuple[int, Row | None]:
    conv_id, created, _ = resolve_conversation(c, "agent:a:main", None, "2026-12-01T00:00:00.000Z")
    assert created
    cur: Cursor = c.execute("SELECT id, session_key FROM conversations WHERE id = ?", (conv_id,))
    row = cur.fetchone()
    assert (row[0], row["session_key"], row.keys()) == (conv_id, "agent:a:main", ["id", "session_key"])
    return conv_id, find_active(c, "agent:a:main", None)


def test_sqlite_and_postgres_connections_run_the_shared_functions(pg_clean_url: str) -> None:
    lite = Database(":memory:")
    migrate(lite, "2026-12-01T00:00:00.000Z")
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as pg_store:
        pg: PgDatabase = pg_store.db  # type: ignore[assignment]
        found = []
        for handle in (lite, pg):
            with handle.atomic() as c:
                assert isinstance(c, Connection) and isinstance(c.execute("SELECT 1"), Cursor)
                found.append(_shared(c))
        assert [cid for cid, _ in found] == [1, 1]
        assert all(row is not None and row["session_key"] == "agent:a:main" for _, row in found)
    lite.close()
    assert isinstance(sqlite3.connect(":memory:"), Connection)
