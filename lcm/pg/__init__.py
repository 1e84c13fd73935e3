"""lcm on a PostgreSQL server: the second engine behind ``LcmStore`` (issue 18). First layer.

ARCHITECTURE (the storage seam)

``LcmStore(path)`` opens SQLite (:class:`lcm.db.Database`, unchanged); ``LcmStore("postgresql://…")``
builds a :class:`lcm.pg.store.PgLcmStore`, a subclass whose database is a
:class:`lcm.pg.db.PgDatabase`. Both handles offer the same small contract, so most of lcm's
SQL is shared text:

* ``atomic()``: one write transaction, a savepoint when nested, rolled back on any error
  (on PostgreSQL the server rolls back a transaction whose connection dropped: a batch is
  stored whole or not at all); ``reading()``; ``query`` / ``one`` / ``scalar``; ``close``.
* the connection a transaction yields runs lcm's SQLite-dialect SQL through
  :func:`lcm.pg.db.translate` (``?`` placeholders, ``INSERT OR IGNORE``, ``char()``, and
  ``lastrowid`` via ``RETURNING``); SQLite-only SQL (``PRAGMA``, FTS5 ``MATCH``, ``bm25``,
  ``INSERT OR REPLACE``) is refused by name, never sent to fail obscurely.

What differs per engine sits behind that contract, one module each:

==================  ================================  ==========================================
concern             SQLite                            PostgreSQL (``lcm.pg``)
==================  ================================  ==========================================
schema              ``lcm.migrations.MIGRATIONS``     ``lcm.pg.schema.PG_MIGRATIONS``: same names,
                                                      same order (a test keeps them equal)
full text           FTS5 porter/unicode61 + trigram   tsvector ``lcm_porter`` + pg_trgm (GIN)
regex               RE2 over FTS5-trigram prefilter   RE2 on the client over an ILIKE prefilter
                                                      (trigram index), server-side cursor
newest first        FTS5 matches by row id, time      :mod:`lcm.pg.newest`: a window of the newest
                    index when ids stop following     rows, then the walk on or the GIN index,
                    time (``lcm.newest``)             chosen by looking (the planner has no word
                                                      statistics)
relevance           FTS5 ``bm25()``                   the same BM25 from the tsvector or the text
                                                      (:mod:`lcm.pg.bm25`)
deadline            progress handler                  ``SET LOCAL statement_timeout``
assembly plan       (one connection, no workers)      :mod:`lcm.pg.assemble`: no parallel plan for
                                                      the context statement (worker start-up)
many writers        ``BEGIN IMMEDIATE`` (one writer)  advisory xact locks per session and
                                                      conversation; ids from sequences
connections         one connection + RLock            ``psycopg_pool`` (psycopg 3), one pooled
                                                      connection per thread per transaction
==================  ================================  ==========================================

Ported today (:data:`lcm.pg.store.PORTED`): ``ingest`` (re-send and replay checks shared with
SQLite), ``grep`` modes ``full_text`` and ``regex`` over messages, summaries and files, ``compact`` /
``compact_until_under`` / ``after_turn`` (a session advisory lock ``LOCK_COMPACTION`` per
conversation around the whole run), ``assemble``, ``describe``, ``expand``, ``expand_query``,
``reset``, ``status``, ``doctor`` (without the SQLite file checks),
``doctor_clean``, ``apply_retention``, ``maintenance``, ``conversation(s)``, ``session_keys``,
semantic recall (``embed_pending``, grep modes ``semantic`` and ``hybrid``: :mod:`lcm.pg.semantic`);
:func:`lcm.pg.copy.copy_sqlite_to_postgres` moves a SQLite store onto a server. Every other
public method of ``LcmStore`` raises :class:`lcm.errors.UnsupportedOnEngineError` naming
itself (today none; a method added to ``LcmStore`` later raises until it is ported).
``amem lcm migrate --to URL`` (tools/cli/lcm_migrate.py) runs the copy function.
"""

from __future__ import annotations

from lcm.pg.url import is_postgres_url, redact_url

__all__ = ["is_postgres_url", "redact_url"]
