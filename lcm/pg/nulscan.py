"""The text PostgreSQL cannot hold: finding U+0000 in a SQLite store before copying it to a server.

SQLite keeps a NUL character in text; PostgreSQL's ``text`` refuses it. A copy
(:func:`lcm.pg.copy.copy_sqlite_to_postgres`) that met one mid-way failed after minutes naming no
row, so the source is scanned first, in the copy's own snapshot: one statement per table over
its text columns (the bytes compared as a blob, since SQLite's text functions may stop at a NUL),
about half a second for 100k messages.
"""

from __future__ import annotations

import sqlite3

__all__ = ["find_nul", "describe_findings", "NUL_REPLACEMENT"]

#: what ``--replace-nul`` copies a NUL as: the Unicode replacement character, visibly not the original
NUL_REPLACEMENT = "\ufffd"
#: findings named in an error; the rest are counted
_SHOWN = 20


def _text_columns(src: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in src.execute(f"PRAGMA table_info({table})") if "TEXT" in str(r[2]).upper()]


def find_nul(src: sqlite3.Connection, tables: tuple[str, ...]) -> list[str]:
    """Every row of ``tables`` with a NUL in a text column, each said so an operator can find it:
    a message by its id, conversation, session key and position; another row by table and key."""
    found: list[str] = []
    for table in tables:
        cols = _text_columns(src, table)
        if not cols:
            continue
        hit = " OR ".join(f"instr(CAST(t.{c} AS BLOB), x'00') > 0" for c in cols)
        if table == "messages":
            rows = src.execute(
                "SELECT t.id, t.conversation_id, c.session_key, t.seq, t.stable_event_key FROM messages t "
                f"LEFT JOIN conversations c ON c.id = t.conversation_id WHERE {hit} ORDER BY t.id").fetchall()  # fmt: skip
            found += [f"msg_{r[0]} (conversation {r[1]}, session {r[2]!r}, position {r[3]}"
                      + (f", host id {r[4]!r}" if r[4] else "") + ")" for r in rows]  # fmt: skip
            continue
        # a row is named by its primary key (a summary by its id), else its rowid
        info = list(src.execute(f"PRAGMA table_info({table})"))
        keys = [str(r[1]) for r in sorted(info, key=lambda r: int(r[5])) if int(r[5]) > 0]
        key = "summary_id" if table == "summaries" else (keys[0] if keys else "rowid")
        for col in cols:
            rows = src.execute(f"SELECT t.{key} FROM {table} t WHERE instr(CAST(t.{col} AS BLOB), x'00') > 0 "
                               f"ORDER BY t.{key}").fetchall()  # fmt: skip
            found += [f"{table} {key} {r[0]!r} (column {col})" for r in rows]
    return found


def describe_findings(found: list[str]) -> str:
    """The findings for an error message: the first few named, the rest counted."""
    shown = "; ".join(found[:_SHOWN])
    more = len(found) - _SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")
