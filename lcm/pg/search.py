"""grep on PostgreSQL: full text by tsvector + pg_trgm, regex by RE2 on the client over a literal prefilter.

Same query language as :mod:`lcm.search` (the terms come from the same
:func:`lcm.search.build_fts_query`): a word term is a phrase query (``lcm_tsq``) over the
``lcm_porter`` configuration; a CJK term of three or more characters, a term too short for an index and the
regex's required literal are case-insensitive substrings (``ILIKE``, served by the trigram
index). The regex itself never runs on the server: rows come newest first through a server
side cursor and RE2 (linear time, :mod:`lcm.regex`) matches them here. ``statement_timeout``
bounds every statement by what is left of the grep's deadline, so a slow query ends as a
``truncated`` answer with a warning, as on SQLite.

Recency answers are the same ids in the same order as on SQLite (``time DESC, id DESC``).
Relevance is FTS5's BM25 computed from the tsvector (:mod:`lcm.pg.bm25`): the same scores
and order as SQLite's wherever the two tokenisers agree.
"""

from __future__ import annotations

import time
from typing import Any

from lcm.config import LcmConfig
from lcm.models import GrepHit, GrepResult
from lcm.newest import SOURCES
from lcm.pg.bm25 import bm25_sql
from lcm.pg.db import PgConnection, PgDatabase, PgRow
from lcm.ranking import rrf
from lcm.regex import DeadlineExceeded, UserRegex, compile_user_regex
from lcm.search import (FtsQuery, _hit, _scope_sql, _snippet, _TIME_STOP, build_fts_query, fetch_size, match_batch,
                        merge_kinds, regex_hits)

__all__ = ["pg_grep"]


def _like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _match_sql(q: FtsQuery) -> tuple[str, list[object], list[str]]:
    """The WHERE part of a full-text query over alias ``t``, its parameters and its word phrases
    (the phrases BM25 scores, as FTS5 scores only its words index's phrases)."""
    # build_fts_query sorted every term into exactly one of words / trigram / like
    tri = [t for t in q.terms if q.trigram and _quoted(t) in q.trigram.split(" AND ")]
    words = [t for t in q.terms if t not in q.like and t not in tri]
    clauses: list[str] = []
    params: list[object] = []
    if words:
        tsq = " && ".join("lcm_tsq(?)" for _ in words)
        clauses.append(f"t.words @@ ({tsq})")
        params += words
    for term in [*tri, *q.like]:
        clauses.append("t.content ILIKE ? ESCAPE '\\'")
        params.append(_like(term))
    return " AND ".join(clauses), params, words


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _set_deadline(c: PgConnection, deadline: float) -> None:
    ms = max(1, int((deadline - time.monotonic()) * 1000))
    c.raw.execute(f"SET LOCAL statement_timeout = {ms}")


def _fts_rows(c: PgConnection, kind: str, q: FtsQuery, where: str, params: list[object], sort: str,
              limit: int) -> list[tuple[PgRow, float]]:  # fmt: skip
    src = SOURCES[kind]
    match, mparams, words = _match_sql(q)
    rank, rank_args = bm25_sql(src.table, words) if words else ("0.0", [])
    plain = f"SELECT t.* FROM {src.table} t WHERE {match} AND {where}"  # the newest need no score
    args: list[Any] = [*mparams, *params]
    newest = f"t.{src.time_col} DESC, t.{src.rowid} DESC"
    if sort == "recency":
        return [(r, 0.0) for r in c.execute(f"{plain} ORDER BY {newest} LIMIT ?", [*args, limit]).fetchall()]
    by_rel = c.execute(f"SELECT t.*, {rank} AS score FROM {src.table} t WHERE {match} AND {where} "
                       f"ORDER BY score DESC, t.{src.time_col} DESC, t.{src.rowid} LIMIT ?",
                       [*rank_args, *args, limit * 4 if sort == "hybrid" else limit]).fetchall()  # fmt: skip
    if sort == "relevance":
        return [(r, float(r["score"])) for r in by_rel]
    by_new = c.execute(f"{plain} ORDER BY {newest} LIMIT ?", [*args, limit * 4]).fetchall()
    by_id = {r[src.rowid]: r for r in [*by_rel, *by_new]}
    fused = rrf([[r[src.rowid] for r in by_rel], [r[src.rowid] for r in by_new]])
    return [(by_id[k], s) for k, s in fused[:limit]]


