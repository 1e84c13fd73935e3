"""lcm on PostgreSQL: opening, migrations, errors, ingest idempotency and the unported surface."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import LargeFilesDirMissingError, LcmValidationError, ReplayFloodError, SchemaTooNewError, StoreUnavailableError, UnsupportedOnEngineError
from lcm.migrations import MIGRATIONS
from lcm.pg.db import PgDatabase, translate
from lcm.pg.schema import PG_MIGRATIONS
from lcm.pg.store import PORTED, PgLcmStore
from tests.pgcluster import PgCluster

from ..conftest import chat

KEY = "agent:main:chat"


def count(store: LcmStore, table: str) -> int:
    return int(store.db.scalar(f"SELECT count(*) FROM {table}"))


def test_one_registry_two_dialects() -> None:
    # a SQLite migration without its PostgreSQL twin (or out of order) fails here
    assert list(PG_MIGRATIONS) == list(MIGRATIONS)


def test_translate_the_shared_dialect() -> None:
    assert translate("SELECT a FROM t WHERE b = ? AND c LIKE '50%?'") == "SELECT a FROM t WHERE b = %s AND c LIKE '50%%?'"
    assert translate("INSERT OR IGNORE INTO x(a) VALUES (?)") == "INSERT INTO x(a) VALUES (%s) ON CONFLICT DO NOTHING"
    assert translate("SELECT v.s || char(127)") == "SELECT v.s || chr(127)"
    assert translate("SELECT * FROM t WHERE 1 AND a = ?") == "SELECT * FROM t WHERE TRUE AND a = %s"
    assert translate("SELECT instr(content, ?)") == "SELECT strpos(content, %s)"
    for sqlite_only in ("INSERT OR REPLACE INTO x VALUES (1)", "PRAGMA foo", "SELECT 1 FROM f WHERE f MATCH ?"):
        with pytest.raises(UnsupportedOnEngineError):
            translate(sqlite_only)


def test_url_opens_postgres_and_migrates_once(pg_url: str, clock: ManualClock) -> None:
    with LcmStore(pg_url, clock=clock) as store:
        assert isinstance(store, PgLcmStore)
        names = [r[0] for r in store.db.query("SELECT name FROM lcm_migrations ORDER BY seq")]
        assert names == list(MIGRATIONS)
        store.ingest(KEY, chat(3))
        report = store.status()
        assert report.migrations == list(MIGRATIONS) and report.messages == 3 and report.size_bytes > 0
        assert report.embedding is not None and report.embedding.model_id is None  # opened without an embedder
    with LcmStore(config=LcmConfig(database_path=pg_url), clock=clock) as again:  # config path too
        assert count(again, "lcm_migrations") == len(MIGRATIONS)


def test_a_url_no_engine_serves_is_refused_not_opened_as_a_file() -> None:
    # lcm.store knows the engines only through their registration (no import of lcm.pg: no cycle)
    assert LcmStore._engines["postgresql"] is PgLcmStore and LcmStore._engines["postgres"] is PgLcmStore
    with pytest.raises(ValueError, match=r"no lcm engine serves mysql:// URLs \(known: postgres, postgresql\)"):
        LcmStore("mysql://user@host/db")
    with pytest.raises(ValueError, match="mysql://"):
        LcmStore(config=LcmConfig(database_path="mysql://user@host/db"))


def test_schema_newer_than_the_code_is_refused(pg_url: str, clock: ManualClock) -> None:
    LcmStore(pg_url, clock=clock).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO lcm_migrations(name, applied_at) VALUES ('9999_from_the_future', 'x')")
    with pytest.raises(SchemaTooNewError) as err:
        LcmStore(pg_url, clock=clock)
    assert err.value.unknown == ["9999_from_the_future"] and err.value.code == "schema_too_new"


def test_server_down_is_a_clear_error_without_the_password() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreUnavailableError, match=r"cannot reach the PostgreSQL server at postgresql://u:\*\*\*@") as err:
        PgDatabase(f"postgresql://u:secret@127.0.0.1:{port}/x", connect_timeout_s=0.2)
    assert "secret" not in str(err.value) and err.value.code == "store_unavailable"


def test_every_unported_method_names_itself(make_pg_store: Callable[..., LcmStore]) -> None:
    store = make_pg_store()
    public = [n for n in dir(LcmStore) if not n.startswith("_") and callable(getattr(LcmStore, n))]
    assert PORTED <= set(public)
    for name in sorted(set(public) - PORTED):
        with pytest.raises(UnsupportedOnEngineError) as err:
            getattr(store, name)("agent:main:chat")
        assert err.value.operation == name and err.value.code == "unsupported_on_engine"


def test_resending_dedupes_and_replay_floods_are_refused(make_pg_store: Callable[..., LcmStore]) -> None:
    store = make_pg_store()
    assert store.ingest(KEY, chat(10)).stored == 10
    again = store.ingest(KEY, chat(10))
    assert (again.stored, again.skipped_duplicates) == (0, 10)
    overlap = store.ingest(KEY, chat(6, start=6))
    assert (overlap.stored, overlap.skipped_duplicates) == (2, 4)
    keyed = [{"role": "assistant", "content": "v1", "response_id": "r1"},
             {"role": "user", "content": "hello", "created_at": "2025-02-01T10:00:00Z"}]  # fmt: skip
    assert store.ingest(KEY, keyed).stored == 2
    resent = [{"role": "assistant", "content": "v1 [redacted]", "responseId": "r1"},
              {"role": "user", "content": "hello", "created_at": "2025-02-01T10:00:00+00:00"}]  # fmt: skip
    assert store.ingest(KEY, resent).stored == 0
    with pytest.raises(ReplayFloodError):
        store.ingest(KEY, [{"role": "user", "content": "buy now"}] * 4)
    assert count(store, "messages") == 14 == count(store, "context_items")
    seqs = [r[0] for r in store.db.query("SELECT seq FROM messages ORDER BY seq")]
    assert seqs == list(range(1, 15))


def test_a_dropped_connection_mid_batch_stores_nothing(make_pg_store: Callable[..., LcmStore], pg_clean_url: str) -> None:
    store = make_pg_store()
    store.ingest(KEY, chat(2))
    with pytest.raises(StoreUnavailableError, match="dropped the connection"):
        with store.db.atomic() as c:
            c.execute("INSERT INTO conversations(session_key, active, created_at, updated_at) VALUES ('half', 1, 'x', 'x')")
            pid = c.raw.info.backend_pid  # type: ignore[attr-defined]  # store.db is a PgDatabase here
            with psycopg.connect(pg_clean_url, autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", [pid])
            c.execute("SELECT 1")
    assert store.conversation("half") is None
    assert store.ingest(KEY, chat(2, start=2)).stored == 2  # the pool hands out a live connection


def test_a_nul_character_is_refused_by_name_and_stores_nothing(make_pg_store: Callable[..., LcmStore]) -> None:
    # SQLite keeps U+0000; PostgreSQL text cannot: a clear refusal instead of a driver error
    store = make_pg_store()
    with pytest.raises(LcmValidationError) as err:
        store.ingest(KEY, [{"role": "user", "content": "fine"}, {"role": "user", "content": "a\x00b"}])
    assert err.value.field == "messages[1]"
    with pytest.raises(LcmValidationError) as err:
        store.ingest("agent:\x00", chat(1))
    assert err.value.field == "session_key"
    with pytest.raises(LcmValidationError, match="NUL"):
        store.grep("x", session_key="agent:\x00:main")
    assert count(store, "messages") == 0 and store.conversations() == []


def test_large_payloads_go_to_the_shared_directory_and_grep_reads_them(make_pg_store: Callable[..., LcmStore],
                                                                       tmp_path: Path) -> None:
    payload = "\n".join(f"row {i}: value={i * 7}" for i in range(2000)) + "\nFATAL: disk /dev/sda1 full"
    bare = make_pg_store(large_file_threshold_tokens=1000)
    with pytest.raises(LargeFilesDirMissingError, match="set largeFilesDir"):  # no directory every host shares
        bare.ingest(KEY, [{"role": "tool", "content": payload}])
    store = make_pg_store(large_file_threshold_tokens=1000, large_files_dir=str(tmp_path / "shared"))
    fid = store.ingest(KEY, [{"role": "tool", "content": payload, "name": "dump.log"}]).file_ids[0]
    hits = store.grep("FATAL: disk", mode="full_text", scope="files", session_key=KEY).hits
    assert [h.id for h in hits] == [fid] and "sda1" in hits[0].snippet
    assert store.grep("FATAL", scope="files", session_key="agent:other:chat").hits == []  # another family
