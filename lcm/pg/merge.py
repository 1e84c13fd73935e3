"""A backup merged onto PostgreSQL (``lcm.operator.merge``): ingest's own step and its locks.

The merge's shared steps (which conversation, what is stored already, the order by time) run
on any engine; what differs here is how the rows go in (:func:`lcm.pg.ingest.store_messages_pg`,
the server handing out the ids) and that other hosts may write the same conversations while the
merge runs. So it takes ingest's advisory locks (:meth:`lcm.pg.store.PgLcmStore.ingest`): the
session's before it looks for the conversation a backed-up one goes into, and the
conversation's before it writes into it; a host's batch for either waits until the merge
commits, then sees its rows.
"""

from __future__ import annotations

from typing import cast

from lcm.config import LcmConfig
from lcm.conn import Connection
from lcm.largefiles import LargeFileStore
from lcm.normalize import NormalizedMessage
from lcm.pg.db import LOCK_CONVERSATION, LOCK_SESSION, PgConnection, lock_key
from lcm.pg.ingest import store_messages_pg

__all__ = ["PgMergeWriter"]


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
        ids, _, file_ids = store_messages_pg(cast(PgConnection, c), conversation_id, batch, self.config,
                                             self.files, now_iso, known_new=True)
        return ids, file_ids
