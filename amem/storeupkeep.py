"""The upkeep of a ``MemoryStore``'s engine: its index built on demand or when single writes
have piled up, the ranking fields a long-running process keeps in RAM, and what ``status``
reports of the store (``StoreInfo``)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .backends import EdgeBackend
from .refresh import count_stale
from .search.pipeline import RANK_FIELDS
from .search.visibility import count_expired

if TYPE_CHECKING:
    from .config import AmemConfig
    from .embed.base import Embedder
    from .index import NoteIndex


@dataclass(frozen=True)
class StoreInfo:
    """What ``status`` reports about the note store."""

    backend: str
    location: str
    embedder: str
    dim: int
    points: int
    active_notes: int
    agents: int | None
    #: notes whose vector embeds an earlier text (an interrupted write; see ``amem.refresh``)
    stale_vectors: int = 0
    #: the engine's index build: state, points written since, last run (``amem.index_build``)
    index_build: dict[str, Any] | None = None
    #: notes past their ``expires_at`` (invisible, not in ``active_notes``) the sweep will delete
    expired_pending_sweep: int = 0
    #: the ranking fields kept in RAM by a long-running process (``keep_ranking_fields``):
    #: state, points, passes, seconds; None when this process keeps none
    rank_table: dict[str, Any] | None = None
    #: the threads the embedded engine searches on (``search_threads``); None for a Qdrant
    #: server, which sizes its own
    search_threads: int | None = None
    #: the conditions this process's searches leave out of the engine's filters because no
    #: note fails them now (``StoreFacts.left_out``; "tenant" while one agent owns every
    #: note): each costs the scan of the engine's plain segment (docs/readpath.md). Empty
    #: for a Qdrant server, which says every condition.
    filters_left_out: tuple[str, ...] = ()
    #: every note carries its live key, so a search of one agent among several names its
    #: agent and the note's state as one indexed condition (``backends.base.LIVE_KEY``);
    #: False for a Qdrant server, and for an older store opened without room to key it
    filters_keyed: bool = False


class IndexUpkeep:
    """What a ``MemoryStore``'s maintenance calls do to its engine; the store checks that it
    is open before each."""

    def __init__(self, index: "NoteIndex", config: "AmemConfig", lock: threading.RLock) -> None:
        self._index = index
        self._config = config
        self._lock = lock
        #: single writes start a due index build in the background (``keep_index_built``)
        self.builds_after_writes = False

    def build_when_due(self, *, wait: bool = True) -> None:
        """Start the index build in the background once single writes reach a bulk write's
        growth trigger (``IndexBuilder.maybe_build(growing=True)``: ``optimize_after``, or a
        quarter of the points indexed if more, at most half a segment). Single writes are
        adds, and the payload writes of edits, deletes, back-links, usage and retrieval
        counts, which move indexed points out of the index (``amem.backends._edge_moved``).
        Each build copies the whole store, so the trigger grows with it, as for an import: at
        the plain threshold a 1M-note store would be copied every 5,000 adds (about a minute
        at the default model's pace). A write while a build runs leaves it owed: the build
        thread runs again when it is due. A read's call (``wait=False``) gives up rather than
        wait for the store's lock."""
        if self.builds_after_writes:
            self._index.build.maybe_build(background=True, growing=True, wait=wait)

    def optimize(self) -> None:
        """Build the engine's indexes (HNSW) now, and record the build's time."""
        with self._lock:
            started = time.perf_counter()
            self._index.backend.optimize()
            self._index.build.optimized(time.perf_counter() - started)

    def keep_ranking_fields(self, wait: float) -> bool:
        """Keep the ranking fields in RAM (``MemoryStore.keep_ranking_fields``)."""
        if self._config.rank_table <= 0:
            return False
        kept = self._index.backend.keep_fields(RANK_FIELDS, self._config.rank_table)
        if kept and wait > 0:
            self._index.backend.field_table(wait)
        return kept

    def info(self, backend: str, location: str, embedder: "Embedder") -> StoreInfo:
        """What ``status`` reports: engine, embedder, counts, index build, pending work."""
        facts = self._index.backend.store_facts()
        return StoreInfo(
            backend=backend, location=location, embedder=embedder.model_id, dim=embedder.dim,
            points=self._index.backend.count(None),
            active_notes=self._index.backend.count(self._index.live_where()),
            agents=None, stale_vectors=count_stale(self._index),
            index_build=self._index.build.to_dict(),
            expired_pending_sweep=count_expired(self._index),
            rank_table=self._index.backend.field_table(),
            search_threads=(self._index.backend.search_threads
                            if isinstance(self._index.backend, EdgeBackend) else None),
            filters_left_out=tuple(facts.left_out(self._index.clock.now().timestamp())),
            filters_keyed=facts.keyed)


__all__ = ["IndexUpkeep", "StoreInfo"]
