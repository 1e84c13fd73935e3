"""Retrieval counts held in memory until the edge store persists its writes (issue 25).

A search counts a retrieval for each note it returns (``retrieval_count``, ``last_accessed``:
``amem.search.pipeline``). Written into the engine at once, on an optimized store that write
moves the point out of its optimized segment, and the next search pays for the move (measured
at 10k notes after ``optimize()``: full search 2.06x the engine floor with the writes, 1.76x
without). So ``EdgeBackend.set_payload`` keeps a payload made only of these fields here, and
every read of the backend shows them over the engine's values: ``get``, search ranking,
export, consolidation's sums and the inspector see the same counts as before. They reach the
engine in one batch when the store persists its writes (``flush``, ``close``, before
``optimize``: the nightly job), or when ``MAX_PENDING`` notes are waiting.

A write that carries either field itself (an upsert, a merge summing counts) replaces what is
held for that point: it was computed from a read that already showed it. A crash loses the
counts of searches since the last flush, as the docstring of ``_bump_heat`` allows (heat is a
ranking hint, not an audit log).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

#: the payload fields a search's retrieval bump writes
HEAT_FIELDS = frozenset({"retrieval_count", "last_accessed"})
#: held points past which they are written at once (bounds memory in a long-lived server)
MAX_PENDING = 20_000


def is_heat(payload: dict[str, Any]) -> bool:
    """Whether ``payload`` is a retrieval bump (only the heat fields)."""
    return bool(payload) and payload.keys() <= HEAT_FIELDS


class PendingHeat:
    """The heat fields written since the last flush, per point id (thread-safe)."""

    def __init__(self) -> None:
        self._held: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def record(self, pid: str, payload: dict[str, Any]) -> bool:
        """Hold ``payload`` for ``pid``; True when ``MAX_PENDING`` points are held."""
        with self._lock:
            # a new dict, never one changed in place: ``show`` reads without the lock
            self._held[pid] = {**self._held.get(pid, {}), **payload}
            return len(self._held) >= MAX_PENDING

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
            held, self._held = self._held, {}
        groups: dict[str, tuple[list[str], dict[str, Any]]] = {}
        for pid, payload in held.items():
            key = repr(sorted(payload.items()))
            groups.setdefault(key, ([], payload))[0].append(pid)
        return list(groups.values())

    def put_back(self, groups: Sequence[tuple[list[str], dict[str, Any]]]) -> None:
        """Hold again what could not be written (newer values held meanwhile win)."""
        with self._lock:
            for pids, payload in groups:
                for pid in pids:
                    self._held[pid] = {**payload, **self._held.get(pid, {})}
