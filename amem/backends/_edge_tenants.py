"""Whether one agent owns every point of an edge store, so a search may leave its tenant out.

The engine searches a plain (not yet indexed) segment by brute force, and there the shape of
the filter sets the cost. At 100k plain points (scratch, the search benchmark's corpus, one
engine search thread) a dense query took 12.3 ms with one condition, any one; 14-18 ms with
``is_active``, the expiry range and ``IsEmpty("superseded_by")`` together; and 28-34 ms as
soon as an equality on the ``agent_id`` keyword (or on any keyword or integer field) stood
beside another condition. Indexed segments do not care (1.2 ms every way at 100k). Every
store has a plain part between builds (up to ``optimize_after`` or a quarter of the indexed
points, all of it right after a bulk write), and most stores hold one agent, whose tenant
condition then excludes nothing.

So the edge backend knows when its points all belong to one agent: read from the tenant
index at open (a facet of at most two values), kept by every upsert. A search of that agent
may leave the condition out and then checks :meth:`SoleTenant.epoch` after its engine reads:
an upsert that brings a second agent moves the epoch *before* the engine takes the points,
so a search that could have seen them finds the epoch moved and searches again with the
tenant named (``amem.search.pipeline``). A hard delete has the backend read the tenant index
afresh at the next read (``EdgeBackend.store_facts``): the last point of a second agent gone,
the store is sole again; until then the check errs toward naming the tenant.
Only the edge backend does this: its handle holds the store's lock, so no other process
writes it; a Qdrant server may have other writers and always names the tenant.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

#: the payload field every point names its agent in (the engine's tenant index)
TENANT_FIELD = "agent_id"

#: the states of :class:`SoleTenant`
_EMPTY, _SOLE, _MANY = "empty", "sole", "many"


class SoleTenant:
    """The one agent owning every point of a store, kept as points are written."""

    def __init__(self) -> None:
        self._state = _MANY  # until :meth:`load` has read the store: never leave a tenant out
        self._agent: str | None = None
        self._epoch = 0
        self._lock = threading.Lock()

    def load(self, agents: Iterable[Any]) -> None:
        """The distinct agents the store holds now (at most two are needed to tell)."""
        seen = list(agents)
        with self._lock:
            self._epoch += 1
            if not seen:
                self._state, self._agent = _EMPTY, None
            elif len(seen) == 1 and isinstance(seen[0], str):
                self._state, self._agent = _SOLE, seen[0]
            else:
                self._state, self._agent = _MANY, None

    def written(self, agents: Iterable[Any]) -> None:
        """Points of ``agents`` are about to be upserted (called before the engine takes them).

        A point naming no agent counts as another agent: it ends the sole state too."""
        names = set(agents)
        with self._lock:
            if self._state == _MANY or not names:
                return
            if self._state == _EMPTY and len(names) == 1:
                only = next(iter(names))
                if isinstance(only, str):
                    # nothing was stored to leave out: a search already running names its tenant
                    self._state, self._agent = _SOLE, only
                    return
            if self._state == _SOLE and names == {self._agent}:
                return
            self._state, self._agent = _MANY, None
            self._epoch += 1

    def reassigned(self) -> None:
        """A write may have changed some point's agent (a payload naming ``agent_id``)."""
        with self._lock:
            if self._state != _MANY:
                self._state, self._agent = _MANY, None
                self._epoch += 1

    def get(self) -> tuple[str | None, int]:
        """(the agent owning every point, or None; the epoch a reader checks afterwards)."""
        with self._lock:
            return (self._agent if self._state == _SOLE else None), self._epoch

    @property
    def epoch(self) -> int:
        """Moves whenever a store stops being owned by one agent (and at each load)."""
        with self._lock:
            return self._epoch


__all__ = ["SoleTenant", "TENANT_FIELD"]
