"""The failure record: the last failed summaries, compactions, expansions, embedding runs and trigram payments.

``status`` must say what went wrong last even after a restart, and the process that failed
may be a nightly job long gone, so each failure is a row in the database (written in its own
small transaction, the newest :data:`KEEP` kept), not a counter in memory.
"""

from __future__ import annotations

import logging

from amem.kernel.clock import Clock
from lcm.conn import Connection, Handle
from lcm.events import EventLog
from lcm.models import FailureRecord
from lcm.timeutil import iso

log = logging.getLogger(__name__)

__all__ = ["KINDS", "KEEP", "FailureLog", "record_failure", "last_failure"]

#: what failed: a summary fell back to extractive, a compaction raised or stopped over its
#: target, an expansion's model failed or ran past timeoutMs, an embedding run raised, a
#: payment of the trigram index debt raised (after a turn or nightly: lcm.upkeep)
KINDS = ("summary", "compaction", "expansion", "embedding", "trigram")
#: rows kept; older ones are pruned on each write (status shows only the newest)
KEEP = 100
#: a reason is an exception message or a list of attempts: bounded, so a hostile reply
#: quoted in an error cannot grow the table
_MAX_REASON = 500


def record_failure(db: Handle, at: str, kind: str, reason: str, conversation_id: int | None = None) -> None:
    """Store one failure. Never raises: recording must not turn a degraded path into a broken one."""
    if kind not in KINDS:
        raise ValueError(f"failure kind must be one of {KINDS}; got {kind!r}")
    reason = reason[:_MAX_REASON]
    try:
        with db.atomic() as c:
            newest = c.execute("SELECT id, kind, conversation_id, reason FROM lcm_failures "
                               "ORDER BY id DESC LIMIT 1").fetchone()
            if newest is not None and tuple(newest)[1:] == (kind, conversation_id, reason):
                # The same failure again (an over-budget context on every assemble): one row, new time.
                c.execute("UPDATE lcm_failures SET at = ? WHERE id = ?", (at, newest[0]))
                return
            c.execute("INSERT INTO lcm_failures(at, kind, conversation_id, reason) VALUES (?, ?, ?, ?)",
                      (at, kind, conversation_id, reason))
            c.execute("DELETE FROM lcm_failures WHERE id <= (SELECT max(id) FROM lcm_failures) - ?", (KEEP,))
    except db.errors as exc:  # a full disk, a locked file, a read-only or lost server: say so, keep going
        log.warning("lcm: cannot record a %s failure (%s): %s", kind, reason[:120], exc)


def last_failure(c: Connection) -> FailureRecord | None:
    """The newest recorded failure, or None."""
    row = c.execute("SELECT at, kind, conversation_id, reason FROM lcm_failures ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        return None
    return FailureRecord(at=row[0], kind=row[1], reason=row[3], conversation_id=row[2])


class FailureLog:
    """Records a failure for ``status`` (:func:`record_failure`) and in the operations log, at
    the store's clock; the one recorder every stage of a store shares."""

    def __init__(self, db: Handle, clock: Clock, events: EventLog) -> None:
        self.db = db
        self.clock = clock
        self.events = events

    def record(self, kind: str, reason: str, conversation_id: int | None = None) -> None:
        record_failure(self.db, iso(self.clock.now()), kind, reason, conversation_id)
        self.events.write("failure", kind=kind, reason=reason, conversation_id=conversation_id)
