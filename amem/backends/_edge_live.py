"""Whether a store's live conditions exclude any point, so a read may leave them out.

Every search and every neighbour read of a write asks for live notes: ``is_active`` true, not
expired (no ``expires_ts`` at or before now) and, for search, current (``superseded_by``
empty). On an indexed segment these cost nothing; on a plain (not yet indexed) segment the
engine checks each condition against each point it scans. At 100k plain points (scratch,
the search benchmark's corpus, one engine search thread, dense query of 50, p50 of 240) the
query took 9.0 ms unfiltered, 10.3 with ``is_active`` alone and 12.2 with the three live
conditions; 10.2 with the tenant alone, 26.3 with the tenant beside ``is_active`` and 27.5
beside all three: a store of several agents pays the doubled scan whenever anything stands
beside its tenant.

Most stores hold no inactive, expiring or replaced note for long stretches (a fresh import,
a store whose agents never set an expiry), and there those conditions are vacuous. So the
edge backend knows, per condition, whether some point could fail it: counted at open (three
exact counts over RAM indexes, about 2 ms at 100k points), kept by every write *before* the
engine takes it. A write that can make a condition bite (a point written inactive, with an
expiry or a successor; a payload setting one of those fields) moves the epoch, and a reader
that left the condition out and finds the epoch moved reads again with every condition said
(``amem.index.NoteIndex.read_as_tenant``). A clearing write (``superseded_by`` emptied, a note
active again) leaves its condition said: the tracker errs toward saying it. A hard delete
(the expiry sweep, a purge) has the backend count afresh at its next read
(``EdgeBackend.store_facts``, once for a run of deletes), and so does the next open.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

#: the fields whose conditions the tracker knows to be vacuous
ACTIVE, SUCCESSOR, EXPIRY = "is_active", "superseded_by", "expires_ts"
FIELDS = frozenset({ACTIVE, SUCCESSOR, EXPIRY})


def _inactive(value: Any) -> bool:
    """A point's ``is_active`` that fails ``Match("is_active", True)`` (or may)."""
    return not (isinstance(value, (bool, np.bool_)) and bool(value))


def _set(value: Any) -> bool:
    """A value ``IsEmpty`` does not hold for (missing, null and [] are empty), or may not."""
    return value is not None and not (isinstance(value, (list, tuple)) and not value)


class LiveFacts:
    """Which live conditions exclude no point of a store, kept as points are written."""

    def __init__(self) -> None:
        # until :meth:`load` has counted the store: every condition may bite
        self._biting = set(FIELDS)
        self._epoch = 0
        self._lock = threading.Lock()

    def load(self, *, inactive: int, superseded: int, expiring: int) -> None:
        """The store's counts now: points failing ``Match("is_active", True)``, points with a
        successor, points with a numeric expiry."""
        biting = {name for name, count in ((ACTIVE, inactive), (SUCCESSOR, superseded),
                                           (EXPIRY, expiring)) if count > 0}
        with self._lock:
            self._epoch += 1
            self._biting = biting

    def written(self, payloads: Iterable[Mapping[str, Any]]) -> None:
        """Whole points are about to be upserted (called before the engine takes them)."""
        found: set[str] = set()
        for payload in payloads:
            if _inactive(payload.get(ACTIVE)):
                found.add(ACTIVE)
            found.update(name for name in (SUCCESSOR, EXPIRY) if _set(payload.get(name)))
        self._bite(found)

    def changed(self, payload: Mapping[str, Any]) -> None:
        """A payload is about to be merged into existing points: only the keys it holds change."""
        found = {name for name in (SUCCESSOR, EXPIRY) if name in payload and _set(payload[name])}
        if ACTIVE in payload and _inactive(payload[ACTIVE]):
            found.add(ACTIVE)
        self._bite(found)

    def _bite(self, found: set[str]) -> None:
        with self._lock:
            if not found <= self._biting:
                self._biting |= found
                self._epoch += 1

    def get(self) -> tuple[frozenset[str], int]:
        """(the fields whose conditions exclude no point; the epoch a reader checks after,
        which moves whenever a condition starts to bite, and at each load)."""
        with self._lock:
            return FIELDS - self._biting, self._epoch


__all__ = ["ACTIVE", "EXPIRY", "FIELDS", "LiveFacts", "SUCCESSOR"]
