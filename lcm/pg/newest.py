"""Newest first on PostgreSQL: the rows matching an index-served condition, by the plan that is cheap for it.

A grep ``ORDER BY time DESC, id DESC LIMIT n`` over ``words @@ q`` (or an ``ILIKE`` served by
the trigram index) has two plans, and the planner cannot tell which is cheap: it has no
statistics for a rare word (it expects ~1,400 matches at 1M messages for a word in 10, also
after ``ANALYZE``), so it walks the time index newest first and filters every row, reading
the whole table when the word is rare (277 ms at 1M). Reading the GIN index first is the
right plan for a rare word and the wrong one for a word in every third message (it would
fetch and sort all of them), or for a small scope (a conversation: a phrase of two common
words costs ~25 ms in the GIN index at 1M, the conversation's own rows ~2 ms).

So the plan is chosen by looking, each step bounded:

1. **window**: the newest :data:`WINDOW` in-scope rows, filtered. When ``n`` of them match,
   those are the answer (every match outside the window is older); a frequent word stops
   after its first ``n`` matches, as the plain walk does; a scope that ends inside the
   window is answered whole.
2. **walk** on from the window's end, when the window met the term often (at least
   ``n / WALK_FACTOR`` times) or the scope is small (the planner's own estimate of the scope's
   rows, at most :data:`SMALL_SCOPE`: it has statistics for conversations and times, only not
   for words).
3. **index**: else every match's id from the GIN index (a bitmap scan, forced: the planner's
   guess is what misleads it), at most :data:`CAP` of them, sorted newest first on the
   server. Over the cap (a term frequent long ago, rare lately), the walk of step 2.

Every step gives exactly the rows the plain query would (same order, ties by id), so answers
do not depend on the plan taken; only the time does.
"""

from __future__ import annotations

from typing import Any

from lcm.newest import Source
from lcm.pg.db import PgConnection, PgRow

__all__ = ["WINDOW", "CAP", "WALK_FACTOR", "SMALL_SCOPE", "PLAN_SETTINGS", "newest_matches", "newest_scan", "matching_ids", "order_by"]

#: rows of the newest-first window read before the index is asked (~1 ms at 1M messages)
WINDOW = 2048
#: most ids read from the index: each costs a heap visit (~12 us at 1M messages), so past
#: ~1,000 matches walking to the newest ``n`` costs less (about the crossover at 1M and n = 50)
CAP = 1024
#: the window met at least 1/WALK_FACTOR of the matches wanted: walk (<= WALK_FACTOR windows)
WALK_FACTOR = 4
#: a scope the planner expects to hold at most this many rows is walked (~5 ms at the most)
SMALL_SCOPE = 16_384


#: The settings these plans want in the caller's transaction, sent with its other settings (a
#: statement less: under load a round trip costs as much as the window). The (time, id) index
#: gives the order outright; an incremental sort over the time-only index, which the planner
#: prefers (its correlation estimate is better), costs 5x more.
PLAN_SETTINGS = "SET LOCAL enable_incremental_sort = off; SET LOCAL jit = off; SET LOCAL plan_cache_mode = force_custom_plan"


def order_by(src: Source) -> str:
    """Newest first, ties by row id (both engines)."""
    return f"t.{src.time_col} DESC, t.{src.rowid} DESC"


def _window(c: PgConnection, src: Source, cols: str, match: str, mparams: list[Any], where: str, params: list[Any],
            n: int, window: int) -> tuple[list[PgRow], PgRow | None]:  # fmt: skip
    """Step 1: the first ``n`` matches among the newest ``window`` in-scope rows (``cols`` of
    them), and the window's last row when the scope goes on past it (else None). One
    statement: that last row comes along (a sentinel) only when the scan reaches it, so a
    frequent term still stops at its ``n``-th match and a short scope needs no count."""
    sql = (f"SELECT {cols}, t.{src.time_col} AS lcm_at, t.{src.rowid} AS lcm_key, t.lcm_pos, ({match}) AS lcm_hit "
           f"FROM (SELECT t.*, row_number() OVER (ORDER BY {order_by(src)}) AS lcm_pos FROM {src.table} t "
           f"WHERE {where} ORDER BY {order_by(src)} LIMIT ?) t "
           f"WHERE ({match}) OR t.lcm_pos = ? ORDER BY {order_by(src)} LIMIT ?")  # fmt: skip
    rows = c.execute(sql, [*mparams, *params, window, *mparams, window, n + 1]).fetchall()
    last = next((r for r in rows if r["lcm_pos"] == window), None)
    return [r for r in rows if r["lcm_hit"]][:n], last


