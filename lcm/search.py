"""grep over messages and summaries: FTS5 (words via porter, CJK via trigram) or a guarded regex scan."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

from lcm.config import LcmConfig
from lcm.db import Database
from lcm.errors import LcmValidationError
from lcm.models import GrepHit, GrepResult
from lcm.newest import SOURCES, newest_first_sql, newest_in_window, rowids_follow_time
from lcm.ranking import rrf
from lcm.regex_guard import check_regex, required_literal
from lcm.tokens import is_cjk_text

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


def build_fts_query(pattern: str) -> FtsQuery:
    """Quote every term and phrase as a literal: FTS5 operators in user text are not operators."""
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
        raise LcmValidationError("full_text pattern has no searchable terms", field="pattern")
    return FtsQuery(
        " AND ".join(words) or None, " AND ".join(_quote(t) for t in tri) or None, tuple(like), tuple(terms)
    )


# Long texts are searched in overlapping windows so one regex call is bounded (the guard
# leaves at worst quadratic patterns); a match longer than the overlap that straddles a
# window boundary can be missed in texts longer than one window.
WINDOW = 4096
OVERLAP = 512


class _Timeout(Exception):
    pass


def regex_positions(compiled: re.Pattern[str], text: str, deadline: float, want: int) -> list[int]:
    """Start offsets of up to ``want`` matches, window by window, checking the deadline between."""
    if len(text) <= WINDOW:
        return [m.start() for _, m in zip(range(want), compiled.finditer(text))]
    found: list[int] = []
    seen: set[int] = set()
    offset = 0
    while offset < len(text):
        if time.monotonic() > deadline:
            raise _Timeout
        chunk = text[offset : offset + WINDOW]
        for m in compiled.finditer(chunk):
            pos = offset + m.start()
            if pos not in seen:
                seen.add(pos)
                found.append(pos)
                if len(found) >= want:
                    return found
        if offset + WINDOW >= len(text):
            break
        offset += WINDOW - OVERLAP
    return found


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
    return (" AND ".join(clauses) or "1"), params


def _fts_rows(
    c: sqlite3.Connection, kind: str, q: FtsQuery, where: str, params: list[object], sort: str, limit: int
) -> list[tuple[sqlite3.Row, float]]:
    src = SOURCES[kind]
    table, fts, tri, rowid, time_col = src.table, src.fts, src.tri, src.rowid, src.time_col
    extra = ""
    extra_params: list[object] = []
    if q.words and q.trigram:
        extra += f" AND t.{rowid} IN (SELECT rowid FROM {tri} WHERE {tri} MATCH ?)"
        extra_params.append(q.trigram)
    for sub in q.like:
        extra += " AND t.content LIKE ? ESCAPE '\\'"
        extra_params.append("%" + sub.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    # the index that drives the query: words first, else trigrams (None: LIKE terms only)
    primary = (fts, q.words) if q.words else (tri, q.trigram) if q.trigram else None
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
    order = {"recency": f"t.{time_col} DESC, t.{rowid} DESC", "relevance": f"score, t.{time_col} DESC"}
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


def _hit(kind: str, row: sqlite3.Row, score: float, snippet: str) -> GrepHit:
    if kind == "message":
        return GrepHit("message", f"msg_{row['id']}", row["conversation_id"], row["created_at"], snippet, score, role=row["role"])
    return GrepHit("summary", row["summary_id"], row["conversation_id"], row["latest_at"], snippet, score, depth=row["depth"])


def grep(
    db: Database,
    cfg: LcmConfig,
    pattern: str,
    *,
    mode: str,
    scope: str,
    conv_ids: list[int] | None,
    since: str | None,
    before: str | None,
    limit: int,
    sort: str,
) -> GrepResult:
    kinds = {"messages": ["message"], "summaries": ["summary"], "both": ["message", "summary"]}[scope]
    hits: list[GrepHit] = []
    truncated = False
    scanned = 0
    warnings: list[str] = []
    if mode == "full_text":
        q = build_fts_query(pattern)
        with db.reading() as c:
            for kind in kinds:
                where, params = _scope_sql("t", conv_ids, since, before, kind)
                for row, score in _fts_rows(c, kind, q, where, params, sort, limit):
                    hits.append(_hit(kind, row, score, _snippet(row["content"], q.terms)))
    else:
        compiled = check_regex(pattern)
        literal = required_literal(pattern)
        deadline = time.monotonic() + cfg.grep_regex_deadline_ms / 1000
        budget = cfg.grep_regex_max_rows
        for kind in kinds:
            src = SOURCES[kind]
            where, params = _scope_sql("t", conv_ids, since, before, kind)
            found: list[tuple[sqlite3.Row, float, int]] = []
            with db.reading() as c:
                # Rows are scanned newest first (time DESC, rowid DESC) up to the row budget.
                if literal is not None:
                    sql, args = newest_first_sql(c, src, src.tri, _quote(literal), where, params)
                elif rowids_follow_time(c, src.table):
                    sql, args = f"SELECT t.* FROM {src.table} t WHERE {where} ORDER BY t.{src.rowid} DESC", list(params)
                else:
                    sql = f"SELECT t.* FROM {src.table} t WHERE {where} ORDER BY t.{src.time_col} DESC, t.{src.rowid} DESC"
                    args = list(params)
                cursor = c.execute(f"{sql} LIMIT ?", [*args, budget + 1])
                for row in cursor:
                    if scanned >= cfg.grep_regex_max_rows or time.monotonic() > deadline:
                        truncated = True
                        warnings.append("regex scan stopped at its row/time bound; narrow with since/before")
                        break
                    scanned += 1
                    try:
                        positions = regex_positions(compiled, row["content"], deadline, 1 if sort == "recency" else 100)
                    except _Timeout:
                        truncated = True
                        warnings.append("regex scan stopped at its time bound inside a long text")
                        break
                    if not positions:
                        continue
                    found.append((row, float(len(positions)), positions[0]))
                    if sort == "recency" and len(found) >= limit:
                        break
            if sort != "recency":
                ranked = sorted(range(len(found)), key=lambda i: -found[i][1])
                if sort == "hybrid":
                    fused = rrf([ranked, list(range(len(found)))])
                    ranked = [i for i, _ in fused]
                found = [found[i] for i in ranked]
            for row, score, pos in found[:limit]:
                hits.append(_hit(kind, row, score, _snippet(row["content"], [], pos)))
            if truncated:
                break
    if len(kinds) == 2:
        if sort == "recency":
            hits.sort(key=lambda h: h.created_at, reverse=True)
        else:
            hits.sort(key=lambda h: -h.score)
        hits = hits[:limit]
    return GrepResult(pattern, mode, scope, sort, hits, truncated, scanned, conv_ids, list(dict.fromkeys(warnings)))
