"""The message trigram index, kept off the ingest path: a watermark, the pending tail, and paying it.

The trigram index (``messages_tri``: CJK full text, the regex literal prefilter) was half of
ingest's CPU time (benchmarks/RESULTS.md). Ingest now writes the message row and the word
index only; every message whose row id is above the watermark ``lcm_trigram_indexed.upto``
is *pending* and every one at or below it is indexed (migration ``0007_deferred_trigrams``
keeps the triggers to that rule). The debt is paid, a batch per transaction, by
:func:`index_pending`: after a turn, by the nightly maintenance, and by the server's
background worker (``tools/lcm_embed.py``). A killed payment rolls back whole, rows and
watermark together, so the index never holds a row twice or skips one.

Until then grep reads the pending tail itself (:func:`tail_match_sql`): the tail is a row id
range, so that is a bounded primary-key scan, and ingest pays inline once the tail would pass
:data:`MAX_PENDING` messages.
"""

from __future__ import annotations

import sqlite3
import time

from lcm.db import Database

__all__ = ["MAX_PENDING", "PAY_CHUNK", "indexed_upto", "pending_count", "index_pending", "index_new_rows",
           "tail_match_sql", "like_pattern"]

#: the longest pending tail ingest leaves; past it, ingest pays the whole tail inline. A grep
#: that needs trigrams scans the tail directly (a LIKE over at most this many rows: ~0.1 s at
#: 100k short messages), so this bounds what a grep can pay for the deferral.
MAX_PENDING = 100_000
#: messages one payment transaction indexes (after a turn, the worker's step, a maintenance step)
PAY_CHUNK = 5_000
#: index pages one payment may spend merging segments (FTS5 'merge'), as ingest does per batch
_MERGE_PAGES = 200


def indexed_upto(c: sqlite3.Connection) -> int:
    """The watermark: every message with a row id at or below it is in the trigram index."""
    row = c.execute("SELECT upto FROM lcm_trigram_indexed").fetchone()
    return int(row[0]) if row else 0


def pending_count(c: sqlite3.Connection) -> int:
    """Messages not yet in the trigram index (a primary-key range count)."""
    return int(c.execute("SELECT count(*) FROM messages WHERE id > ?", (indexed_upto(c),)).fetchone()[0])


def _merge(c: sqlite3.Connection) -> None:
    # Fed a batch at a time, FTS5's automerge falls behind; a bounded merge keeps segments few.
    c.execute("INSERT INTO messages_tri(messages_tri, rank) VALUES ('merge', ?)", (_MERGE_PAGES,))


def _index(c: sqlite3.Connection, rows: list[tuple[int, str]]) -> None:
    c.executemany("INSERT INTO messages_tri(rowid, content) VALUES (?, ?)", rows)
    _merge(c)


def _pay(c: sqlite3.Connection, limit: int | None) -> int:
    """Index up to ``limit`` pending messages, oldest row id first, inside the caller's transaction.

    One ``INSERT ... SELECT`` of the row-id range: the texts go from the table to the index
    inside SQLite instead of through Python objects and an ``executemany``.
    """
    upto = indexed_upto(c)
    if limit is None:
        top, n = c.execute("SELECT max(id), count(*) FROM messages WHERE id > ?", (upto,)).fetchone()
    else:
        top, n = c.execute("SELECT max(id), count(*) FROM (SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT ?)",
                           (upto, limit)).fetchone()  # fmt: skip
    if not n:
        return 0
    c.execute("INSERT INTO messages_tri(rowid, content) SELECT id, content FROM messages WHERE id > ? AND id <= ? "
              "ORDER BY id", (upto, top))  # fmt: skip
    _merge(c)
    c.execute("UPDATE lcm_trigram_indexed SET upto = ?", (top,))
    return int(n)


def index_new_rows(c: sqlite3.Connection, rows: list[tuple[int, str]], max_pending: int) -> None:
    """Ingest's share, inside its transaction, for the rows it just wrote (ascending ids).

    Rows at or below the watermark (a reused row id after the newest messages were deleted)
    are indexed now, as the rule requires. The rest stay pending unless the tail would then
    pass ``max_pending`` (0: never defer), in which case the whole tail is paid here.
    """
    upto = indexed_upto(c)
    low = [r for r in rows if r[0] <= upto]
    if low:
        _index(c, low)
    if rows and rows[-1][0] > upto and rows[-1][0] - upto > max_pending:
        _pay(c, None)


def index_pending(db: Database, *, limit: int | None = None, deadline_s: float | None = None,
                  chunk: int = PAY_CHUNK) -> int:
    """Pay the trigram debt in transactions of ``chunk`` messages; the number indexed.

    Stops after ``limit`` messages or once ``deadline_s`` seconds have passed (checked between
    transactions). Each transaction moves the watermark with its rows, so a killed run loses at
    most the batch in hand and the next run starts right after the last one committed.
    """
    started = time.monotonic()
    done = 0
    while limit is None or done < limit:
        step = chunk if limit is None else min(chunk, limit - done)
        with db.atomic() as c:
            n = _pay(c, step)
        done += n
        if n < step or (deadline_s is not None and time.monotonic() - started >= deadline_s):
            break
    return done


def like_pattern(term: str) -> str:
    """``term`` as a LIKE substring pattern (with ``ESCAPE '\\'``)."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def tail_match_sql(upto: int, match_expr: str, terms: list[str]) -> tuple[str, list[object]]:
    """A subquery of the message ids matching trigram ``match_expr``, pending tail included.

    The indexed part comes from the index; the tail (ids above ``upto``) is read directly and
    kept when it holds every one of ``terms`` as a substring. LIKE folds ASCII case only while
    the trigram tokenizer folds all of Unicode, so in the tail a CJK term mixed with a non-ASCII
    cased letter must match case exactly; the regex prefilter is unaffected (RE2 decides, and a
    case-folding regex has no non-ASCII literal, ``lcm.regex``).
    """
    likes = "".join(" AND content LIKE ? ESCAPE '\\'" for _ in terms)
    sql = (f"SELECT rowid FROM messages_tri WHERE messages_tri MATCH ? "
           f"UNION ALL SELECT id FROM messages WHERE id > ?{likes}")
    return sql, [match_expr, upto, *(like_pattern(t) for t in terms)]
