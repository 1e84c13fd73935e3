"""A backup merged onto PostgreSQL (``lcm.operator.merge``): ingest's own step and its locks.

The merge's shared steps (which conversation, what is stored already, the order by time) run
on any engine; what differs here is how the rows go in (:func:`lcm.pg.ingest.store_messages_pg`,
the server handing out the ids) and that other hosts may write the same conversations while the
merge runs. So it takes ingest's advisory locks (:meth:`lcm.pg.store.PgLcmStore.ingest`): the
session's before it looks for the conversation a backed-up one goes into, and the
conversation's before it writes into it; a host's batch for either waits until the merge
commits, then sees its rows. Without ``largeFilesDir`` it refuses a message over the large-file
threshold as ingest does (``check_backup`` names them before anything is written).
"""

from __future__ import annotations

from typing import cast

from lcm.config import LcmConfig
from lcm.conn import Connection
from lcm.errors import LcmValidationError
from lcm.largefiles import LargeFileStore
from lcm.normalize import NormalizedMessage
from lcm.pg.db import LOCK_CONVERSATION, LOCK_SESSION, PgConnection, PgDatabase, lock_key
from lcm.pg.ingest import refuse_files_without_dir, store_messages_pg

__all__ = ["PgMergeWriter", "WORDS_SAFE_CHARS", "words_refused"]

#: a text shorter than this cannot make a tsvector over the server's 1 MB (``lcm_tsv``, the
#: ``words`` column): a word costs at most its lexeme's bytes (4 a character, 6 where lowercasing
#: grows one) and 5 more (alignment, count, a position), over at least one separating character,
#: so at most ~5.5 bytes a character of text; only longer texts are sent to the server to measure
WORDS_SAFE_CHARS = 150_000


def words_refused(db: PgDatabase, text: str) -> str | None:
    """Why the server's full-text index cannot take ``text`` as a message's, or None when it can:
    the server computes the vector as ingest's row would, in a statement of its own that writes
    nothing (a short text is not sent)."""
    if len(text) < WORDS_SAFE_CHARS:
        return None
    try:
        db.scalar("SELECT length(lcm_tsv(?))", (text,))
    except LcmValidationError as exc:  # lcm.pg.db: a value over one of the server's limits
        cause = exc.__cause__
        return str(getattr(getattr(cause, "diag", None), "message_primary", None) or exc)
    return None


class PgMergeWriter:
    """The merge's writer on PostgreSQL (``lcm.operator.merge.MergeWriter``)."""

    def __init__(self, config: LcmConfig, files: LargeFileStore) -> None:
        self.config = config
        self.files = files

    def enter_session(self, c: Connection, session_key: str | None, session_id: str | None) -> None:
        # the name ingest locks for the same session (PgLcmStore.ingest)
        name = f"key:{session_key}" if session_key is not None else f"id:{session_id}"
        c.execute("SELECT pg_advisory_xact_lock(?::int4, ?::int4)", (LOCK_SESSION, lock_key(name)))

    def enter_conversation(self, c: Connection, conversation_id: int) -> None:
        c.execute("SELECT pg_advisory_xact_lock(?::int4, ?::int4)",
                  (LOCK_CONVERSATION, lock_key(str(conversation_id))))

    def store(self, c: Connection, conversation_id: int, batch: list[NormalizedMessage],
              now_iso: str) -> tuple[list[int], list[str]]:
        if not self.config.large_files_dir:
            # check_backup refuses these before anything is written; a caller that skipped it
            # still gets ingest's refusal (the transaction rolls back), never a file kept in a
            # temporary directory that is gone when the store closes
            refuse_files_without_dir(
                batch, self.config.large_file_threshold_tokens,
                lambda _, m: (f"a message of conversation {conversation_id} at {m.created_at}", "backup"),
                "the merge")
        ids, _, file_ids = store_messages_pg(cast(PgConnection, c), conversation_id, batch, self.config,
                                             self.files, now_iso, known_new=True)
        return ids, file_ids
