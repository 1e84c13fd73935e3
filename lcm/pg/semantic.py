"""Semantic recall on PostgreSQL: :class:`lcm.semantic.SemanticIndex` with two engine parts swapped.

Everything else (binding the model, the pending queue, the int8 vectors in ``bytea``, the numpy
scan, RRF fusion) is the shared code and SQL of :mod:`lcm.semantic`, run through
:func:`lcm.pg.db.translate`. What differs:

* one embedding run at a time across every process sharing the server (SQLite's thread lock
  only covers one process): a session advisory lock ``LOCK_EMBED``; a killed holder's session
  ends and the server releases it;
* hybrid's keyword leg: the ``words`` tsvector with the pattern's words OR-ed, ranked by
  ``ts_rank_cd`` (SQLite: FTS5 with the words OR-ed, ranked by BM25); CJK terms are
  case-insensitive substrings over the trigram index, any of them, newest first;
* the vector scan streams from a server-side cursor, ``scan_batch`` rows a fetch, in one
  transaction (one snapshot) bounded by ``statement_timeout``: a client-side cursor would hold
  every in-scope vector in memory at once (1.5 MB per 4,096 vectors of 384 dimensions).
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any

from lcm.config import LcmConfig
from lcm.db import Database
from lcm.newest import SOURCES
from lcm.models import EmbedReport
from lcm.pg.db import LOCK_EMBED, PgDatabase, _row_factory, translate
from lcm.pg.search import _like, _set_deadline
from lcm.search import build_fts_query
from lcm.semantic import SCAN_BATCH, ScanCut, SemanticIndex
from lcm.tokens import is_cjk_text
from lcm.vectors import TextEmbedder

__all__ = ["PgSemanticIndex"]


class PgSemanticIndex(SemanticIndex):
    """The vectors of a PostgreSQL store (see the module docstring for what differs from SQLite)."""

    def __init__(self, db: Database | PgDatabase, cfg: LcmConfig, embedder: TextEmbedder | None, *,
                 scan_batch: int = SCAN_BATCH) -> None:  # fmt: skip
        if isinstance(scan_batch, bool) or not isinstance(scan_batch, int) or scan_batch <= 0:
            raise ValueError(f"scan_batch must be a positive integer; got {scan_batch!r}")
        super().__init__(db, cfg, embedder)  # type: ignore[arg-type]  # the shared code speaks to both handles
        self.scan_batch = scan_batch

    def _scan(self, sql: str, params: list[object], deadline: float) -> Generator[list[Any], None, None]:
        """The vector scan from a server-side cursor, ``scan_batch`` rows a fetch: the client
        holds one batch at a time. Raises :class:`lcm.semantic.ScanCut` when the deadline
        (``statement_timeout``, set from it) cancels a fetch."""
        import psycopg

        db: PgDatabase = self.db  # type: ignore[assignment]
        try:
            with db.reading() as c:
                _set_deadline(c, deadline)
                with c.raw.cursor(name="lcm_vector_scan", row_factory=_row_factory) as cur:
                    cur.execute(translate(sql), params)
                    while rows := cur.fetchmany(self.scan_batch):
                        yield rows
        except psycopg.errors.QueryCanceled as exc:
            raise ScanCut("the vector scan reached its deadline") from exc

    def _embed(self, emb: TextEmbedder, limit: int | None, deadline_s: float | None, batch_size: int) -> EmbedReport:
        # A second process waits here, then finds the work done (what is pending is read from
        # the tables), so no item is encoded twice by two hosts' nightly jobs.
        db: PgDatabase = self.db  # type: ignore[assignment]
        with db.advisory_lock(LOCK_EMBED, 0):
            return super()._embed(emb, limit, deadline_s, batch_size)

    def _lexical(self, kind: str, pattern: str, conv_ids: list[int] | None, since: str | None,
                 before: str | None, k: int, deadline: float) -> tuple[list[tuple[int, float]], bool]:  # fmt: skip
        """The ``k`` best items having any of the pattern's words (CJK: any of its substrings
        of three or more characters), as (rowid, rank); True when the deadline stopped it."""
        import psycopg

        q = build_fts_query(pattern)
        words = [t for t in q.terms if not is_cjk_text(t) and re.search(r"\w", t)]
        grams = [t for t in q.terms if is_cjk_text(t) and len(t) >= 3]
        src = SOURCES[kind]
        _, where, params = self._filter(kind, conv_ids, since, before)
        if words:
            tsq = " || ".join("lcm_tsq(?)" for _ in words)  # tsquery || tsquery: either matches
            sql = (f"SELECT t.{src.rowid}, ts_rank_cd(t.words, ({tsq})) AS score FROM {src.table} t "
                   f"WHERE t.words @@ ({tsq}) AND {where} ORDER BY score DESC, t.{src.rowid} LIMIT ?")
            args: list[object] = [*words, *words, *params, k]
        elif grams:
            # no rank over substrings on the server: newest first, as SQLite ranks its unindexed tail
            any_gram = " OR ".join("t.content ILIKE ? ESCAPE '\\'" for _ in grams)
            sql = (f"SELECT t.{src.rowid}, 0.0 FROM {src.table} t WHERE ({any_gram}) AND {where} "
                   f"ORDER BY t.{src.rowid} DESC LIMIT ?")
            args = [*map(_like, grams), *params, k]
        else:
            return [], False
        try:
            with self.db.reading() as c:
                _set_deadline(c, deadline)  # type: ignore[arg-type]
                rows = c.execute(sql, args).fetchall()
        except psycopg.errors.QueryCanceled:
            return [], True
        return [(int(r[0]), float(r[1])) for r in rows], False