def matching_ids(c: PgConnection, src: Source, match: str, mparams: list[Any], where: str, params: list[Any],
                 cap: int = CAP) -> list[int] | None:  # fmt: skip
    """Step 3: every in-scope matching row id, newest first, read through the index; None over ``cap``."""
    # Only bitmap scans: the index serving ``match`` (or a scope index) drives the read; a
    # sequential or time-ordered scan stopping at the cap could read most of the table first.
    # Set inside a savepoint and rolled back with it: the settings return to exactly what they
    # were (an administrator's choice included). A failed statement aborts the transaction anyway.
    c.raw.execute("SAVEPOINT lcm_index_plan; SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off")
    rows = c.execute(f"SELECT k FROM (SELECT t.{src.rowid} AS k, t.{src.time_col} AS at FROM {src.table} t "
                     f"WHERE {match} AND {where} LIMIT ?) m ORDER BY at DESC, k DESC",
                     [*mparams, *params, cap + 1]).fetchall()  # fmt: skip
    c.raw.execute("ROLLBACK TO SAVEPOINT lcm_index_plan; RELEASE SAVEPOINT lcm_index_plan")
    return None if len(rows) > cap else [int(r[0]) for r in rows]


def _scope_rows(c: PgConnection, src: Source, where: str, params: list[Any]) -> float:
    """The planner's estimate of the in-scope rows (planned, not run: a fraction of a ms)."""
    plan = c.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {src.table} t WHERE {where}", params).fetchone()
    return float(plan[0][0]["Plan"]["Plan Rows"]) if plan is not None else float("inf")


def newest_scan(c: PgConnection, src: Source, match: str, mparams: list[Any], where: str, params: list[Any],
                n: int, *, window: int = WINDOW, cap: int = CAP,
                small_scope: int = SMALL_SCOPE) -> tuple[list[PgRow], tuple[str, list[Any]] | None]:  # fmt: skip
    """The newest in-scope rows of ``src`` matching ``match`` (over alias ``t``), for a reader
    that wants ``n`` of them or stops earlier: step 1's matches (at most ``n``), and the query
    for every older match, newest first, by the plan steps 2 and 3 picked (no LIMIT: the caller
    adds one or reads it from a cursor); None when step 1 saw every match there is."""
    rows, last = _window(c, src, "t.*", match, mparams, where, params, n, window)
    # the rest is older than the last row step 1 accounted for: its n-th match, else the window's end
    if len(rows) >= n:
        edge = rows[n - 1]
    elif last is not None:
        edge = last
    else:
        return rows, None  # the scope ended inside the window
    older = f"(t.{src.time_col}, t.{src.rowid}) < (?, ?)"
    edge_args = [edge["lcm_at"], edge["lcm_key"]]
    ids = None
    if len(rows) * WALK_FACTOR < n and _scope_rows(c, src, where, params) > small_scope:
        ids = matching_ids(c, src, match, mparams, where, params, cap)
    if ids == []:
        return rows, None  # nothing matches in scope (so step 1 found nothing either): no query for the rest
    if ids is not None:
        return rows, (f"SELECT t.* FROM {src.table} t WHERE t.{src.rowid} = ANY(?) AND {older} ORDER BY {order_by(src)}",
                      [ids, *edge_args])  # fmt: skip
    return rows, (f"SELECT t.* FROM {src.table} t WHERE {match} AND {where} AND {older} ORDER BY {order_by(src)}",
                  [*mparams, *params, *edge_args])  # fmt: skip


def newest_matches(c: PgConnection, src: Source, match: str, mparams: list[Any], where: str, params: list[Any],
                   n: int, *, window: int = WINDOW, cap: int = CAP, small_scope: int = SMALL_SCOPE) -> list[PgRow]:  # fmt: skip
    """The ``n`` newest in-scope rows of ``src`` matching ``match`` (over alias ``t``), newest first."""
    rows, rest = newest_scan(c, src, match, mparams, where, params, n, window=window, cap=cap, small_scope=small_scope)
    if len(rows) >= n or rest is None:
        return rows
    sql, args = rest
    return rows + c.execute(f"{sql} LIMIT ?", [*args, n - len(rows)]).fetchall()
