"""grep on PostgreSQL: full text by tsvector + pg_trgm, regex by RE2 on the client over a literal prefilter.

Same query language as :mod:`lcm.search` (the terms come from the same
:func:`lcm.search.build_fts_query`): a word term is a phrase query (``lcm_tsq``) over the
``lcm_porter`` configuration; a CJK term of three or more characters, a term too short for an index and the
regex's required literal are case-insensitive substrings (``ILIKE``, served by the trigram
index). The regex itself never runs on the server: rows come newest first through a server
side cursor (a rare literal's rows by id from the trigram index, :mod:`lcm.pg.newest`)
and RE2 (linear time, :mod:`lcm.regex`) matches them here. ``statement_timeout``
bounds every statement by what is left of the grep's deadline, so a slow query ends as a
``truncated`` answer with a warning, as on SQLite.

Recency answers are the same ids in the same order as on SQLite (``time DESC, id DESC``),
read by the plan :mod:`lcm.pg.newest` picks by looking (a rare word from the GIN index, a
frequent one by walking the time index): the planner, without statistics for a rare word, walks.
Relevance is FTS5's BM25 computed from the tsvector (:mod:`lcm.pg.bm25`): the same scores
and order as SQLite's wherever the two tokenisers agree.
"""

from __future__ import annotations

import re
import time
from typing import Any

from amem.kernel.fusion import rrf
from lcm.config import LcmConfig
from lcm.models import GrepHit, GrepResult
from lcm.newest import SOURCES
from lcm.pg.bm25 import bm25_sql
from lcm.pg.db import PgConnection, PgDatabase, PgRow
from lcm.pg.newest import PLAN_SETTINGS, matching_ids, newest_matches, newest_scan, order_by
from lcm.regex import DeadlineExceeded, UserRegex, compile_user_regex
from lcm.search import (GREP_KINDS, FtsQuery, _hit, _scope_sql, _snippet, _TIME_STOP, build_fts_query, fetch_size,
                        match_batch, merge_kinds, regex_grep)
from lcm.tokens import is_cjk_text
from lcm.trigram import like_pattern

__all__ = ["pg_grep", "lexical_sql"]


#: a case-insensitive substring pattern for ILIKE ... ESCAPE '\\' (SQLite's LIKE pattern)
_like = like_pattern


def _match_sql(q: FtsQuery) -> tuple[str, list[object], list[str], list[str]]:
    """The WHERE part of a full-text query over alias ``t``, its parameters, its word phrases
    and its trigram terms (FTS5 scores the words index's phrases, or with no word the trigram
    index's terms: :mod:`lcm.pg.bm25` scores the same ones)."""
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
    return " AND ".join(clauses), params, words, tri


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _set_deadline(c: PgConnection, deadline: float) -> None:
    ms = max(1, int((deadline - time.monotonic()) * 1000))
    c.raw.execute(f"SET LOCAL statement_timeout = {ms}; {PLAN_SETTINGS}")


def _fts_rows(c: PgConnection, kind: str, q: FtsQuery, where: str, params: list[object], sort: str,
              limit: int) -> list[tuple[PgRow, float]]:  # fmt: skip
    src = SOURCES[kind]
    match, mparams, words, tri = _match_sql(q)
    # the index SQLite ranks by: its words index, else (CJK terms only) its trigram index
    rank, rank_args = (bm25_sql(src.table, words) if words else bm25_sql(src.table, tri, index="grams") if tri
                       else ("0.0", []))  # fmt: skip
    args: list[Any] = [*mparams, *params]
    if sort == "recency":  # the newest need no score; lcm.pg.newest picks a plan that reads few rows
        return [(r, 0.0) for r in newest_matches(c, src, match, mparams, where, params, limit)]
    by_rel = c.execute(f"SELECT t.*, {rank} AS score FROM {src.table} t WHERE {match} AND {where} "
                       f"ORDER BY score DESC, t.{src.time_col} DESC, t.{src.rowid} LIMIT ?",
                       [*rank_args, *args, limit * 4 if sort == "hybrid" else limit]).fetchall()  # fmt: skip
    if sort == "relevance":
        return [(r, float(r["score"])) for r in by_rel]
    by_new = newest_matches(c, src, match, mparams, where, params, limit * 4)
    by_id = {r[src.rowid]: r for r in [*by_rel, *by_new]}
    fused = rrf([[r[src.rowid] for r in by_rel], [r[src.rowid] for r in by_new]])
    return [(by_id[k], s) for k, s in fused[:limit]]


