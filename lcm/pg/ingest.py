"""Ingest on PostgreSQL: SQLite's re-send and replay checks, then a batch's rows in few statements.

A batch is one transaction on one pooled connection (``PgLcmStore.ingest`` takes the session
and conversation advisory locks first). After the shared checks (:func:`lcm.resend.drop_resent`,
:func:`lcm.resend.check_replay_flood`, the same functions as on SQLite) it sends three
statements: where the conversation's sequence and context end together with the batch's ids
from the server's sequence; the rows by ``COPY ... FROM STDIN``; the context items and the
conversation's ``updated_at`` in one statement. Statement for statement this replaced five
(benchmarks/RESULTS.md, "LCM on PostgreSQL"). What still bounds the batch is the server
computing each text's tsvector and token count and adding it to both GIN indexes inside the
COPY (``lcm.pg.schema``), which this module does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lcm.config import LcmConfig
from lcm.errors import LargeFilesDirMissingError
from lcm.ingest import insert_files_and_context, message_rows
from lcm.normalize import NormalizedMessage
from lcm.resend import check_replay_flood, drop_resent
from lcm.largefiles import LargeFileStore
from lcm.pg.db import PgConnection
from lcm.tokens import estimate_tokens

__all__ = ["store_messages_pg", "refuse_files_without_dir", "MESSAGE_COLUMNS"]

#: the columns ingest writes (the server computes ``words`` and ``n_words`` from ``content``)
MESSAGE_COLUMNS = ("id", "conversation_id", "seq", "role", "content", "token_count", "identity_hash",
                   "stable_event_key", "file_id", "created_at", "name", "source_role")  # fmt: skip
#: the conversation's last sequence number and context ordinal, and ``n`` fresh message ids
_POSITIONS = (
    "SELECT (SELECT coalesce(max(seq), 0) FROM messages WHERE conversation_id = ?), "
    "(SELECT coalesce(max(ordinal), 0) FROM context_items WHERE conversation_id = ?), "
    "ARRAY(SELECT nextval(pg_get_serial_sequence('messages', 'id')) FROM generate_series(1, ?))"
)
#: a message's context item each, in order, and the conversation's ``updated_at``: a
#: data-modifying WITH runs whether or not the outer statement reads it
_ITEMS_AND_TOUCH = (
    "WITH items AS (INSERT INTO context_items(conversation_id, ordinal, item_type, message_id) "
    "SELECT ?, ?::bigint + u.n, 'message', u.id FROM unnest(?::bigint[]) WITH ORDINALITY AS u(id, n)) "
    "UPDATE conversations SET updated_at = ? WHERE id = ?"
)


def refuse_files_without_dir(batch: Sequence[NormalizedMessage], threshold: int,
                             named: Callable[[int, NormalizedMessage], tuple[str, str]],
                             undone: str) -> None:
    """Raise for the first message of ``batch`` over ``threshold`` tokens, which would be kept
    as a large file: a host without ``largeFilesDir`` keeps those in a temporary directory no
    other host reads, gone when its store closes (ingest's batch and a merge refuse alike).
    ``named(i, message)`` gives the message's name in the error and the error's field;
    ``undone`` says what nothing of was stored."""
    for i, m in enumerate(batch):
        tokens = estimate_tokens(m.content)
        if tokens > threshold:
            name, field = named(i, m)
            raise LargeFilesDirMissingError(
                f"{name} holds ~{tokens} tokens, over largeFileThresholdTokens ({threshold}), and is stored as a "
                "file, but this host has no largeFilesDir: set largeFilesDir (LCM_LARGE_FILES_DIR) to a directory "
                f"every host of this database shares; nothing of {undone} was stored", field=field)


def store_messages_pg(c: PgConnection, conversation_id: int, batch: Sequence[NormalizedMessage], cfg: LcmConfig,
                      files: LargeFileStore, now_iso: str, *, copy: bool = True,
                      known_new: bool = False) -> tuple[list[int], int, list[str]]:  # fmt: skip
    """:func:`lcm.ingest.store_messages` on PostgreSQL, inside the caller's transaction.

    ``copy=False`` sends the rows by ``executemany`` instead of COPY (the older path, kept for
    the benchmark's before/after and a test that both store the same rows). ``known_new``: as
    on SQLite, a batch the caller has checked against what is stored (a backup merged), which
    the re-send rules and the replay-flood check would take two equal messages of one time of.

    Returns ``(message_ids, skipped_duplicates, file_ids)``.
    """
    fresh = list(batch) if known_new else drop_resent(c, conversation_id, list(batch), now_iso,
                                                      cfg.resend_window_seconds)
    skipped = len(batch) - len(fresh)
    if not known_new:
        check_replay_flood(c, conversation_id, fresh, cfg)
    if not fresh:
        return [], skipped, []
    # The server hands out the ids (writers of other conversations run at the same time); the
    # conversation lock the caller holds keeps seq and ordinal ours until commit.
    row = c.execute(_POSITIONS, (conversation_id, conversation_id, len(fresh))).fetchone()
    assert row is not None  # a SELECT without FROM returns its one row
    seq, ordinal, ids = int(row[0]), int(row[1]), sorted(int(i) for i in row[2])
    rows, files_rows, file_ids = message_rows(conversation_id, ids, fresh, seq, cfg, files, now_iso)
    if copy:
        # Same rows, transaction and locks as INSERTs: COPY only saves the per-row statements;
        # a duplicate key or a dropped connection still fails the whole batch.
        c.copy_rows("messages", MESSAGE_COLUMNS, rows)
    else:
        c.executemany(f"INSERT INTO messages({', '.join(MESSAGE_COLUMNS)}) "
                      f"VALUES ({', '.join('?' * len(MESSAGE_COLUMNS))})", rows)  # fmt: skip
    if files_rows:  # rare (payloads over the large-file threshold): the shared statements
        insert_files_and_context(c, conversation_id, ordinal, ids, files_rows, now_iso)
    else:
        c.execute(_ITEMS_AND_TOUCH, (conversation_id, ordinal, ids, now_iso, conversation_id))
    return ids, skipped, file_ids
