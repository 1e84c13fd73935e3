"""grep over messages and summaries: FTS5 (words via porter, CJK via trigram) or an RE2 regex scan.

One deadline (``grepRegexDeadlineMs``) bounds a whole grep: SQLite's progress handler stops
a statement that runs past it, and the regex scan checks it between rows and between the
windows of a long text (``lcm.regex``). Either way the answer is the hits found so far,
marked ``truncated`` with a warning saying why.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from amem.kernel.fusion import rrf
from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.db import Database, sqlite_only
from lcm.errors import LcmValidationError
from lcm.models import GrepHit, GrepResult
from lcm.newest import SOURCES, newest_first_sql, newest_in_window, rowids_follow_time
from lcm.regex import DeadlineExceeded, UserRegex, compile_user_regex
from lcm.tokens import is_cjk_text
from lcm.trigram import indexed_upto, tail_match_sql

__all__ = ["FtsQuery", "build_fts_query", "grep"]

_TERM = re.compile(r'"([^"]*)"|(\S+)')


@dataclass(frozen=True)
class FtsQuery:
    """A user's words turned into index queries; every part must match (AND)."""

    words: str | None  # MATCH expression for the porter/unicode61 index
    trigram: str | None  # MATCH expression for the trigram index
    like: tuple[str, ...]  # substrings too short for either index (1-2 CJK chars, punctuation)
    terms: tuple[str, ...]  # the literal terms, for snippets


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def build_fts_query(pattern: str, field: str = "pattern") -> FtsQuery:
    """Quote every term and phrase as a literal: FTS5 operators in user text are not operators.

    A NUL is refused (naming ``field``): FTS5 reads it as the end of the query string and
    LIKE as the end of the pattern, so it could neither be searched nor ignored honestly.
    """
    if "\x00" in pattern:
        raise LcmValidationError(f"{field} must not contain a NUL character (U+0000)", field=field)
    words: list[str] = []
    tri: list[str] = []
    like: list[str] = []
    terms: list[str] = []
    for m in _TERM.finditer(pattern):
        term = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
        if not term:
            continue
        terms.append(term)
        if is_cjk_text(term):
            (tri if len(term) >= 3 else like).append(term)
        elif re.search(r"\w", term):
            words.append(_quote(term))
        else:
            like.append(term)
    if not terms:
        raise LcmValidationError(f"{field}: no searchable terms", field=field)
    return FtsQuery(
        " AND ".join(words) or None, " AND ".join(_quote(t) for t in tri) or None, tuple(like), tuple(terms)
    )