def _regex_scan(db: PgDatabase, cfg: LcmConfig, rx: UserRegex, kind: str, where: str, params: list[object], *,
                deadline: float, scanned: int, sort: str, limit: int) -> tuple[list[tuple[PgRow, float, int]], int, str | None]:  # fmt: skip
    import psycopg

    src = SOURCES[kind]
    found: list[tuple[PgRow, float, int]] = []
    stop: str | None = None
    literal = "" if rx.literal is None else " AND t.content ILIKE ? ESCAPE '\\'"
    args: list[Any] = [*params, *([_like(rx.literal)] if rx.literal is not None else [])]
    sql = (f"SELECT t.* FROM {src.table} t WHERE {where}{literal} "
           f"ORDER BY t.{src.time_col} DESC, t.{src.rowid} DESC")  # fmt: skip
    try:
        with db.reading() as c:
            _set_deadline(c, deadline)
            # The scan stops after its first matches (or at grepRegexMaxRows rows, counted
            # here): ask the planner for a plan that starts fast (walking the (time, id)
            # index) rather than one that sorts every prefiltered row first.
            c.raw.execute("SET LOCAL cursor_tuple_fraction = 0.001")
            from lcm.pg.db import _row_factory, translate

            # a server-side cursor: rows arrive in batches, never the whole scope at once
            with c.raw.cursor(name="lcm_regex_scan", row_factory=_row_factory) as cur:
                cur.execute(translate(sql), args)
                while stop is None:
                    batch = cur.fetchmany(fetch_size(sort, limit, len(found)))
                    if not batch:
                        break
                    scanned, stop, full = match_batch(batch, rx, cfg, found, scanned,
                                                      deadline=deadline, sort=sort, limit=limit)
                    if full:
                        return found, scanned, None
    except DeadlineExceeded:
        stop = _TIME_STOP
    except psycopg.errors.QueryCanceled:
        stop = _TIME_STOP
    return found, scanned, stop


def pg_grep(db: PgDatabase, cfg: LcmConfig, pattern: str, *, field: str = "pattern", mode: str, scope: str,
            conv_ids: list[int] | None, since: str | None, before: str | None, limit: int, sort: str) -> GrepResult:  # fmt: skip
    """:func:`lcm.search.grep` for modes ``full_text`` and ``regex`` on PostgreSQL (same arguments, same result)."""
    import psycopg

    kinds = {"messages": ["message"], "summaries": ["summary"], "both": ["message", "summary"]}[scope]
    hits: list[GrepHit] = []
    scanned = 0
    warnings: list[str] = []
    deadline = time.monotonic() + cfg.grep_regex_deadline_ms / 1000
    if mode == "full_text":
        q = build_fts_query(pattern, field)
        try:
            with db.reading() as c:
                _set_deadline(c, deadline)
                for kind in kinds:
                    where, params = _scope_sql("t", conv_ids, since, before, kind)
                    rows = _fts_rows(c, kind, q, where, params, sort, limit)
                    hits += [_hit(kind, row, score, _snippet(row["content"], q.terms)) for row, score in rows]
        except psycopg.errors.QueryCanceled:
            warnings.append(_TIME_STOP)
    else:
        rx = compile_user_regex(pattern)
        for kind in kinds:
            where, params = _scope_sql("t", conv_ids, since, before, kind)
            found, scanned, stop = _regex_scan(db, cfg, rx, kind, where, params, deadline=deadline,
                                               scanned=scanned, sort=sort, limit=limit)  # fmt: skip
            hits.extend(regex_hits(kind, found, sort, limit))
            if stop is not None:
                warnings.append(stop)
                break
    hits = merge_kinds(hits, len(kinds), sort, limit)
    return GrepResult(pattern, mode, scope, sort, hits, bool(warnings), scanned, conv_ids, list(dict.fromkeys(warnings)))
