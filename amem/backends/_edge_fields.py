"""The ranking fields of recently ranked points, kept by the edge backend between searches.

A search ranks ~100 candidates and needs a few payload keys of each (``amem.search.pipeline.
RANK_FIELDS``). Asking the engine for them made each leg load every candidate's payload: at
10k notes, optimized, a 50-hit dense query took 0.29 ms without payload and 0.64 ms with one
key (the engine decodes the whole stored payload to pick it), more than the rest of the query.
Candidates recur from search to search (the same notes answer related questions), so the
backend keeps the keys it read, per point, and the legs ask the engine for ids and scores only.

Kept values are never stale: every write through the backend that changes a payload forgets
its points (``EdgeBackend`` calls :meth:`FieldCache.forget` under its engine gate, the gate
a read holds while it fills the cache), except the retrieval counts written from memory,
which are merged into what is kept (:meth:`FieldCache.patch`: they touch every search's
matches); a build that swaps the shard clears it. The held retrieval counts
(``amem.backends._edge_heat``) are laid over a kept payload as over a read one. The cache holds
at most ``capacity`` points; the oldest filled go first. A long-running process fills it
with every point's ranking fields (the ranking table, ``amem.backends._edge_table``) and
raises the capacity to match; rows are compact tuples for that reason (~0.55 KB a point with
its values, against ~1.1 KB as dicts).

The dense vectors of the head a search diversifies (step 4c reads the first 20 candidates'
vectors) are kept the same way, apart, since one is five times a kept payload: reading 20 of
them cost 0.38 ms of a 3.7 ms search at 10k notes (the binding hands each back as a list of
384 floats). A vector changes only with a whole-point upsert or a vector update, both of which
forget the point, as every payload write does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

_V = TypeVar("_V")
#: kept string values up to this length are interned: note types and other short codes
#: repeat across a store, and one object each instead of one per point saves ~55 bytes a point
_SHORT = 16
#: a kept payload: the tuple of the keys present, then their values in the same order (one
#: tuple of ~100 bytes against ~310 for the dict it stands for, which counts when the ranking
#: table holds a whole store: ``amem.backends._edge_table``)
_Row = tuple[Any, ...]

#: points kept on demand (a row of a few short values: ~0.5 KB with them; 20k points ~10 MB);
#: the ranking table raises it by the points it keeps
CAPACITY = 20_000
#: vectors kept (1.5 KB each at 384 dimensions: ~6 MB)
VECTOR_CAPACITY = 4_096


class FieldCache:
    """Payload subsets by point id, one table per field list asked for."""

    def __init__(self, capacity: int = CAPACITY, vector_capacity: int = VECTOR_CAPACITY
                 ) -> None:
        self.capacity = capacity
        self.vector_capacity = vector_capacity
        self._tables: dict[tuple[str, ...], dict[str, _Row]] = {}
        #: the key tuples of the rows, one object per distinct set of keys present
        self._shapes: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._size = 0
        self._vectors: dict[str, np.ndarray] = {}
        #: lookups answered from the cache / read from the engine (for benchmarks and tests)
        self.hits = 0
        self.misses = 0

    def get(self, fields: tuple[str, ...], pids: Iterable[str]
            ) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """The kept payloads among ``pids`` (each a new dict) and the ids that are not kept,
        in the order given."""
        rows, missing = self._split(self._tables.get(fields, {}), pids)
        return {pid: dict(zip(row[0], row[1:])) for pid, row in rows.items()}, missing

    def put(self, fields: tuple[str, ...], pid: str, payload: dict[str, Any]) -> None:
        """Keep ``payload`` (the keys ``fields`` read) of ``pid``."""
        table = self._tables.setdefault(fields, {})
        if pid not in table:
            self._size += 1
        self._keep(table, pid, payload)
        while self._size > self.capacity:
            self._evict_one()

    def _keep(self, table: dict[str, _Row], pid: str, payload: dict[str, Any]) -> None:
        keys = tuple(payload)
        keys = self._shapes.setdefault(keys, keys)
        table[pid] = (keys, *(sys.intern(v) if type(v) is str and len(v) <= _SHORT else v
                              for v in payload.values()))

    def get_vectors(self, pids: Iterable[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """The kept vectors among ``pids`` (read-only arrays) and the ids not kept, in order."""
        return self._split(self._vectors, pids)

    def _split(self, table: dict[str, _V], pids: Iterable[str]) -> tuple[dict[str, _V], list[str]]:
        """What ``table`` keeps of ``pids``, and the ids it does not keep (counted)."""
        found: dict[str, _V] = {}
        missing: list[str] = []
        for pid in pids:
            kept = table.get(pid)
            if kept is None:
                missing.append(pid)
            else:
                found[pid] = kept
        self.hits += len(found)
        self.misses += len(missing)
        return found, missing

    def put_vector(self, pid: str, vector: np.ndarray) -> None:
        """Keep ``pid``'s dense vector; it is made read-only, since every later read shares it."""
        vector.flags.writeable = False
        self._vectors.pop(pid, None)
        self._vectors[pid] = vector
        while len(self._vectors) > self.vector_capacity:
            del self._vectors[next(iter(self._vectors))]

    def patch(self, pids: Sequence[str], payload: dict[str, Any]) -> None:
        """Merge a payload write of ``pids`` into what is kept of them, as the engine merges
        it (the caller has written it), instead of forgetting them. A key that is a path into
        the payload (``a.b``, ``a[0]``) forgets the points."""
        if any("." in k or "[" in k for k in payload):
            self.forget(pids)
            return
        for fields, table in self._tables.items():
            changes = {k: v for k, v in payload.items() if k in fields}
            if not changes:
                continue
            for pid in pids:
                row = table.get(pid)
                if row is not None:
                    merged = dict(zip(row[0], row[1:]))
                    merged.update(changes)
                    self._keep(table, pid, merged)

    def forget(self, pids: Sequence[str]) -> None:
        """Drop what is kept of ``pids`` (their payload or vector was written)."""
        if self._vectors:
            for pid in pids:
                self._vectors.pop(pid, None)
        if not self._size:
            return
        for table in self._tables.values():
            for pid in pids:
                if table.pop(pid, None) is not None:
                    self._size -= 1

    def clear(self) -> None:
        """Drop everything (the shard was swapped or rebuilt)."""
        self._tables.clear()
        self._size = 0
        self._vectors.clear()

    def __len__(self) -> int:
        """Points whose fields are kept (vectors apart: :meth:`kept_vectors`)."""
        return self._size

    def kept_vectors(self) -> int:
        return len(self._vectors)

    def _evict_one(self) -> None:
        # the largest table gives up its oldest entry (dicts keep insertion order)
        table = max(self._tables.values(), key=len)
        del table[next(iter(table))]
        self._size -= 1


__all__ = ["CAPACITY", "VECTOR_CAPACITY", "FieldCache"]
