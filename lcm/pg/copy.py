"""Copy a SQLite lcm store into an empty PostgreSQL database, rows and ids unchanged, in one transaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from lcm.conn import Handle
from lcm.db import sqlite_only
from lcm.errors import LcmValidationError
from lcm.pg.db import PgDatabase
from lcm.pg.schema import migrate_pg
from lcm.timeutil import iso

__all__ = ["CopyReport", "copy_sqlite_to_postgres", "COPIED_TABLES"]

#: every table of lcm's data, parents before children (the foreign keys are checked per row)
COPIED_TABLES = (
    "conversations", "messages", "summaries", "summary_messages", "summary_parents", "context_items",
    "large_files", "compaction_debt", "lcm_failures", "lcm_time_order", "lcm_embedder",
    "message_vectors", "summary_vectors",
)  # fmt: skip
#: identity columns whose sequence must continue after the copied ids
_SEQUENCES = {"conversations": "id", "messages": "id", "summaries": "pk", "lcm_failures": "id"}
_CHUNK = 1000


@dataclass(frozen=True)
class CopyReport:
    """What was copied: rows per table, and where from and to (the URL without its password)."""

    source: str
    destination: str
    rows: dict[str, int] = field(default_factory=dict)


def copy_sqlite_to_postgres(source_handle: Handle, destination: PgDatabase) -> CopyReport:
    """Copy every lcm row of ``source`` (a migrated SQLite store) into ``destination``.

    The destination is migrated first and must hold no conversation: merging two histories
    would renumber ids that summaries, context items and vectors refer to. The copy is one
    transaction, so an interrupted copy leaves the destination empty, never half-filled.
    Large files stay where they are: point ``largeFilesDir`` of every host at that directory.

    Raises:
        LcmValidationError: the destination already holds conversations (``field="destination"``).
        UnsupportedOnEngineError: ``source_handle`` is not a SQLite store's.
    """
    source = sqlite_only(source_handle, "copy from a SQLite store")  # it reads PRAGMA table_info
    migrate_pg(destination, iso(datetime.now(timezone.utc)))
    rows: dict[str, int] = {}
    with destination.atomic() as dst:
        if dst.execute("SELECT 1 FROM conversations LIMIT 1").fetchone() is not None:
            raise LcmValidationError(
                f"the PostgreSQL database at {destination.path} already holds conversations; "
                "copy into an empty database", field="destination")  # fmt: skip
        for table in COPIED_TABLES:
            with source.reading() as src:
                cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
            wanted = {r[0] for r in dst.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = ?", (table,)).fetchall()}  # fmt: skip
            missing = [c for c in cols if c not in wanted]
            if missing:  # a SQLite column without a home on the server: refuse rather than drop data
                raise LcmValidationError(f"{table}: columns {missing} have no PostgreSQL counterpart", field=table)
            insert = f"INSERT INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            order = "rowid" if table not in ("lcm_time_order",) else "name"
            offset = count = 0
            while True:
                with source.reading() as src:
                    chunk = [tuple(r) for r in src.execute(
                        f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order} LIMIT ? OFFSET ?", (_CHUNK, offset))]
                if not chunk:
                    break
                dst.executemany(insert + (" ON CONFLICT DO NOTHING" if table == "lcm_time_order" else ""), chunk)
                count += len(chunk)
                offset += _CHUNK
            rows[table] = count
        for table, col in _SEQUENCES.items():
            dst.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{col}'), "
                        f"coalesce((SELECT max({col}) FROM {table}), 0) + 1, false)")  # fmt: skip
    return CopyReport(source.path, destination.path, rows)