def lexical_sql(kind: str, pattern: str, where: str, params: list[object], k: int) -> tuple[str, list[object]] | None:
    """Hybrid's word leg on PostgreSQL, as SQLite's (``lcm.semantic.SemanticIndex._lexical``):
    the ``k`` best in-scope rows (``where`` over alias ``t``) holding any of the pattern's words,
    else any of its CJK terms of three or more characters, by the same BM25 (:mod:`lcm.pg.bm25`;
    a phrase a row lacks adds 0), equal scores by row id. The query selects (row id, score);
    None when the pattern has neither words nor such terms."""
    q = build_fts_query(pattern)
    words = [t for t in q.terms if not is_cjk_text(t) and re.search(r"\w", t)]
    grams = [t for t in q.terms if is_cjk_text(t) and len(t) >= 3]
    src = SOURCES[kind]
    if words:
        held = "t.words @@ (" + " || ".join("lcm_tsq(?)" for _ in words) + ")"  # tsquery || tsquery: either
        rank, rank_args = bm25_sql(src.table, words)
        held_args: list[object] = list(words)
    elif grams:
        held = "(" + " OR ".join("t.content ILIKE ? ESCAPE '\\'" for _ in grams) + ")"
        rank, rank_args = bm25_sql(src.table, grams, index="grams")
        held_args = [_like(g) for g in grams]
    else:
        return None
    sql = (f"SELECT t.{src.rowid}, {rank} AS score FROM {src.table} t WHERE {held} AND {where} "
           f"ORDER BY score DESC, t.{src.rowid} LIMIT ?")  # fmt: skip
    return sql, [*rank_args, *held_args, *params, k]


def _regex_scan(db: PgDatabase, cfg: LcmConfig, rx: UserRegex, kind: str, where: str, params: list[object], *,
                deadline: float, scanned: int, sort: str, limit: int) -> tuple[list[tuple[PgRow, float, int]], int, str | None]:  # fmt: skip
    import psycopg

    src = SOURCES[kind]
    found: list[tuple[PgRow, float, int]] = []
    stop: str | None = None
    holds = "t.content ILIKE ? ESCAPE '\\'"  # the literal, served by the trigram index
    lparams: list[Any] = [] if rx.literal is None else [_like(rx.literal)]
    rest: tuple[str, list[Any]] | None = (
        f"SELECT t.* FROM {src.table} t WHERE {where}{'' if rx.literal is None else ' AND ' + holds} "
        f"ORDER BY {order_by(src)}", [*params, *lparams])  # fmt: skip
    try:
        with db.reading() as c:
            _set_deadline(c, deadline)
            first: list[PgRow] = []
            if rx.literal is not None and sort == "recency":
                # the literal's rows newest first by the plan lcm.pg.newest picks (a rare literal's
                # by id from the trigram index, not a walk of every row): its window's rows, then the rest
                first, rest = newest_scan(c, src, holds, lparams, where, params, limit)
            elif rx.literal is not None:  # every literal row is read: by id, unless there are very many
                ids = matching_ids(c, src, holds, lparams, where, params)
                if ids is not None:
                    rest = (f"SELECT t.* FROM {src.table} t WHERE t.{src.rowid} = ANY(?) ORDER BY {order_by(src)}", [ids])
            scanned, stop, full = match_batch(first, rx, cfg, found, scanned, deadline=deadline, sort=sort, limit=limit)
            if full:
                return found, scanned, None
            if rest is None or stop is not None:
                return found, scanned, stop
            # The scan stops after its first matches (or at grepRegexMaxRows rows, counted
            # here): ask the planner for a plan that starts fast (walking the (time, id)
            # index) rather than one that sorts every prefiltered row first.
            c.raw.execute("SET LOCAL cursor_tuple_fraction = 0.001")
            from lcm.pg.db import _row_factory, translate

            # a server-side cursor: rows arrive in batches, never the whole scope at once
            with c.raw.cursor(name="lcm_regex_scan", row_factory=_row_factory) as cur:
                cur.execute(translate(rest[0]), rest[1])
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

    kinds = GREP_KINDS[scope]
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

        def scan(kind: str, where: str, params: list[object], done: int) -> tuple[list[Any], int, str | None]:
            return _regex_scan(db, cfg, rx, kind, where, params, deadline=deadline, scanned=done, sort=sort, limit=limit)

        hits, scanned, warnings = regex_grep(scan, kinds, conv_ids, since, before, sort, limit)
    hits = merge_kinds(hits, len(kinds), sort, limit)
    return GrepResult(pattern, mode, scope, sort, hits, bool(warnings), scanned, conv_ids, list(dict.fromkeys(warnings)))
