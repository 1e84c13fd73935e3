"""Store: the new messages of a batch written, with their context items and index entries.

The pipeline of one ingest: :mod:`lcm.normalize` turns what a host sent into rows (refusing a
bad message before anything is written), :mod:`lcm.resend` leaves out what is already stored
and refuses a replay flood (its docstring has the rules), and this module externalizes large
payloads and writes the rest in a few statements.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from lcm.config import LcmConfig
from lcm.conn import Connection
from lcm.largefiles import LargeFileStore, file_reference
from lcm.normalize import NormalizedMessage
from lcm.resend import check_replay_flood, drop_resent
from lcm.tokens import estimate_tokens
from lcm.trigram import MAX_PENDING, index_new_rows

__all__ = ["insert_files_and_context", "message_rows", "store_messages"]

#: the flag row that tells the insert triggers of the message indexes to stand aside
#: (migration ``0006_batched_message_index``): set and cleared inside one transaction, so no
#: other connection ever sees it, and a killed process rolls it back with the batch
_DEFER_ON = "INSERT INTO lcm_index_deferred(id) VALUES (1)"
_DEFER_OFF = "DELETE FROM lcm_index_deferred"
#: most rows one multi-row INSERT names (a statement text per batch size, kept by the
#: connection's statement cache)
_ROWS_PER_INSERT = 500
#: index pages one batch may spend merging segments (FTS5 'merge'; only when a level holds 4)
_MERGE_PAGES = 200


def _insert_many(c: sqlite3.Connection, head: str, width: int, rows: Sequence[tuple[Any, ...]],
                 one: str | None = None) -> None:
    """``head`` + one multi-row ``VALUES`` per chunk of ``rows``, instead of an ``executemany``.

    Each statement execution on ``messages`` sets up its insert triggers (the index and time
    order triggers, standing aside or not) and FTS5's per-statement state; one statement for
    the batch pays that once instead of per row (1.10x messages per CPU-second, in the shape of
    benchmarks/lcm_pg_bench.py). Chunks stay under the connection's bound-parameter limit;
    ``one`` is a row's ``VALUES`` term when it is not ``width`` plain markers.
    """
    per = max(1, min(_ROWS_PER_INSERT, c.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    one = one or "(" + ", ".join("?" * width) + ")"
    for i in range(0, len(rows), per):
        part = rows[i : i + per]
        c.execute(head + ",".join([one] * len(part)), [x for row in part for x in row])


def store_messages(
    c: sqlite3.Connection,
    conversation_id: int,
    batch: list[NormalizedMessage],
    cfg: LcmConfig,
    files: LargeFileStore,
    now_iso: str,
    *,
    trigram_max_pending: int = MAX_PENDING,
    known_new: bool = False,
) -> tuple[list[int], int, list[str]]:
    """Insert the new messages of ``batch`` and their context items (inside a write transaction).

    The whole batch goes in with a few statements: rows, context items and the word index
    each by one ``executemany``; the trigram index is owed (``lcm.trigram``) until the pending
    tail would pass ``trigram_max_pending`` messages (0: index inline, the path before deferral). The indexes are fed here rather than by their insert
    triggers because FTS5 flushes its pending terms at every statement savepoint a trigger
    opens, a new index segment per message (measured 4x slower; benchmarks/lcm_ingest_bench.py).

    ``known_new``: the caller has left out what is stored already and the batch is no host's
    call (a backup merged, ``lcm.operator.merge``): the re-send rules and the replay-flood
    check are not applied (they would take two equal messages of one time for one).

    Returns ``(message_ids, skipped_duplicates, file_ids)``.
    """
    fresh = batch if known_new else drop_resent(c, conversation_id, batch, now_iso, cfg.resend_window_seconds)
    skipped = len(batch) - len(fresh)
    if not known_new:
        check_replay_flood(c, conversation_id, fresh, cfg)
    if not fresh:
        return [], skipped, []
    seq = c.execute("SELECT coalesce(max(seq), 0) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()[0]
    ordinal = c.execute(
        "SELECT coalesce(max(ordinal), 0) FROM context_items WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()[0]
    # Row ids are given, not left to SQLite, so the batch needs no lastrowid per row. max + 1 is
    # what SQLite itself picks for an INTEGER PRIMARY KEY without AUTOINCREMENT; the write
    # transaction holds the database, so no other writer can take these ids meanwhile.
    first = int(c.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]) + 1
    ids = list(range(first, first + len(fresh)))
    rows, files_rows, file_ids = message_rows(conversation_id, ids, fresh, seq, cfg, files, now_iso)
    c.execute(_DEFER_ON)
    try:
        _insert_many(c, "INSERT INTO messages(id, conversation_id, seq, role, content, token_count, identity_hash, "
                        "stable_event_key, file_id, created_at, name, source_role) VALUES ", 12, rows)  # fmt: skip
        texts = [(r[0], r[4]) for r in rows]
        _insert_many(c, "INSERT INTO messages_fts(rowid, content) VALUES ", 2, texts)
        # Fed a batch at a time, FTS5's own automerge falls behind (it works in proportion
        # to the pages a flush writes, and per-row flushes wrote many): segments pile up and
        # every search reads each one. A bounded merge per batch keeps about four per level.
        c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('merge', ?)", (_MERGE_PAGES,))
        # The trigram index is left pending (lcm.trigram) unless the tail grows past the bound.
        index_new_rows(c, texts, trigram_max_pending)
    finally:
        c.execute(_DEFER_OFF)
    insert_files_and_context(c, conversation_id, ordinal, ids, files_rows, now_iso)
    return ids, skipped, file_ids


def message_rows(conversation_id: int, ids: Sequence[int], fresh: Sequence[NormalizedMessage], seq: int,
                 cfg: LcmConfig, files: LargeFileStore, now_iso: str,
                 ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[str]]:
    """The ``messages`` rows of a batch (ids and sequence numbers given), a large payload moved
    to ``files`` with a reference in its place; also the ``large_files`` rows and their ids.
    Shared by both engines: only how ids are handed out and the indexes are fed differ."""
    rows: list[tuple[Any, ...]] = []
    files_rows: list[tuple[Any, ...]] = []
    file_ids: list[str] = []
    for offset, (mid, m) in enumerate(zip(ids, fresh), 1):
        content, file_id = m.content, None
        tokens = estimate_tokens(content)
        if tokens > cfg.large_file_threshold_tokens:
            stored = files.store(conversation_id, content, m.name)
            file_id = stored.file_id
            content = file_reference(stored)
            tokens = estimate_tokens(content)
            files_rows.append((file_id, conversation_id, mid, stored.name, stored.mime_type, stored.size_bytes,
                               stored.token_count, stored.storage_path, stored.exploration_summary, now_iso))
            file_ids.append(file_id)
        rows.append((mid, conversation_id, seq + offset, m.role, content, tokens, m.identity_hash,
                     m.stable_event_key, file_id, m.created_at, m.name, m.source_role))  # fmt: skip
    return rows, files_rows, file_ids


def insert_files_and_context(c: Connection, conversation_id: int, ordinal: int, ids: Sequence[int],
                             files_rows: Sequence[tuple[Any, ...]], now_iso: str) -> None:
    """After the message rows: their large files, one context item each, the conversation's
    ``updated_at`` (portable SQL: the PostgreSQL handle runs it as well)."""
    if files_rows:
        c.executemany(
            "INSERT INTO large_files(file_id, conversation_id, message_id, name, mime_type, size_bytes, "
            "token_count, storage_path, exploration_summary, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            files_rows)
    items = [(conversation_id, ordinal + i, mid) for i, mid in enumerate(ids, 1)]
    if isinstance(c, sqlite3.Connection):  # SQLite: one statement for the batch (see _insert_many)
        _insert_many(c, "INSERT INTO context_items(conversation_id, ordinal, item_type, message_id) VALUES ", 3, items,
                     "(?, ?, 'message', ?)")  # fmt: skip
    else:
        c.executemany("INSERT INTO context_items(conversation_id, ordinal, item_type, message_id) "
                      "VALUES (?, ?, 'message', ?)", items)  # fmt: skip
    c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now_iso, conversation_id))
