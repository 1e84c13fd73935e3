"""Semantic recall on PostgreSQL: :class:`lcm.semantic.SemanticIndex` with two engine parts swapped.

Everything else (binding the model, the pending queue, the int8 vectors in ``bytea``, the numpy
scan, hybrid's ranking of its candidates by :mod:`lcm.hybrid`) is the shared code and SQL of
:mod:`lcm.semantic`, run through :func:`lcm.pg.db.translate`. What differs:

* one embedding run at a time across every process sharing the server (SQLite's thread lock
  only covers one process): a session advisory lock ``LOCK_EMBED``; a killed holder's session
  ends and the server releases it;
* hybrid's keyword leg (its candidates): the ``words`` tsvector with the pattern's words OR-ed
  (CJK terms: any of them as substrings over the trigram index), ranked by SQLite's BM25
  (:mod:`lcm.pg.bm25`);
* the vector scan streams from a server-side cursor, ``scan_batch`` rows a fetch, in one
  transaction (one snapshot) bounded by ``statement_timeout``: a client-side cursor would hold
  every in-scope vector in memory at once (1.5 MB per 4,096 vectors of 384 dimensions).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.models import EmbedReport
from lcm.pg.db import LOCK_EMBED, PgDatabase, _row_factory, translate
from lcm.pg.search import _set_deadline, lexical_sql
from lcm.semantic import SCAN_BATCH, ScanCut, SemanticIndex
from lcm.vectors import TextEmbedder

#: the bound on the first batch's fetch, which the deadline does not cut (seconds)
FIRST_BATCH_SECONDS = 10.0

__all__ = ["PgSemanticIndex"]


class PgSemanticIndex(SemanticIndex):
    """The vectors of a PostgreSQL store (see the module docstring for what differs from SQLite)."""

    db: PgDatabase

    def __init__(self, db: Handle, cfg: LcmConfig, embedder: TextEmbedder | None, *,
                 scan_batch: int = SCAN_BATCH) -> None:  # fmt: skip
        if not isinstance(db, PgDatabase):
            raise ValueError(f"PgSemanticIndex needs a PostgreSQL handle; got {type(db).__name__}")
        if isinstance(scan_batch, bool) or not isinstance(scan_batch, int) or scan_batch <= 0:
            raise ValueError(f"scan_batch must be a positive integer; got {scan_batch!r}")
        super().__init__(db, cfg, embedder)
        self.scan_batch = scan_batch

    def _scan(self, sql: str, params: list[object], deadline: float) -> Generator[list[Any], None, None]:
        """The vector scan from a server-side cursor, ``scan_batch`` rows a fetch: the client
        holds one batch at a time. The first batch is read whatever the deadline, as the
        SQLite scan reads it (``SemanticIndex.search`` stops after it once the deadline has
        passed); the later fetches run under a ``statement_timeout`` set from the deadline, and
        :class:`lcm.semantic.ScanCut` is raised when it cancels one."""
        import psycopg

        try:
            with self.db.reading() as c:
                # A timeout set from a deadline already passed is 1 ms, which cancelled even
                # the first fetch on a loaded server (the search then had nothing to rank).
                _set_deadline(c, max(deadline, time.monotonic() + FIRST_BATCH_SECONDS))
                with c.raw.cursor(name="lcm_vector_scan", row_factory=_row_factory) as cur:
                    cur.execute(translate(sql), params)
                    rows = cur.fetchmany(self.scan_batch)
                    if not rows:
                        return
                    yield rows
                    _set_deadline(c, deadline)  # the later fetches stop at the deadline
                    while rows := cur.fetchmany(self.scan_batch):
                        yield rows
        except psycopg.errors.QueryCanceled as exc:
            raise ScanCut("the vector scan reached its deadline") from exc

    def _embed(self, emb: TextEmbedder, limit: int | None, deadline_s: float | None, batch_size: int) -> EmbedReport:
        # A second process waits here, then finds the work done (what is pending is read from
        # the tables), so no item is encoded twice by two hosts' nightly jobs.
        with self.db.advisory_lock(LOCK_EMBED, 0):
            return super()._embed(emb, limit, deadline_s, batch_size)

    def _lexical(self, kind: str, pattern: str, conv_ids: list[int] | None, since: str | None,
                 before: str | None, k: int, deadline: float) -> tuple[list[tuple[int, float]], bool]:  # fmt: skip
        """The ``k`` best items by BM25 over any of the pattern's words (CJK: any of its terms of
        three or more characters), as (rowid, score), as on SQLite (:func:`lcm.pg.search.lexical_sql`);
        True when the deadline stopped it."""
        import psycopg

        _, where, params = self._filter(kind, conv_ids, since, before)
        query = lexical_sql(kind, pattern, where, params, k)
        if query is None:
            return [], False
        sql, args = query
        try:
            with self.db.reading() as c:
                _set_deadline(c, deadline)
                rows = c.execute(sql, args).fetchall()
        except psycopg.errors.QueryCanceled:
            return [], True
        return [(int(r[0]), float(r[1])) for r in rows], False
