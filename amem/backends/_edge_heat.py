"""Retrieval counts held in memory until the edge store persists its writes (issue 25).

A search counts a retrieval for each note it returns (``retrieval_count``, ``last_accessed``:
``amem.search.pipeline``). Written into the engine at once, on an optimized store that write
moves the point out of its optimized segment, and the next search pays for the move (measured
at 10k notes after ``optimize()``: full search 2.06x the engine floor with the writes, 1.76x
without). So ``EdgeBackend.set_payload`` keeps a payload made only of these fields here, and
every read of the backend shows them over the engine's values: ``get``, search ranking,
export, consolidation's sums and the inspector see the same counts as before. They reach the
engine in one batch when the store persists its writes (``flush``, ``close``, before
``optimize``: the nightly job), when ``MAX_PENDING`` notes are waiting, or at the first search
``MAX_AGE_S`` after the oldest count held (a long-lived server that is killed loses at most
that much heat, not a day's).

A write that carries either field itself (an upsert, a merge summing counts) replaces what is
held for that point: it was computed from a read that already showed it. A crash loses the
counts of searches since the last write of them (at most ``MAX_AGE_S``), as the docstring of
``_bump_heat`` allows (heat is a ranking hint, not an audit log).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

#: the payload fields a search's retrieval bump writes
HEAT_FIELDS = frozenset({"retrieval_count", "last_accessed"})
#: held points past which they are written at once (bounds memory in a long-lived server)
MAX_PENDING = 20_000
#: seconds the oldest held count may wait before the next search writes them all (one batch
#: every few minutes costs an optimized store little; a kill loses no more than this)
MAX_AGE_S = 300.0


def is_heat(payload: dict[str, Any]) -> bool:
    """Whether ``payload`` is a retrieval bump (only the heat fields)."""
    return bool(payload) and payload.keys() <= HEAT_FIELDS


class PendingHeat:
    """The heat fields written since the last flush, per point id (thread-safe)."""

    def __init__(self, max_age_s: float = MAX_AGE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._held: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._max_age_s, self._clock = max_age_s, clock
        #: when the oldest count now held was recorded (None: nothing held)
        self._since: float | None = None

    def __len__(self) -> int:
        return len(self._held)

    def record(self, pid: str, payload: dict[str, Any]) -> bool:
        """Hold ``payload`` for ``pid``; True when it is time to write them all:
        ``MAX_PENDING`` points are held, or the oldest has waited ``max_age_s``."""
        now = self._clock()
        with self._lock:
            # a new dict, never one changed in place: ``show`` reads without the lock
            self._held[pid] = {**self._held.get(pid, {}), **payload}
            if self._since is None:
                self._since = now
            return len(self._held) >= MAX_PENDING or now - self._since >= self._max_age_s

    def show(self, pid: str, payload: dict[str, Any], fields: Sequence[str] | None) -> None:
        """Lay the held fields over a payload read from the engine (``fields``: the keys the
        read asked for, ``None`` for the whole payload)."""
        held = self._held.get(pid)
        if held:
            for key, value in held.items():
                if fields is None or key in fields:
                    payload[key] = value

    def forget(self, pids: Iterable[str], keys: Iterable[str] | None = None) -> None:
        """Drop what is held for ``pids`` (only ``keys`` of it when given): a write replaced it."""
        drop = None if keys is None else [k for k in keys if k in HEAT_FIELDS]
        if drop == []:
            return
        with self._lock:
            for pid in pids:
                held = self._held.get(pid)
                if held is None:
                    continue
                kept = {} if drop is None else {k: v for k, v in held.items() if k not in drop}
                if kept:
                    self._held[pid] = kept
                else:
                    del self._held[pid]

    def take(self) -> list[tuple[list[str], dict[str, Any]]]:
        """Everything held, emptied: points grouped by equal payloads (one engine write each;
        the notes one search returned share their stamp, and usually their count)."""
        with self._lock:
            held, self._held, self._since = self._held, {}, None
        groups: dict[str, tuple[list[str], dict[str, Any]]] = {}
        for pid, payload in held.items():
            key = repr(sorted(payload.items()))
            groups.setdefault(key, ([], payload))[0].append(pid)
        return list(groups.values())

    def put_back(self, groups: Sequence[tuple[list[str], dict[str, Any]]]) -> None:
        """Hold again what could not be written (newer values held meanwhile win)."""
        with self._lock:
            if self._since is None and groups:
                self._since = self._clock()
            for pids, payload in groups:
                for pid in pids:
                    self._held[pid] = {**payload, **self._held.get(pid, {})}