def _snippet(content: str, terms: Sequence[str], pos: int = -1, width: int = 160) -> str:
    if pos < 0:
        lowered = content.lower()
        for t in terms:
            for probe in (t.lower(), t.lower().split()[0] if t.split() else t.lower()):
                pos = lowered.find(probe)
                if pos >= 0:
                    break
            if pos >= 0:
                break
    if pos < 0:
        pos = 0
    start = max(0, pos - width // 3)
    text = content[start : start + width].replace("\n", " ")
    return ("…" if start > 0 else "") + text + ("…" if start + width < len(content) else "")


def _scope_sql(alias: str, conv_ids: list[int] | None, since: str | None, before: str | None, kind: str) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if conv_ids is not None:
        clauses.append(f"{alias}.conversation_id IN ({','.join('?' * len(conv_ids))})")
        params += conv_ids
    start_col = "created_at" if kind == "message" else "latest_at"
    end_col = "created_at" if kind == "message" else "earliest_at"
    if since:
        clauses.append(f"{alias}.{start_col} >= ?")
        params.append(since)
    if before:
        clauses.append(f"{alias}.{end_col} < ?")
        params.append(before)
    return (" AND ".join(clauses) or "TRUE"), params  # TRUE: a boolean on both engines


def _fts_rows(
    c: sqlite3.Connection, kind: str, q: FtsQuery, where: str, params: list[object], sort: str, limit: int
) -> list[tuple[sqlite3.Row, float]]:
    src = SOURCES[kind]
    table, fts, tri, rowid, time_col = src.table, src.fts, src.tri, src.rowid, src.time_col
    extra = ""
    extra_params: list[object] = []
    upto = _pending_tail(c, kind) if q.trigram else None
    if q.trigram and upto is not None:
        # messages not yet in the trigram index are matched directly (lcm.trigram); the
        # trigram index then stops driving the query: the words index or a time-ordered scan does
        tri_terms = [t for t in q.terms if is_cjk_text(t) and len(t) >= 3]
        sub, sub_params = tail_match_sql(upto, q.trigram, tri_terms)
        extra += f" AND t.{rowid} IN ({sub})"
        extra_params += sub_params
    elif q.words and q.trigram:
        extra += f" AND t.{rowid} IN (SELECT rowid FROM {tri} WHERE {tri} MATCH ?)"
        extra_params.append(q.trigram)
    for sub in q.like:
        extra += " AND t.content LIKE ? ESCAPE '\\'"
        extra_params.append("%" + sub.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    # the index that drives the query: words first, else trigrams (None: LIKE terms only)
    primary = (fts, q.words) if q.words else (tri, q.trigram) if q.trigram and upto is None else None
    if primary is not None and sort == "recency":
        # Newest first needs no rank; see lcm.newest for how it avoids sorting every match.
        index, expr = primary
        scoped, scoped_params = f"{where}{extra}", [*params, *extra_params]
        if not rowids_follow_time(c, table):
            window = newest_in_window(c, src, index, expr, scoped, scoped_params, limit)
            if window is not None:
                return [(r, 0.0) for r in window]
        sql, args = newest_first_sql(c, src, index, expr, scoped, scoped_params)
        return [(r, 0.0) for r in c.execute(f"{sql} LIMIT ?", [*args, limit])]
    if primary is not None:
        index, expr = primary
        sql = (
            f"SELECT t.*, bm25({index}) AS score FROM {index} JOIN {table} t ON t.{rowid} = {index}.rowid "
            f"WHERE {index} MATCH ? AND {where}{extra}"
        )
        args = [expr, *params, *extra_params]
    else:
        sql = f"SELECT t.*, 0.0 AS score FROM {table} t WHERE {where}{extra}"
        args = [*params, *extra_params]
    # equal scores: newest first, then the lower row id (the order FTS5 hands rows over), said
    # explicitly so PostgreSQL's BM25 (lcm.pg.bm25) can break ties the same way
    order = {"recency": f"t.{time_col} DESC, t.{rowid} DESC", "relevance": f"score, t.{time_col} DESC, t.{rowid}"}
    if sort == "hybrid":
        # Fuse the best by relevance with the newest: both lists come from the same match set.
        by_rel = c.execute(f"{sql} ORDER BY {order['relevance']} LIMIT ?", [*args, limit * 4]).fetchall()
        if primary is not None:  # the newest without sorting the match set (lcm.newest)
            new_sql, new_args = newest_first_sql(c, src, *primary, f"{where}{extra}", [*params, *extra_params])
            by_new = c.execute(f"{new_sql} LIMIT ?", [*new_args, limit * 4]).fetchall()
        else:
            by_new = c.execute(f"{sql} ORDER BY {order['recency']} LIMIT ?", [*args, limit * 4]).fetchall()
        by_id = {r[rowid]: r for r in [*by_rel, *by_new]}
        fused = rrf([[r[rowid] for r in by_rel], [r[rowid] for r in by_new]])
        return [(by_id[k], s) for k, s in fused[:limit]]
    rows = c.execute(f"{sql} ORDER BY {order[sort]} LIMIT ?", [*args, limit]).fetchall()
    return [(r, -float(r["score"])) for r in rows]


def _pending_tail(c: sqlite3.Connection, kind: str) -> int | None:
    """The trigram watermark when messages above it wait for the index (``lcm.trigram``), else None."""
    if kind != "message":
        return None  # summaries keep their trigram index inline
    upto = indexed_upto(c)
    return upto if c.execute("SELECT 1 FROM messages WHERE id > ? LIMIT 1", (upto,)).fetchone() else None


def _hit(kind: str, row: Any, score: float, snippet: str) -> GrepHit:
    """A matched row (SQLite or PostgreSQL, both read by column name) as a grep hit."""
    if kind == "message":
        return GrepHit("message", f"msg_{row['id']}", row["conversation_id"], row["created_at"], snippet, score,
                       role=row["role"], name=row["name"])
    return GrepHit("summary", row["summary_id"], row["conversation_id"], row["latest_at"], snippet, score,
                   depth=row["depth"], summary_kind=row["kind"])


#: SQLite VM steps between two looks at the deadline (well under a millisecond of work)
_PROGRESS_STEPS = 5000
#: rows the regex scan reads per turn of the database lock (a few ms of matching)
_BATCH = 128
_TIME_STOP = "grep stopped at its deadline (grepRegexDeadlineMs); narrow with since/before or a longer literal"


@contextmanager
def _deadline(c: sqlite3.Connection, deadline: float) -> Iterator[None]:
    """Make SQLite abandon a statement that runs past ``deadline`` (it raises "interrupted")."""
    c.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
    try:
        yield
    finally:
        c.set_progress_handler(None, 0)


def _timed_out(exc: sqlite3.OperationalError, deadline: float) -> bool:
    return "interrupted" in str(exc) and time.monotonic() > deadline


def _regex_rows(c: sqlite3.Connection, kind: str, literal: str | None, where: str, params: list[object], limit: int) -> sqlite3.Cursor:
    """In-scope rows newest first (time DESC, rowid DESC), only those holding ``literal`` when given."""
    src = SOURCES[kind]
    upto = _pending_tail(c, kind) if literal is not None else None
    if literal is not None and upto is not None:
        # the pending tail (lcm.trigram) is read directly, next to the index's matches
        sub, sub_params = tail_match_sql(upto, _quote(literal), [literal])
        order = (f"t.{src.rowid} DESC" if rowids_follow_time(c, src.table)
                 else f"t.{src.time_col} DESC, t.{src.rowid} DESC")
        sql = f"SELECT t.* FROM {src.table} t WHERE t.{src.rowid} IN ({sub}) AND {where} ORDER BY {order}"
        args = [*sub_params, *params]
    elif literal is not None:
        sql, args = newest_first_sql(c, src, src.tri, _quote(literal), where, params)
    elif rowids_follow_time(c, src.table):
        sql, args = f"SELECT t.* FROM {src.table} t WHERE {where} ORDER BY t.{src.rowid} DESC", list(params)
    else:
        sql = f"SELECT t.* FROM {src.table} t WHERE {where} ORDER BY t.{src.time_col} DESC, t.{src.rowid} DESC"
        args = list(params)
    return c.execute(f"{sql} LIMIT ?", [*args, limit])


def regex_hits(kind: str, found: list[Any], sort: str, limit: int) -> list[GrepHit]:
    """A regex scan's ``(row, match count, first offset)`` of one kind as hits in ``sort``
    order (newest first as scanned; relevance by match count; hybrid both fused by RRF)."""
    if sort != "recency":
        ranked = sorted(range(len(found)), key=lambda i: -found[i][1])
        if sort == "hybrid":
            ranked = [i for i, _ in rrf([ranked, list(range(len(found)))])]
        found = [found[i] for i in ranked]
    return [_hit(kind, row, score, _snippet(row["content"], [], pos)) for row, score, pos in found[:limit]]


#: what a grep's ``scope`` searches, in this order
GREP_KINDS: dict[str, list[str]] = {"messages": ["message"], "summaries": ["summary"], "both": ["message", "summary"]}

#: one kind's regex scan on one engine: ``(kind, where, params, rows scanned so far)`` ->
#: ``(row, match count, first offset)`` found, rows scanned, why it stopped early (or None)
RegexScan = Callable[[str, str, list[object], int], "tuple[list[Any], int, str | None]"]


def regex_grep(scan: RegexScan, kinds: list[str], conv_ids: list[int] | None, since: str | None,
               before: str | None, sort: str, limit: int) -> tuple[list[GrepHit], int, list[str]]:
    """A regex grep over ``kinds`` with an engine's scan: the hits, the rows scanned, the
    warnings. A scan that stops early (deadline, scan budget) ends the grep there: the later
    kinds would only be cut by the same limit."""
    hits: list[GrepHit] = []
    scanned = 0
    warnings: list[str] = []
    for kind in kinds:
        where, params = _scope_sql("t", conv_ids, since, before, kind)
        found, scanned, stop = scan(kind, where, params, scanned)
        hits.extend(regex_hits(kind, found, sort, limit))
        if stop is not None:
            warnings.append(stop)
            break
    return hits, scanned, warnings


def merge_kinds(hits: list[GrepHit], kinds: int, sort: str, limit: int) -> list[GrepHit]:
    """Messages and summaries searched together: one list in ``sort`` order, cut to ``limit``."""
    if kinds < 2:
        return hits
    if sort == "recency":
        hits.sort(key=lambda h: h.created_at, reverse=True)
    else:
        hits.sort(key=lambda h: -h.score)
    return hits[:limit]


def fetch_size(sort: str, limit: int, found: int) -> int:
    """Rows to fetch next in a regex scan: newest first needs only ``limit`` matches, so it
    fetches no more rows than could supply the ones still missing (both engines)."""
    return _BATCH if sort != "recency" else min(_BATCH, max(16, limit - found))


def match_batch(batch: Sequence[Any], rx: UserRegex, cfg: LcmConfig, found: list[Any], scanned: int, *,
                deadline: float, sort: str, limit: int) -> tuple[int, str | None, bool]:
    """Match one fetched batch of a regex scan, appending ``(row, match count, first offset)``
    to ``found``; returns the rows scanned so far, why the scan must stop (row bound or
    deadline), and whether newest-first already has its ``limit`` matches. Shared by both
    engines: they differ in how rows are fetched, not in how they are matched."""
    for row in batch:
        if scanned >= cfg.grep_regex_max_rows:
            return scanned, "regex scan stopped at its row bound (grepRegexMaxRows); narrow with since/before", False
        if time.monotonic() > deadline:
            return scanned, _TIME_STOP, False
        scanned += 1
        positions = rx.positions(row["content"], deadline, 1 if sort == "recency" else 100)
        if positions:
            found.append((row, float(len(positions)), positions[0]))
            if sort == "recency" and len(found) >= limit:
                return scanned, None, True
    return scanned, None, False


def _regex_scan(
    db: Database, cfg: LcmConfig, rx: UserRegex, kind: str, where: str, params: list[object], *,
    deadline: float, scanned: int, sort: str, limit: int,
) -> tuple[list[tuple[sqlite3.Row, float, int]], int, str | None]:
    """Matching rows of one kind as (row, match count, first match offset), rows scanned, why it stopped early.

    Rows are fetched in batches under the database lock and matched outside it, so a scan
    that spends its whole deadline on hostile text never holds up other callers of the store
    (SQLite lets them use the connection while this statement is paused between batches).
    """
    found: list[tuple[sqlite3.Row, float, int]] = []
    stop: str | None = None
    cursor: sqlite3.Cursor | None = None
    try:
        while stop is None:
            with db.reading() as c, _deadline(c, deadline):
                if cursor is None:
                    cursor = _regex_rows(c, kind, rx.literal, where, params, cfg.grep_regex_max_rows + 1)
                batch = cursor.fetchmany(fetch_size(sort, limit, len(found)))
            if not batch:
                break
            scanned, stop, full = match_batch(batch, rx, cfg, found, scanned,
                                              deadline=deadline, sort=sort, limit=limit)
            if full:
                return found, scanned, None
    except DeadlineExceeded:
        stop = _TIME_STOP
    except sqlite3.OperationalError as exc:
        if not _timed_out(exc, deadline):
            raise
        stop = _TIME_STOP
    finally:
        if cursor is not None:
            with db.reading():
                cursor.close()  # ends the statement and its read snapshot
    return found, scanned, stop


def grep(
    handle: Handle,
    cfg: LcmConfig,
    pattern: str,
    *,
    field: str = "pattern",
    mode: str,
    scope: str,
    conv_ids: list[int] | None,
    since: str | None,
    before: str | None,
    limit: int,
    sort: str,
) -> GrepResult:
    db = sqlite_only(handle, "grep over FTS5")  # the PostgreSQL store greps with lcm.pg.search
    kinds = GREP_KINDS[scope]
    hits: list[GrepHit] = []
    scanned = 0
    warnings: list[str] = []
    deadline = time.monotonic() + cfg.grep_regex_deadline_ms / 1000
    if mode == "full_text":
        q = build_fts_query(pattern, field)
        with db.reading() as c, _deadline(c, deadline):
            for kind in kinds:
                where, params = _scope_sql("t", conv_ids, since, before, kind)
                try:
                    rows = _fts_rows(c, kind, q, where, params, sort, limit)
                except sqlite3.OperationalError as exc:
                    if not _timed_out(exc, deadline):
                        raise
                    warnings.append(_TIME_STOP)
                    break
                hits += [_hit(kind, row, score, _snippet(row["content"], q.terms)) for row, score in rows]
    else:
        rx = compile_user_regex(pattern)

        def scan(kind: str, where: str, params: list[object], done: int) -> tuple[list[Any], int, str | None]:
            return _regex_scan(db, cfg, rx, kind, where, params, deadline=deadline, scanned=done, sort=sort, limit=limit)

        hits, scanned, warnings = regex_grep(scan, kinds, conv_ids, since, before, sort, limit)
    hits = merge_kinds(hits, len(kinds), sort, limit)
    return GrepResult(pattern, mode, scope, sort, hits, bool(warnings), scanned, conv_ids, list(dict.fromkeys(warnings)))
