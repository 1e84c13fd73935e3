"""The points a write moved out of the engine's index since the last build (issue 25).

The engine never changes a point inside an optimized (indexed) segment: a payload or vector
write copies the point into the plain segment that takes new writes and marks the old copy
deleted. Every later search scans that plain segment by brute force. At 10k notes built
(scratch, the search benchmark's corpus) the engine's hybrid query took 0.51 ms, 1.20-1.44 ms
once 3,000 points had a payload write (``benchmarks.readpath_bench --parts moves`` measures a
server's day of searches: benchmarks/RESULTS.md). Upserts were counted toward the next
index build (``amem.index_build``); these moves were not, so a server's day of back-links,
evolution, edits and retrieval counts (written every few minutes) moved its busiest notes
out of the index with nothing to bring them back before the nightly job.

So the edge backend marks each point such a write touches, once per point however often it
is written (a second write to a moved point moves nothing more), and the index builder counts
them beside the points upserted. A build settles the marks made before its copy was taken; a
point written after that is moved again in the swapped-in store and stays marked. An upsert or
a delete drops the mark: the upsert is counted as written, the deleted point is gone.

A point written while it was already in the plain segment (a note added since the last build
whose links are then written) is marked too, though it moved nowhere: counted twice, it brings
a build a little early, never late.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class MovedPoints:
    """Point ids marked by payload and vector writes, each with the order of its last mark."""

    def __init__(self) -> None:
        self._marks: dict[str, int] = {}
        self._seq = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._marks)

    def mark(self, pids: Iterable[str]) -> None:
        """``pids`` were written in place: moved out of their indexed segment, if in one."""
        with self._lock:
            self._seq += 1
            for pid in pids:
                self._marks[pid] = self._seq

    def forget(self, pids: Iterable[str]) -> None:
        """``pids`` were upserted (counted as written) or deleted: no longer counted here."""
        with self._lock:
            for pid in pids:
                self._marks.pop(pid, None)

    def checkpoint(self) -> int:
        """A token for ``settle``: the marks made up to now (taken before a build's copy)."""
        with self._lock:
            return self._seq

    def settle(self, token: int) -> None:
        """A build that copied the store after ``checkpoint`` returned ``token`` finished: the
        points marked until then are indexed again; those marked since stay marked."""
        with self._lock:
            self._marks = {pid: seq for pid, seq in self._marks.items() if seq > token}
