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

Most stores hold no inactive or replaced note for long stretches (a fresh import, a store
whose agents never delete), and no lapsed one for most of a day (the nightly sweep deletes
what lapsed), and there those conditions are vacuous. So the edge backend knows, per
condition, whether some point could fail it, and for the expiry from when on: counted at open
(two exact counts over RAM indexes and the earliest expiry read by its index, about 2 ms at
100k points), kept by every write *before* the engine takes it. A write that can make a
condition bite (a point written inactive, with a successor or with an expiry earlier than
any before; a payload setting one of those fields) moves the epoch, and a reader
that left the condition out and finds the epoch moved reads again with every condition said
(``amem.index.NoteIndex.read_as_tenant``). A clearing write (``superseded_by`` emptied, a note
active again) leaves its condition said: the tracker errs toward saying it. A hard delete
(the expiry sweep, a purge) has the backend count afresh at its next read
(``EdgeBackend.store_facts``, once for a run of deletes), and so does the next open.

A note that lapsed stays in the store until the nightly sweep, and until then the expiry's
range bites. Beside the tenant or the live key it doubles the scan as any second condition
does (the key beside the range 28.6 ms against 11.0 for the key alone at 100k plain points;
``must_not`` of the lapsed ids 27.7, scratch ``legs14.py``). So the first read after an expiry
came has the backend give the active notes whose expiry came the lapsed key
(``EdgeBackend.lapse``): from then on the key leaves them out by itself, and the range is left
out of a read naming the key until the next expiry comes (``key_expiry_from``). The tracker
keeps the time up to which keys are lapsed (``lapsed_upto``), and the earliest expiry after
it, lowered by any write of an earlier one that the key does not already call lapsed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from amem.backends.base import EXPIRY_FIELD

#: the fields whose conditions the tracker knows to be vacuous
ACTIVE, SUCCESSOR, EXPIRY = "is_active", "superseded_by", EXPIRY_FIELD
#: the two conditions that hold for good or not at all (the expiry is a time)
STATES = frozenset({ACTIVE, SUCCESSOR})


def _inactive(value: Any) -> bool:
    """A point's ``is_active`` that fails ``Match("is_active", True)`` (or may)."""
    return not (isinstance(value, (bool, np.bool_)) and bool(value))


def _set(value: Any) -> bool:
    """A value ``IsEmpty`` does not hold for (missing, null and [] are empty), or may not."""
    return value is not None and not (isinstance(value, (list, tuple)) and not value)


def _expiry(value: Any) -> float:
    """The time from which an ``expires_ts`` value may hide its point: the number itself, no
    time for an empty value, and ``-inf`` (at once) for a value the tracker cannot read (the
    range matches no string, but the tracker errs toward saying the condition)."""
    if not _set(value):
        return math.inf
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return float(value) if not math.isnan(value) else -math.inf
    return -math.inf


@dataclass(frozen=True)
class Known:
    """One reading of the tracker."""

    #: the state conditions no point fails (of :data:`STATES`)
    vacuous: frozenset[str]
    #: no point has an expiry before this time (epoch seconds)
    expiry_from: float
    #: every active point whose expiry is at or before this time carries the lapsed key
    lapsed_upto: float
    #: no point has an expiry after ``lapsed_upto`` and before this time
    key_expiry_from: float
    #: moves whenever a condition starts to bite, and at each load
    epoch: int

    @property
    def complete(self) -> bool:
        """Nothing can be learnt by counting again: no condition bites at all."""
        return self.vacuous == STATES and self.expiry_from == math.inf


