"""The ranking table: every point's ranking fields kept in RAM, filled in the background.

A search ranks ~100 candidates and reads a few payload keys of each (``amem.search.pipeline.
RANK_FIELDS``); the field cache (``amem.backends._edge_fields``) keeps what it read, so a
candidate seen before costs no engine read. What it has not seen is read from the engine's
payload storage, which is memory-mapped and not pre-read: on a machine whose page cache no
longer holds those pages (after a reboot; after the store was reopened or an index build
rewrote them, since the engine evicts the files of the segments it closes and builds; or as
a kernel reclaims idle file pages, as these VMs' DAMON does) each candidate is a disk read,
and the first searches after ``optimize()`` cost 2.22x their floor at 100k notes (1.58-1.68x
since ``optimize()`` reads its new segments back; docs/readpath.md, "Cold pages and the ranking
table" and "Seventh round").

A long-running process (``amem serve``, ``amem ui``) therefore asks the backend to keep the
ranking fields of every point (:meth:`EdgeBackend.keep_fields`): a daemon thread scrolls the
store in pages of :data:`PAGE`, each page read and kept under the engine gate, resting as
long between pages so searches and writes interleave with the fill (it takes twice as long
as it could, and a search waits for at most one page). What it keeps is
what the field cache keeps, by the same rules: a write forgets its points under the gate (the
next search reads them again), and an index build that swaps the shard clears the cache and
starts a new pass (:meth:`Filler.restart`). A one-shot CLI command never starts it: it would
read the whole store for one search.

Before its first pass the thread reads the store's segment files back into the page cache
(``warm``: :func:`amem.backends._edge_build.read_ahead`), outside the engine gate. The engine
evicts a segment's files when it closes it, so a server that restarts opens a store with none
of it cached, and the table keeps only the ranking fields: the vectors the engine reads, and
the fill's own payload reads, would come from disk one page at a time. Measured at 100k notes
with the table (``benchmarks/readpath_cpu.py --table``, first pass of 100 searches): full /
floor 1.56-1.63x with the page cache dropped and 1.40-1.49x with the files cached; 1.45-1.47x
cold with the read-back (docs/readpath.md, "Seventh round").
Later passes do without: the index builds that start them read their segments back themselves.

The table holds at most ``limit`` points (the ``rank_table`` setting): ~0.55 KB a point with
its values (measured at 100k and 1M: ``benchmarks/RESULTS.md``), so the default of 250k keeps
a served 1M-note store within its 2 GB budget (1.69 GB peak with the model).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
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

    #: "idle" (not asked), "reading back" (the store's files into the page cache, before the
    #: first pass), "filling", "filled", "stopped" or "failed: <why>"
    state: str
    #: points kept by the last (or current) pass
    points: int
    #: complete passes (one at start, one after each index build)
    passes: int
    #: seconds the last complete pass took
    seconds: float
    #: MiB of the store's files read back into the page cache before the first pass
    read_back_mb: int = 0


class Filler:
    """A daemon thread that reads every point's fields through ``read_page``, once at
    :meth:`start` and again after each :meth:`restart`, stopping at ``limit`` points."""

    def __init__(self, read_page: PageReader, limit: int, *, name: str = "amem-rank-table",
                 warm: Callable[[Callable[[], bool]], int] | None = None) -> None:
        """``warm``, if given, runs once before the first pass and returns the bytes it read
        back into the page cache; it is handed a callable that turns True when :meth:`stop`
        is called (it should end early then); a failure of it is logged and the fill goes
        on."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._read_page = read_page
        self._warm = warm
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
            if self._warm is not None:
                self._read_back(self._warm)
                self._warm = None
            self._pass()

    def _read_back(self, warm: Callable[[Callable[[], bool]], int]) -> None:
        started = time.perf_counter()
        self._state = replace(self._state, state="reading back")
        try:
            got = warm(self._stop.is_set)
        except Exception as exc:  # costs the first searches' speed only: say so, fill anyway
            log.warning("ranking table: the store's files could not be read back into the page "
                        "cache (the first searches read them from disk): %s", exc)
            return
        self._state = replace(self._state, read_back_mb=got >> 20)
        log.info("ranking table: %d MB of the store read back into the page cache in %.1f s",
                 got >> 20, time.perf_counter() - started)

    def _pass(self) -> None:
        started = time.perf_counter()
        done = self._state.passes
        kept, offset = 0, None
        self._state = replace(self._state, state="filling", points=0)
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
                self._state = replace(self._state, points=kept)
                if offset is None or kept >= self.limit:
                    break
                self._stop.wait(min(MAX_REST_S, time.perf_counter() - began))
        except Exception as exc:  # a failed fill costs speed, never a search: say so, stop
            log.warning("ranking table: fill stopped after %d points: %s", kept, exc)
            self._state = replace(self._state, state=f"failed: {exc}", points=kept)
            self._done.set()
            return
        if self._stop.is_set():
            self._state = replace(self._state, state="stopped", points=kept)
        else:
            seconds = time.perf_counter() - started
            self._state = replace(self._state, state="filled", points=kept, passes=done + 1,
                                  seconds=round(seconds, 3))
            log.info("ranking table: %d points kept in %.1f s", kept, seconds)
        self._done.set()


__all__ = ["PAGE", "FillState", "Filler"]
