"""The ranking table: every point's ranking fields kept in RAM, filled in the background.

A search ranks ~100 candidates and reads a few payload keys of each (``amem.search.pipeline.
RANK_FIELDS``); the field cache (``amem.backends._edge_fields``) keeps what it read, so a
candidate seen before costs no engine read. What it has not seen is read from the engine's
payload storage, which is memory-mapped and not pre-read: on a machine whose page cache no
longer holds those pages (after a reboot; after the store was reopened or an index build
rewrote them, since the engine evicts the files of the segments it closes and builds; or as
a kernel reclaims idle file pages, as these VMs' DAMON does) each candidate is a disk read,
and the first searches after ``optimize()`` cost 2.22x their floor at 100k notes instead of
1.3x (docs/readpath.md, "Cold pages and the ranking table").

A long-running process (``amem serve``, ``amem ui``) therefore asks the backend to keep the
ranking fields of every point (:meth:`EdgeBackend.keep_fields`): a daemon thread scrolls the
store in pages of :data:`PAGE`, each page read and kept under the engine gate, resting as
long between pages so searches and writes interleave with the fill (it takes twice as long
as it could, and a search waits for at most one page). What it keeps is
what the field cache keeps, by the same rules: a write forgets its points under the gate (the
next search reads them again), and an index build that swaps the shard clears the cache and
starts a new pass (:meth:`Filler.restart`). A one-shot CLI command never starts it: it would
read the whole store for one search.

The table holds at most ``limit`` points (the ``rank_table`` setting): ~0.55 KB a point with
its values (measured at 100k and 1M: ``benchmarks/RESULTS.md``), so the default of 250k keeps
a served 1M-note store within its 2 GB budget (1.69 GB peak with the model).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger(__name__)

#: points read and kept per engine call and per hold of the engine gate (~3 ms at 100k
#: notes: a search arriving meanwhile waits no longer than that)
PAGE = 128
#: after each page the thread rests as long as the page took (at most this many seconds):
#: without a rest it took the gate back before a waiting search could (the gate is not
#: fair, and the thread holds the GIL when it releases it), and searches during the fill of
#: 100k notes took 6x their time (p50 27.7 ms against 4.5 after it)
MAX_REST_S = 0.05
#: seconds ``stop`` waits for a page in progress
STOP_WAIT_S = 10.0

#: one page: (offset to read from, most points to read) -> (points kept, next offset or None),
#: or None when the store is gone (the thread ends)
PageReader = Callable[[str | None, int], "tuple[int, str | None] | None"]


@dataclass(frozen=True)
class FillState:
    """What the fill did last, for ``amem status`` and the benchmarks."""

    #: "idle" (not asked), "filling", "filled", "stopped" or "failed: <why>"
    state: str
    #: points kept by the last (or current) pass
    points: int
    #: complete passes (one at start, one after each index build)
    passes: int
    #: seconds the last complete pass took
    seconds: float


class Filler:
    """A daemon thread that reads every point's fields through ``read_page``, once at
    :meth:`start` and again after each :meth:`restart`, stopping at ``limit`` points."""

    def __init__(self, read_page: PageReader, limit: int, *, name: str = "amem-rank-table"
                 ) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._read_page = read_page
        self.limit = limit
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._state = FillState("idle", 0, 0, 0.0)
        #: set when a pass ends (tests and benchmarks wait on it)
        self._done = threading.Event()

    def start(self) -> None:
        self._wake.set()
        self._thread.start()

    def restart(self) -> None:
        """Fill again from the first point (what was kept was cleared)."""
        self._done.clear()
        self._wake.set()

    def stop(self) -> None:
        """End the thread (a page in progress finishes first); idempotent."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(STOP_WAIT_S)
        self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current pass has ended; False on timeout."""
        return self._done.wait(timeout)

    @property
    def state(self) -> FillState:
        return self._state

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._stop.is_set():
                return
            self._wake.clear()
            self._pass()

    def _pass(self) -> None:
        started = time.perf_counter()
        done = self._state.passes
        kept, offset = 0, None
        self._state = FillState("filling", 0, done, self._state.seconds)
        try:
            while not self._stop.is_set():
                if self._wake.is_set():  # cleared meanwhile: begin again from the first point
                    return
                began = time.perf_counter()
                page = self._read_page(offset, min(PAGE, self.limit - kept))
                if page is None:  # the store was dropped without close()
                    self._stop.set()
                    break
                n, offset = page
                kept += n
                self._state = FillState("filling", kept, done, self._state.seconds)
                if offset is None or kept >= self.limit:
                    break
                self._stop.wait(min(MAX_REST_S, time.perf_counter() - began))
        except Exception as exc:  # a failed fill costs speed, never a search: say so, stop
            log.warning("ranking table: fill stopped after %d points: %s", kept, exc)
            self._state = FillState(f"failed: {exc}", kept, done, self._state.seconds)
            self._done.set()
            return
        if self._stop.is_set():
            self._state = FillState("stopped", kept, done, self._state.seconds)
        else:
            seconds = time.perf_counter() - started
            self._state = FillState("filled", kept, done + 1, round(seconds, 3))
            log.info("ranking table: %d points kept in %.1f s", kept, seconds)
        self._done.set()


__all__ = ["PAGE", "FillState", "Filler"]
