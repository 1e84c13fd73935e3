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

Single adds only count: a minutes-long build never runs inside one ``add``.
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
        # A build in flight when its process died never finished: report that, not "running".
        state = str(saved.get("state", IDLE))
        self.state = FAILED if state == RUNNING else state
        self.last_run: str | None = saved.get("last_run")
        self.seconds: float | None = saved.get("seconds")
        self.error: str | None = saved.get("error") or ("interrupted" if state == RUNNING else None)
        self._thread: threading.Thread | None = None
        self._cancelled = False

    def written(self, points: int) -> None:
        """Count ``points`` upserted (new or changed: either lands in a plain segment)."""
        self.points_since += points
        self._index.meta[META_KEY] = self.to_dict()

    def due(self) -> bool:
        threshold = self._index.config.optimize_after
        return 0 < threshold <= self.points_since and self.state != RUNNING

    def maybe_build(self, *, background: bool) -> bool:
        """Build when due (see the module docstring); whether a build was started."""
        if not self.due():
            return False
        self._set(RUNNING, error=None)
        if not background:
            self._run()
            return True
        self._thread = threading.Thread(target=self._run, name="amem-index-build", daemon=True)
        self._thread.start()
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
        self.points_since = 0
        self.last_run, self.seconds = _now(), round(seconds, 2)
        self._set(DONE, error=None)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "points_since": self.points_since,
                "threshold": self._index.config.optimize_after, "last_run": self.last_run,
                "seconds": self.seconds, "error": self.error}

    def _run(self) -> None:
        index, started = self._index, time.perf_counter()
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
                return
            log.warning("building the index of %s failed: %s", index.location, exc)
            self._set(FAILED, error=str(exc))
            return
        with index.lock:
            self.last_run, self.seconds = _now(), round(time.perf_counter() - started, 2)
            # Points written during the build were replayed onto it outside the index: they
            # still count toward the next build.
            self.points_since = max(0, self.points_since - pending)
            self._set(DONE, error=None)

    def _set(self, state: str, *, error: str | None) -> None:
        index = self._index
        with index.lock:
            self.state, self.error = state, error
            index.meta[META_KEY] = self.to_dict()
            if not index.closed:
                index.backend.write_meta(index.meta)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
