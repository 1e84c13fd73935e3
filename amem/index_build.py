"""When the engine's index is built, and what ``status`` says about it.

Points written after the last ``optimize()`` sit in plain segments that every search scans
by brute force (at 100k points p50 119 ms before, 35 ms after). The nightly job optimises;
between nights a bulk write can leave a fresh store unindexed for a day. So the store counts
the points written since the last build (kept in ``meta.json``) and, at the end of a bulk
write (``add_many``, ``amem import``), builds the index when ``optimize_after`` have
accumulated:

- in the background in a long-lived owner (``add_many``): on the embedded engine the build
  runs on a copy of the shard in a child process (``EdgeBackend.optimize_on_copy``), so
  searches and writes keep running; what was written meanwhile is replayed onto the copy;
- in the foreground where the process ends right after (``amem import``).

**A long bulk write builds as it goes** (``maybe_build(growing=True)`` after each of its
chunks, embedded engine only): a build starts once the points not yet indexed reach
``GROWTH`` of those indexed (and ``optimize_after``), so a search during the write, and during
the last build after it, brute-forces only the part written since. Before, the whole import
sat in plain segments until its one build swapped in: at 100k notes the engine's own query
scanned every vector (p50 35-97 ms quiet, 208 ms loaded). The engine reuses the indexed
segment's HNSW graph when it merges new points into it, and each build waits until the new
part is a fixed share of the old, so the builds' total stays proportional to the store (a
geometric series), not quadratic. A bulk write that ends while a build runs leaves it
``owed``: the build thread runs one more for what was written meanwhile.

Builds must keep up, or the part not yet indexed grows again: with precomputed vectors an
import wrote 100k notes at ~850 a second while the niced builds, on a loaded machine, had
indexed 10k when it ended. So a bulk write also **waits between its chunks** while a build
runs and the points not yet indexed reach ``BACKLOG`` times the growth trigger
(``wait_for_room``): such an import goes at the builds' pace (logged), while one bound by
its embedder (~80 notes a second with the default model) did not wait (20k notes measured).

**Builds stay bounded** (issue 25): on the embedded engine a segment grows by merges only up
to the store's segment limit (``EdgeBackend.segment_kb``, 100 MiB of float vectors by
default), and the growth trigger never passes ``SEGMENT_SHARE`` (half) of it, so no build
writes a segment much above it: the build child's peak RSS follows the segment it writes
(~9 KB a point at 384-d) plus the store it loads (~1 KB a point), not the store's size alone.

**Points moved out of the index count too.** A payload or vector write to an indexed point
moves it into the plain segment (the engine changes no point inside an optimized segment):
back-links, evolution, edits, deletes and the retrieval counts a server writes every few
minutes. The edge backend marks each moved point once (``amem.backends._edge_moved``), and
the points not yet indexed are those written plus those moved (``unindexed``); the count of
moves made before a reopen is kept in ``meta.json`` beside ``points_since``.

Single adds only count: a minutes-long build never runs inside one ``add``. A long-running
owner (``amem serve``: ``MemoryStore.keep_index_built``) has the add that reaches the bulk
write's growth trigger start a build in the background: without that, a server's day of
single adds was searched by brute force until the nightly job (with none, for good). A
one-shot command does not: closing its store would stop the build.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Protocol

from .backends.base import VectorBackend
from .config import AmemConfig
from .errors import AmemError
from .kernel.errors import DiskFullError

log = logging.getLogger(__name__)

META_KEY = "index_build"
IDLE, RUNNING, DONE, FAILED = "idle", "running", "done", "failed"
#: during a bulk write, a build starts when the points written since the last one reach this
#: share of the points indexed (builds at 5k, 10k, ... 25k, 31k, 39k, ... points indexed:
#: each merges a quarter more)
GROWTH = 0.25
#: a bulk write waits while a build runs and the points not yet indexed reach this many times
#: the growth trigger (1.5 x a quarter of those indexed: about 27% of the store at most)
BACKLOG = 1.5
#: on a backend with a segment limit (``segment_points``), a bulk write's build starts once
#: the points not yet indexed reach at most this share of it: two builds' segments then merge
#: into one up to the limit (measured at 1M notes: 15 indexed segments against 22 with two
#: thirds, a search's CPU -20%, the build child's peak 1.51 GB against 1.26), and the backlog
#: a bulk write allows (``BACKLOG`` times the trigger: 0.75 of the limit) stays under it
SEGMENT_SHARE = 0.5
#: what a finished build still owes: nothing, a build under the bulk write's rule (growing),
#: or one at the plain threshold (the bulk write ended while the build ran)
_GROWING, _FINAL = 1, 2


class _Engine(Protocol):
    """What the builder reads of the note index (``amem.index.NoteIndex`` is one)."""

    backend: VectorBackend
    config: AmemConfig
    lock: threading.RLock
    location: str
    closed: bool
    meta: dict[str, Any]


class IndexBuilder:
    """The index-build state of one open store (its ``meta.json`` entry is the saved copy)."""

    def __init__(self, index: _Engine) -> None:
        self._index = index
        saved: dict[str, Any] = dict(index.meta.get(META_KEY, {}))
        #: points written since the last build (counts from this store's creation at first)
        self.points_since = int(saved.get("points_since", 0))
        #: points moved out of the index before this open (the backend marks those since;
        #: a one-shot command's own retrieval counts are written, and counted, as it closes)
        self._moved_before = int(saved.get("points_moved", 0))
        # A build in flight when its process died never finished: report that, not "running".
        state = str(saved.get("state", IDLE))
        self.state = FAILED if state == RUNNING else state
        self.last_run: str | None = saved.get("last_run")
        self.seconds: float | None = saved.get("seconds")
        self.error: str | None = saved.get("error") or ("interrupted" if state == RUNNING else None)
        self._thread: threading.Thread | None = None
        self._cancelled = False
        #: asked for while a build ran (0, ``_GROWING`` or ``_FINAL``): the build thread runs
        #: again for the points written meanwhile if they meet that rule
        self._owed = 0
        #: builds run by this handle (each on-copy build: for benchmarks and tests)
        self.runs = 0
        #: notified at every state change (a bulk write waiting for room wakes on it)
        self._changed = threading.Condition(index.lock)
        #: seconds bulk writes waited for a build (``wait_for_room``) on this handle
        self.waited_s = 0.0

    def written(self, points: int) -> None:
        """Count ``points`` upserted (new or changed: either lands in a plain segment)."""
        self.points_since += points
        self._index.meta[META_KEY] = self.to_dict()

    @property
    def points_moved(self) -> int:
        """Indexed points a payload or vector write moved out of the index since the last
        build (0 on a backend that does not count them: a Qdrant server indexes by itself)."""
        live = getattr(self._index.backend, "moved_points", None)
        if live is None:
            return self._moved_before
        if not self._moved_before:
            return int(live())
        if self._index.closed:  # the engine is gone: what the close saved (``amem import``)
            return int(self._index.meta.get(META_KEY, {}).get("points_moved", 0))
        # A point moved before the reopen and again since is counted twice (the marks of an
        # earlier process are only a number): never more than the store's points.
        return min(self._moved_before + int(live()), self._index.backend.count(None))

    @property
    def unindexed(self) -> int:
        """The points a search brute-forces, as counted: written or moved since the last build."""
        return self.points_since + self.points_moved

    def due(self) -> bool:
        threshold = self._index.config.optimize_after
        return 0 < threshold <= self.unindexed and self.state != RUNNING

    def _trigger(self) -> float:
        """The points not yet indexed at which a bulk write starts a build: ``GROWTH`` of
        those indexed (the engine's count less them), at most ``SEGMENT_SHARE`` of the
        backend's segment limit (``segment_points``, where it has one), at least
        ``optimize_after``.

        The engine builds the plain segment whole, whatever its size, and a build's memory
        follows the size of the segment it writes: without the cap a 1M import's last builds
        would index 250k points at once, above the limit.
        """
        indexed = max(0, self._index.backend.count(None) - self.unindexed)
        growth = GROWTH * indexed
        segment = getattr(self._index.backend, "segment_points", None)
        if isinstance(segment, int) and segment > 0:
            growth = min(growth, SEGMENT_SHARE * segment)
        return max(self._index.config.optimize_after, growth)

    def _due_growing(self) -> bool:
        """Due under a bulk write's rule (the count read only once the plain rule is met)."""
        return self.due() and self.unindexed >= self._trigger()

    def _grows_on_copy(self) -> bool:
        return (self._index.config.optimize_after > 0
                and getattr(self._index.backend, "optimize_on_copy", None) is not None)

    def wait_for_room(self) -> float:
        """Wait, between a bulk write's chunks, while a build runs and the points not yet
        indexed reach ``BACKLOG`` times the trigger; seconds waited.

        Waits on the store lock's condition, which releases the lock meanwhile (the build
        thread takes it to record its end), and rechecks at every state change and each
        second; a failed or cancelled build ends the wait.
        """
        if not self._grows_on_copy():
            return 0.0
        started = time.perf_counter()
        with self._index.lock:
            while (self.state == RUNNING and not self._cancelled
                   and self.unindexed >= BACKLOG * self._trigger()):
                self._changed.wait(timeout=1.0)
        waited = time.perf_counter() - started
        if waited >= 1.0:
            log.info("a bulk write into %s waited %.1f s for the index build (%d points not "
                     "yet indexed)", self._index.location, waited, self.points_since)
        self.waited_s += waited
        return waited

    def maybe_build(self, *, background: bool, growing: bool = False,
                    wait: bool = True) -> bool:
        """Build when due (see the module docstring); whether a build was started.

        ``growing`` is a bulk write's call between its chunks: it builds only in the
        background, on a backend that builds on a copy, under the ``GROWTH`` rule. A call
        while a build runs is remembered, and that build's thread runs again when it ends.
        ``wait=False`` (a read's call) asks nothing while the points not yet indexed are below
        ``optimize_after`` (read without the lock), and gives up at once when a write holds
        the store's lock.
        """
        if growing and not (background and self._grows_on_copy()):
            return False  # a server's engine indexes by itself; a foreground build waits
        if not wait and not 0 < self._index.config.optimize_after <= self.unindexed:
            return False  # read without the lock: a search pays only this, most of the time
        if not self._index.lock.acquire(blocking=wait):
            return False
        try:
            if not self._claim(growing):
                return False
        finally:
            self._index.lock.release()
        if not background:
            self._run()
            return True
        self._thread = threading.Thread(target=self._run, name="amem-index-build", daemon=True)
        self._thread.start()
        return True

    def _claim(self, growing: bool) -> bool:
        """Under the store's lock: mark a build running when one is due (True), or remember
        the call for the build running now."""
        if self.state == RUNNING:
            self._owed = max(self._owed, _GROWING if growing else _FINAL)
            return False
        if not (self._due_growing() if growing else self.due()):
            return False
        self._owed = 0
        self._set(RUNNING, error=None)
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background build (close and tests)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def cancel(self) -> None:
        """Stop a background build (the store is closing): its copy is dropped, state idle."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        self._cancelled = True
        child = getattr(self._index.backend, "build_child", None)
        if child is not None:
            child.kill()
        thread.join()

    def optimized(self, seconds: float) -> None:
        """An in-place ``optimize()`` (the nightly job) finished: nothing is left unindexed."""
        self.points_since = self._moved_before = 0  # the backend settled its own marks
        self.last_run, self.seconds = _now(), round(seconds, 2)
        self._set(DONE, error=None)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "points_since": self.points_since,
                "points_moved": self.points_moved,
                "threshold": self._index.config.optimize_after, "last_run": self.last_run,
                "seconds": self.seconds, "error": self.error}

    def _run(self) -> None:
        """Build, then again while a call during the build left one owed (state RUNNING
        throughout, so no other thread starts one meanwhile)."""
        while self._build_once():
            pass

    def _build_once(self) -> bool:
        """One build; whether another is owed and due (then the state stays RUNNING)."""
        index, started = self._index, time.perf_counter()
        with index.lock:
            pending = self.points_since
        try:
            on_copy = getattr(index.backend, "optimize_on_copy", None)
            if on_copy is None:
                index.backend.optimize()
            else:
                on_copy()
        except (AmemError, DiskFullError, OSError) as exc:
            if self._cancelled:  # killed by close(): nothing failed, the build is still owed
                self._set(IDLE, error=None)
                return False
            log.warning("building the index of %s failed: %s", index.location, exc)
            self._set(FAILED, error=str(exc))
            return False
        with index.lock:
            self.runs += 1
            self.last_run, self.seconds = _now(), round(time.perf_counter() - started, 2)
            # Points written during the build were replayed onto it outside the index: they
            # still count toward the next build.
            self.points_since = max(0, self.points_since - pending)
            self._moved_before = 0  # moved before this open: in the copy the build indexed
            owed, self._owed = self._owed, 0
            self.state = DONE  # for due(); RUNNING again below when another build follows
            again = not self._cancelled and (
                self._due_growing() if owed == _GROWING else owed == _FINAL and self.due())
            self._set(RUNNING if again else DONE, error=None)
            return again

    def _set(self, state: str, *, error: str | None) -> None:
        index = self._index
        with index.lock:
            self.state, self.error = state, error
            index.meta[META_KEY] = self.to_dict()
            if not index.closed:
                index.backend.write_meta(index.meta)
            self._changed.notify_all()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
