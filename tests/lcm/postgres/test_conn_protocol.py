"""Both engines' connections and handles satisfy lcm.conn's Connection and Handle, the types of
lcm's shared parts (mypy checks the assignments below statically; the asserts at run time)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from lcm import LcmConfig, LcmStore
from lcm.conn import Connection, Cursor, Handle, Row
from lcm.db import Database
from lcm.largefiles import LargeFileStore
from lcm.migrations import migrate
from lcm.errors import UnsupportedOnEngineError
from lcm.failures import record_failure
from lcm.ops import status
from lcm.search import grep
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
        handles: list[Handle] = [lite, pg]
        for handle in handles:
            assert isinstance(handle, Handle)
            with handle.atomic() as c:
                assert isinstance(c, Connection) and isinstance(c.execute("SELECT 1"), Cursor)
                found.append(_shared(c))
        assert [cid for cid, _ in found] == [1, 1]
        assert all(row is not None and row["session_key"] == "agent:a:main" for _, row in found)
    lite.close()
    assert isinstance(sqlite3.connect(":memory:"), Connection)


def test_sqlite_defaults_refuse_another_engine_by_name(pg_clean_url: str, tmp_path: Path) -> None:
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as store:
        # the file size and migration records are SQLite's: PostgreSQL must pass its own
        with pytest.raises(UnsupportedOnEngineError, match="status without size_bytes is SQLite's own step") as err:
            status(store.db, LargeFileStore(tmp_path))
        assert err.value.engine == "postgresql"
        with pytest.raises(UnsupportedOnEngineError, match="grep over FTS5"):
            grep(store.db, store.config, "x", mode="full_text", scope="both", conv_ids=None, since=None,
                 before=None, limit=5, sort="recency")
        assert status(store.db, LargeFileStore(tmp_path), size_bytes=1, migrations=[]).size_bytes == 1


def test_recording_a_failure_on_a_read_only_server_warns_and_goes_on(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with LcmStore(pg_url, LcmConfig(log_file_enabled=False)) as store:
        name = pg_url.rsplit("/", 1)[1]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = current_database() AND pid <> pg_backend_pid()")  # fmt: skip
        # the pool's connections were ended: new ones are read-only; the record is lost, said, not raised
        record_failure(store.db, "2026-12-01T00:00:00.000Z", "compaction", "the summarizer timed out")
        assert "cannot record a compaction failure" in caplog.text
        assert store.db.errors[0] is psycopg.Error and Database(":memory:").errors == (sqlite3.Error,)


def test_postgres_runs_literal_percent_signs_and_many_parameters(pg_clean_url: str) -> None:
    # statements go to the server with $n markers (lcm.pg.db._numbered): a literal % stays one,
    # a ? inside a string literal stays text, and 200 parameters bind in order
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as store, store.db.reading() as c:
        row = c.execute("SELECT '100%' || ?, 'a?b' LIKE 'a%', 5 % 3, ?::int + 1", ("!", 41)).fetchone()
        assert tuple(row) == ("100%!", True, 2, 42)
        values = ",".join(["(?::int)"] * 200)
        got = c.execute(f"SELECT sum(v) FROM (VALUES {values}) t(v)", list(range(200))).fetchone()
        assert got[0] == sum(range(200))


def test_postgres_rows_read_like_sqlite_rows(pg_clean_url: str) -> None:
    # a row class per column list (lcm.pg.db.row_class): read by name, by position, by slice and
    # by unpacking as sqlite3.Row reads (a repeated name reads its first column, as there), and the
    # rows of one column list share one class without a __dict__ each
    sql = "SELECT 1 AS a, 'x' AS b, 3 AS a UNION ALL SELECT 4, 'y', 6"
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as store, store.db.reading() as c:
        first, second = c.execute(sql).fetchall()
        again = c.execute(sql).fetchone()
    lite = sqlite3.connect(":memory:")
    lite.row_factory = sqlite3.Row
    expected = lite.execute(sql).fetchall()
    for row, want in ((first, expected[0]), (second, expected[1])):
        assert (row["a"], row["b"], row[0], row[-1], row[1:]) == (want["a"], want["b"], want[0], want[-1], want[1:])
        assert list(row) == list(want) and row.keys() == want.keys() == ["a", "b", "a"]
    a, b, c3 = second
    assert (a, b, c3) == (4, "y", 6)
    assert type(first) is type(second) is type(again) and not hasattr(first, "__dict__")
    with pytest.raises(KeyError):
        first["missing"]