class LiveFacts:
    """Which live conditions exclude no point of a store, kept as points are written."""

    def __init__(self) -> None:
        # until :meth:`load` has counted the store: every condition may bite
        self._biting = set(STATES)
        self._expiry_from = -math.inf
        # no key is lapsed until :meth:`lapsed` says so (an open gives lapsed keys back)
        self._lapsed_upto = -math.inf
        self._key_expiry_from = -math.inf
        self._epoch = 0
        self._lock = threading.Lock()

    @property
    def lapsed_upto(self) -> float:
        """The time up to which active points carry the lapsed key (read inside the engine
        gate by every write computing a key, as :meth:`lapsed` is called inside it)."""
        return self._lapsed_upto

    def load(self, *, inactive: int, superseded: int, earliest_expiry: float | None,
             earliest_after_lapsed: float | None = None) -> None:
        """The store's counts now: points failing ``Match("is_active", True)``, points with a
        successor, the earliest numeric expiry and the earliest after ``lapsed_upto`` (None:
        no point has one; the second defaults to the first)."""
        biting = {name for name, count in ((ACTIVE, inactive), (SUCCESSOR, superseded))
                  if count > 0}
        if earliest_after_lapsed is None and self._lapsed_upto == -math.inf:
            earliest_after_lapsed = earliest_expiry
        with self._lock:
            self._epoch += 1
            self._biting = biting
            self._expiry_from = math.inf if earliest_expiry is None else earliest_expiry
            self._key_expiry_from = (math.inf if earliest_after_lapsed is None
                                     else earliest_after_lapsed)

    def lapsed(self, upto: float, next_expiry: float | None) -> None:
        """The active points whose expiry is at or before ``upto`` now carry the lapsed key,
        and ``next_expiry`` is the earliest after it (None: none). The epoch moves: a reader
        that left the range out at an earlier time may have had a note hidden by the new
        keys whose expiry came during its reads."""
        with self._lock:
            self._lapsed_upto = max(self._lapsed_upto, upto)
            self._key_expiry_from = math.inf if next_expiry is None else next_expiry
            self._epoch += 1

    def moving(self) -> None:
        """The backend is about to change keys a reader may have relied on: the epoch moves."""
        with self._lock:
            self._epoch += 1

    def written(self, payloads: Iterable[Mapping[str, Any]]) -> None:
        """Whole points are about to be upserted (called before the engine takes them)."""
        found: set[str] = set()
        expiries = []
        for payload in payloads:
            if _inactive(payload.get(ACTIVE)):
                found.add(ACTIVE)
            if _set(payload.get(SUCCESSOR)):
                found.add(SUCCESSOR)
            expiries.append(_expiry(payload.get(EXPIRY)))
        self._bite(found, expiries)

    def changed(self, payload: Mapping[str, Any]) -> None:
        """A payload is about to be merged into existing points: only the keys it holds change."""
        found = {SUCCESSOR} if SUCCESSOR in payload and _set(payload[SUCCESSOR]) else set()
        if ACTIVE in payload and _inactive(payload[ACTIVE]):
            found.add(ACTIVE)
        self._bite(found, [_expiry(payload.get(EXPIRY))])

    def _bite(self, found: set[str], expiries: list[float]) -> None:
        with self._lock:
            earliest = min(expiries, default=math.inf)
            # an expiry at or before ``lapsed_upto`` is written with the lapsed key (the
            # writer computes it inside the gate): the key leaves that point out by itself
            after = min((e for e in expiries if not -math.inf < e <= self._lapsed_upto),
                        default=math.inf)
            if not found <= self._biting or earliest < self._expiry_from \
                    or after < self._key_expiry_from:
                self._biting |= found
                self._expiry_from = min(self._expiry_from, earliest)
                self._key_expiry_from = min(self._key_expiry_from, after)
                self._epoch += 1

    def get(self) -> Known:
        """What holds now, with the epoch a reader checks after its reads."""
        with self._lock:
            return Known(frozenset(STATES - self._biting), self._expiry_from,
                         self._lapsed_upto, self._key_expiry_from, self._epoch)


__all__ = ["ACTIVE", "EXPIRY", "Known", "LiveFacts", "STATES", "SUCCESSOR"]
