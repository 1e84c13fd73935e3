"""Copy a SQLite lcm store into an empty PostgreSQL database: one snapshot of the source, rows and
ids unchanged, verified, in one transaction.

The source is read in one read transaction (:meth:`lcm.db.Database.snapshot`), so writers in
other processes may go on while it runs and the copy is the store as it was at one instant: no
context item names a summary compacted after the summaries were read, no message arrives
between the messages and the context items. Before the destination commits, a verification
pass compares it with that snapshot: every table's row count, and the references that make the
history whole (each context item resolves, each summary edge has both ends, each message and
summary is reachable from the context). A copy that differs is rolled back and raised as
:class:`lcm.errors.CopyVerificationError` naming what is off. Damage the source already had (the
same count of the same finding in the snapshot) is copied as it is and reported, not refused:
``amem lcm doctor`` is where it is repaired.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone

from lcm.conn import Connection, Handle
from lcm.db import sqlite_only
from lcm.errors import CopyVerificationError, LcmValidationError
from lcm.pg.db import PgDatabase
from lcm.pg.nulscan import NUL_REPLACEMENT, describe_findings, find_nul
from lcm.pg.schema import migrate_pg
from lcm.timeutil import iso

log = logging.getLogger(__name__)

__all__ = ["CopyReport", "copy_sqlite_to_postgres", "reference_checks", "COPIED_TABLES", "REFERENCE_CHECKS"]

#: every table of lcm's data, parents before children (the foreign keys are checked per row)
COPIED_TABLES = (
    "conversations", "messages", "summaries", "summary_messages", "summary_parents", "context_items",
    "large_files", "compaction_debt", "lcm_failures", "lcm_time_order", "lcm_embedder",
    "message_vectors", "summary_vectors", "lcm_ingest_batches",
)  # fmt: skip
#: identity columns whose sequence must continue after the copied ids
_SEQUENCES = {"conversations": "id", "messages": "id", "summaries": "pk", "lcm_failures": "id"}
_CHUNK = 1000

#: what makes a history whole, each a count of the rows that break it (portable SQL: run on the
#: SQLite snapshot and on the copy); the doctor lists the same findings one by one
REFERENCE_CHECKS = {
    "context_items_pointing_nowhere": (
        "SELECT count(*) FROM context_items ci WHERE "
        "(ci.item_type = 'message' AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = ci.message_id "
        " AND m.conversation_id = ci.conversation_id)) OR "
        "(ci.item_type = 'summary' AND NOT EXISTS (SELECT 1 FROM summaries s WHERE s.summary_id = ci.summary_id "
        " AND s.conversation_id = ci.conversation_id))"),
    "summary_message_edges_with_a_missing_end": (
        "SELECT count(*) FROM summary_messages e WHERE "
        "NOT EXISTS (SELECT 1 FROM summaries s WHERE s.summary_id = e.summary_id) OR "
        "NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = e.message_id)"),
    "summary_parent_edges_with_a_missing_end": (
        "SELECT count(*) FROM summary_parents e WHERE "
        "NOT EXISTS (SELECT 1 FROM summaries s WHERE s.summary_id = e.summary_id) OR "
        "NOT EXISTS (SELECT 1 FROM summaries s WHERE s.summary_id = e.parent_summary_id)"),
    # context_items has no index on message_id or summary_id. A correlated NOT EXISTS scanned it
    # once per row on SQLite (582 s at 100k messages); NOT IN a subquery is built once on SQLite
    # but, past PostgreSQL's work_mem, re-read per row there (over 60 s at 300k). A left join
    # is linear on both: SQLite builds an automatic index, PostgreSQL a hash anti join.
    "messages_reachable_from_nothing": (
        "SELECT count(*) FROM messages m LEFT JOIN context_items ci ON ci.message_id = m.id "
        "WHERE ci.conversation_id IS NULL AND "
        "NOT EXISTS (SELECT 1 FROM summary_messages e WHERE e.message_id = m.id)"),
    "summaries_reachable_from_nothing": (
        "SELECT count(*) FROM summaries s LEFT JOIN context_items ci ON ci.summary_id = s.summary_id "
        "WHERE ci.conversation_id IS NULL AND "
        "NOT EXISTS (SELECT 1 FROM summary_parents e WHERE e.parent_summary_id = s.summary_id)"),
}  # fmt: skip


@dataclass(frozen=True)
class CopyReport:
    """What was copied: rows per table, where from and to (the URL without its password), and
    the reference checks of the copy (each 0, unless the source had that damage already:
    ``carried`` names those, copied as they were)."""

    source: str
    destination: str
    rows: dict[str, int] = field(default_factory=dict)
    checks: dict[str, int] = field(default_factory=dict)
    carried: dict[str, int] = field(default_factory=dict)
    #: the values copied with each NUL as U+FFFD (``replace_nul``), named as the refusal names them
    nul_replaced: list[str] = field(default_factory=list)


def reference_checks(c: Connection) -> dict[str, int]:
    """Each of :data:`REFERENCE_CHECKS` counted over the database ``c`` reads."""
    return {name: int(c.execute(sql).fetchone()[0]) for name, sql in REFERENCE_CHECKS.items()}


def copy_sqlite_to_postgres(source_handle: Handle, destination: PgDatabase, *,
                            replace_nul: bool = False) -> CopyReport:  # fmt: skip
    """Copy every lcm row of ``source`` (a migrated SQLite store) into ``destination``, verified.

    The destination is migrated first and must hold no conversation: merging two histories
    would renumber ids that summaries, context items and vectors refer to. The source is read
    in one snapshot (writers of other processes go on meanwhile; this process's wait); the copy
    is one transaction, so an interrupted or refused copy leaves the destination empty, never
    half-filled. Large files stay where they are: point ``largeFilesDir`` of every host at
    that directory.

    PostgreSQL text cannot hold U+0000, which SQLite keeps: the source is scanned for it first
    (:func:`lcm.pg.nulscan.find_nul`) and a store holding one is refused before anything is
    copied, naming each message. ``replace_nul`` copies each NUL as U+FFFD instead (the one
    change the copy then makes; those messages differ from the source in that character).

    Raises:
        LcmValidationError: the destination already holds conversations (``field="destination"``),
            or the source holds a NUL character and ``replace_nul`` is off (``field="source"``).
        CopyVerificationError: the copy does not match the snapshot (``.problems``); rolled back.
        UnsupportedOnEngineError: ``source_handle`` is not a SQLite store's.
    """
    source = sqlite_only(source_handle, "copy from a SQLite store")  # it reads PRAGMA table_info
    migrate_pg(destination, iso(datetime.now(timezone.utc)))
    rows: dict[str, int] = {}
    with source.snapshot() as src, destination.atomic() as dst:
        if dst.execute("SELECT 1 FROM conversations LIMIT 1").fetchone() is not None:
            raise LcmValidationError(
                f"the PostgreSQL database at {destination.path} already holds conversations; "
                "copy into an empty database", field="destination")  # fmt: skip
        # scanned before a row is sent, in the copy's snapshot: a refusal costs seconds, not the
        # minutes a copy took to meet the row, and names every one
        nul = find_nul(src, COPIED_TABLES)
        if nul and not replace_nul:
            raise LcmValidationError(
                f"the SQLite store holds {len(nul)} text value(s) with a NUL character (U+0000), which PostgreSQL "
                f"text cannot hold: {describe_findings(nul)}. Nothing was copied. Copy them with each NUL as U+FFFD "
                "(amem lcm migrate --replace-nul; replace_nul=True), the one change the copy then makes",
                field="source")  # fmt: skip
        expected = {t: int(src.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in COPIED_TABLES}
        in_source = reference_checks(src)
        for table in COPIED_TABLES:
            rows[table] = _copy_table(src, dst, table, replace_nul=bool(nul) and replace_nul)
        for table, col in _SEQUENCES.items():
            dst.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{col}'), "
                        f"coalesce((SELECT max({col}) FROM {table}), 0) + 1, false)")  # fmt: skip
        checks = _verify(dst, expected, rows, in_source)
    carried = {name: n for name, n in checks.items() if n}
    if carried:
        log.warning("lcm: copied damage the source already had (amem lcm doctor lists it): %s", carried)
    return CopyReport(source.path, destination.path, rows, checks, carried, nul if replace_nul else [])


def _copy_table(src: Connection, dst: Connection, table: str, *, replace_nul: bool = False) -> int:
    """One table's rows from the snapshot into the destination, a chunk at a time; the count.
    ``replace_nul``: each U+0000 in a text value goes in as U+FFFD."""
    cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
    wanted = {r[0] for r in dst.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = ?", (table,)).fetchall()}  # fmt: skip
    missing = [c for c in cols if c not in wanted]
    if missing:  # a SQLite column without a home on the server: refuse rather than drop data
        raise LcmValidationError(f"{table}: columns {missing} have no PostgreSQL counterpart", field=table)
    insert = f"INSERT INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    if table == "lcm_time_order":
        insert += " ON CONFLICT DO NOTHING"
    order = "name" if table == "lcm_time_order" else "rowid"
    # One cursor over the table (the snapshot keeps it stable), where chunks by OFFSET re-read
    # every skipped row.
    cursor = src.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}")
    count = 0
    while chunk := [tuple(r) for r in cursor.fetchmany(_CHUNK)]:
        if replace_nul:
            chunk = [tuple(v.replace("\x00", NUL_REPLACEMENT) if isinstance(v, str) else v for v in r) for r in chunk]
        dst.executemany(insert, chunk)
        count += len(chunk)
    return count


def _verify(dst: Connection, expected: dict[str, int], copied: dict[str, int],
            in_source: dict[str, int]) -> dict[str, int]:
    """Compare the copy, inside its transaction, with the snapshot; raise naming each difference.

    Returns the reference checks of the copy (non-zero only for damage the source had as well).
    """
    problems: list[str] = []
    for table, want in expected.items():
        have = int(dst.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        if have != want or copied[table] != want:
            problems.append(f"{table}: {have} rows in the copy ({copied[table]} sent), {want} in the source snapshot")
    checks = reference_checks(dst)
    for name, n in checks.items():
        if n != in_source[name]:
            problems.append(f"{name.replace('_', ' ')}: {n} in the copy, {in_source[name]} in the source snapshot")
    if problems:
        raise CopyVerificationError("the copy does not match the source, so nothing was kept: " + "; ".join(problems),
                                    problems=problems)  # fmt: skip
    return checks
