"""Newest-first matches of an FTS5 index, without sorting the whole match set when it can be helped.

grep's default order is newest first, and a common word matches a large share of a big
database: sorting every match to return fifty costs ~300 ms at 100k messages. Which shortcut
is exact depends on whether row ids still follow time, which lcm migration 0003 tracks (an
import of older messages, or a summary of an older span written late, breaks it):

* in time order, FTS5 lists matches by row id descending itself, so the scan streams and
  stops at the limit;
* out of order, the highest row ids are tried first and the answer kept when one probe of the
  time index proves it (:func:`newest_in_window`); otherwise a small match set is sorted, and
  a large one is read by walking the time index and probing the match set.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["Source", "SOURCES", "rowids_follow_time", "newest_in_window", "newest_first_sql"]


@dataclass(frozen=True)
class Source:
    """A searchable table and its indexes."""

    table: str
    id_col: str  # the public id column
    fts: str  # porter/unicode61 word index
    tri: str  # trigram index
    rowid: str  # the integer key both indexes use as rowid
    time_col: str  # newest-first order (and since/before for messages)
    time_index: str  # the index on time_col


SOURCES = {
    "message": Source("messages", "id", "messages_fts", "messages_tri", "id", "created_at", "messages_created"),
    "summary": Source("summaries", "summary_id", "summaries_fts", "summaries_tri", "pk", "latest_at", "summaries_latest"),
}

#: matches (by highest row id) tried first when row order is not time order, per wanted row
WINDOW_PER_ROW = 20
#: a match set up to this size is sorted; a larger one is read along the time index
SMALL_MATCH_SET = 2000


def rowids_follow_time(c: sqlite3.Connection, table: str) -> bool:
    """True while every row of ``table`` was stored in time order (see migration 0003)."""
    row = c.execute("SELECT out_of_order FROM lcm_time_order WHERE name = ?", (table,)).fetchone()
    return not (row and row[0])


def _matches(index: str) -> str:
    return f"SELECT rowid FROM {index} WHERE {index} MATCH ?"


def newest_in_window(
    c: sqlite3.Connection, src: Source, index: str, expr: str, where: str, params: list[object], limit: int,
    *, per_row: int = WINDOW_PER_ROW,
) -> list[sqlite3.Row] | None:
    """The ``limit`` newest in-scope matches, from the highest row ids only, when that is provably right.

    Row ids mostly follow time even after an import of old rows, so the newest matches are
    usually among the most recent ``per_row * limit`` row ids, which FTS5 lists cheaply.
    The answer is exact when the window held every match, or when no in-scope match below it
    is newer than the window's ``limit``-th row (one probe of the time index). None: it is not.
    """
    size = per_row * limit
    by_rowid = f"{_matches(index)} ORDER BY rowid DESC"
    rows = c.execute(
        f"SELECT t.*, 0.0 AS score FROM {src.table} t WHERE t.{src.rowid} IN ({by_rowid} LIMIT ?) AND {where} "
        f"ORDER BY t.{src.time_col} DESC, t.{src.rowid} DESC LIMIT ?",
        [expr, size, *params, limit],
    ).fetchall()
    if c.execute(f"{by_rowid} LIMIT 1 OFFSET ?", [expr, size]).fetchone() is None:
        return rows  # the window held every match
    if len(rows) < limit:
        return None
    edge = c.execute(f"{by_rowid} LIMIT 1 OFFSET ?", [expr, size - 1]).fetchone()
    newer_below = c.execute(
        f"SELECT 1 FROM {src.table} t WHERE t.{src.time_col} > ? AND t.{src.rowid} < ? AND {where} "
        f"AND EXISTS (SELECT 1 FROM {index} WHERE {index} MATCH ? AND rowid = t.{src.rowid}) LIMIT 1",
        [rows[-1][src.time_col], edge[0], *params, expr],
    ).fetchone()
    return None if newer_below else rows


def newest_first_sql(
    c: sqlite3.Connection, src: Source, index: str, expr: str, where: str, params: list[object],
    *, small_set: int = SMALL_MATCH_SET,
) -> tuple[str, list[object]]:
    """SQL (append ``LIMIT ?``) listing the in-scope rows matching ``expr`` newest first, and its args.

    Rows come out ordered by ``(time DESC, rowid DESC)``; ``where`` may refer to the table as
    ``t``. Out of time order, a match set larger than ``small_set`` is read along the time index.
    """
    if rowids_follow_time(c, src.table):
        # With row ids in time order, rowid DESC is that same order: FTS5 streams it.
        sql = (
            f"SELECT t.*, 0.0 AS score FROM {index} JOIN {src.table} t ON t.{src.rowid} = {index}.rowid "
            f"WHERE {index} MATCH ? AND {where} ORDER BY {index}.rowid DESC"
        )
        return sql, [expr, *params]
    probe = c.execute(f"SELECT count(*) FROM ({_matches(index)} LIMIT ?)", [expr, small_set + 1]).fetchone()
    # A large match set: walk the time index and probe the set (SQLite would rather sort it).
    hint = f" INDEXED BY {src.time_index}" if probe[0] > small_set else ""
    sql = (
        f"SELECT t.*, 0.0 AS score FROM {src.table} t{hint} WHERE t.{src.rowid} IN ({_matches(index)}) "
        f"AND {where} ORDER BY t.{src.time_col} DESC, t.{src.rowid} DESC"
    )
    return sql, [expr, *params]
