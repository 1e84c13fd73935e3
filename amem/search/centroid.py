"""Step 1b of a search: the query's vector moved off the tenant's centroid before the legs rank.

e5's vectors share one large direction (notes about nothing in common sit at cosine 0.7-0.8),
and what a store is generally about leans the same way: in a chat where every note is one of
two people talking, "What European countries has Maria been to?" is closest to every turn
Maria told, and "I took a solo trip to Spain" ranks past 50. Ranking by the query with
``share`` of the tenant's mean note vector taken off, ``q - share * mean`` renormalised (the
order of ``q.d - share * mean.d``), ranks by what the question asks beyond what the store is
about anyway. LoCoMo dev at the default share 0.5, every realization of the embedding: R@10
0.800-0.804 -> 0.812-0.819, MRR +0.005 to +0.010, multi-hop +0.005 to +0.032; CMRC holds
(hit@1 0.704 -> 0.707). A share of 0.75 read best on LoCoMo (R@10 up to 0.829) but put CMRC's
hit@10 below its own dense baseline (benchmarks/RESULTS.md, "The query off the tenant's
centroid").

Only ranking reads the moved vector: the dense leg, the BM25 hits' cosines, the fusion and the
neighbours of step 4b. What a caller sees or sets keeps the query's own vector, whose scale
``amem.similarity`` calibrates: the ``similarity`` of a result, ``min_similarity``, the link
gate and usage heat.

The centroid is the mean of the first :data:`SAMPLE` of the tenant's live notes in point-id
order (ids are hashes, so that is an even sample of a larger store; a smaller one is read
whole). It is kept per tenant until writes reach :data:`REFRESH_SHARE` of the notes it was
taken over (at least :data:`REFRESH_WRITES`), as the backend's ``generation`` counts them; a
shared server's store, which other processes write, is read again after :data:`SHARED_TTL_S`.
A mean moves little with a tenth more notes, so a kept centroid ranks as a fresh one would,
within a rare swap of near-equal notes. Fewer than :data:`MIN_NOTES` live notes have no
centroid worth the name (the few notes would mostly be pushed away from their own mean):
their searches rank by the query's own vector.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from ..backends.base import Match, Where
from ..index import NoteIndex

#: live notes a tenant needs before its searches are centred
MIN_NOTES = 50
#: notes read for a centroid (the first, in point-id order)
SAMPLE = 1000
#: a kept centroid is read again once the writes since reach this share of its tenant's notes
REFRESH_SHARE = 0.1
#: ... and at least this many writes
REFRESH_WRITES = 64
#: seconds a centroid is kept for a store other processes may write (generation None)
SHARED_TTL_S = 600.0
#: tenants whose centroids are kept (least recently searched out first)
KEPT_TENANTS = 1024


def off_centroid(qvec: np.ndarray, centroid: np.ndarray | None, share: float) -> np.ndarray:
    """``qvec - share * centroid`` at unit length (float32); ``qvec`` itself without a
    centroid, at share 0, or where the difference vanishes (a query equal to the mean of a
    store of identical notes)."""
    if centroid is None or share <= 0:
        return qvec
    moved = np.asarray(qvec, dtype=np.float64) - share * np.asarray(centroid, dtype=np.float64)
    norm = float(np.linalg.norm(moved))
    if not math.isfinite(norm) or norm < 1e-6:
        return qvec
    return (moved / norm).astype(np.float32)


class _Kept(NamedTuple):
    centroid: np.ndarray | None  # None: too few notes
    notes: int  # the tenant's live notes when it was read
    generation: int | None
    read_at: float  # the clock's epoch second


class Centroids:
    """The tenants' centroids, read when first needed and kept as the module docstring says."""

    def __init__(self, index: NoteIndex) -> None:
        self._index = index
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._guard = threading.Lock()

    def of(self, agent_id: str) -> np.ndarray | None:
        """``agent_id``'s centroid (unit vectors' mean, not normalised), or None below
        :data:`MIN_NOTES` live notes."""
        backend = self._index.backend
        # read before the engine: a write landing during the read changes it, and the next
        # search weighs that write too
        generation = backend.generation()
        now = self._index.clock.now().timestamp()
        with self._guard:
            kept = self._kept.get(agent_id)
            if kept is not None:
                self._kept.move_to_end(agent_id)
        if kept is not None and _fresh(kept, generation, now):
            return kept.centroid
        where = Where(must=(Match("agent_id", agent_id), Match("is_active", True)))
        notes = backend.count(where)
        centroid = None
        if notes >= MIN_NOTES:
            hits, _ = backend.scroll(where, limit=SAMPLE, with_vectors=True, fields=("id",))
            vectors = [h.dense for h in hits if h.dense is not None]
            if len(vectors) >= MIN_NOTES:
                centroid = np.mean(np.stack(vectors).astype(np.float64), axis=0)
        with self._guard:
            self._kept[agent_id] = _Kept(centroid, notes, generation, now)
            self._kept.move_to_end(agent_id)
            while len(self._kept) > KEPT_TENANTS:
                self._kept.popitem(last=False)
        return centroid


def _fresh(kept: _Kept, generation: int | None, now: float) -> bool:
    """Whether ``kept`` still stands for its tenant (module docstring)."""
    if now < kept.read_at:  # a clock set back (a test's clock, a wall-clock step): read again
        return False
    if generation is None or kept.generation is None:
        return now - kept.read_at < SHARED_TTL_S
    writes = generation - kept.generation
    if writes < 0:  # another handle's count: nothing to compare with
        return False
    # below MIN_NOTES every write may be the one that reaches it
    if kept.centroid is None:
        return writes == 0
    return writes < max(REFRESH_WRITES, REFRESH_SHARE * kept.notes)


__all__ = ["Centroids", "MIN_NOTES", "REFRESH_SHARE", "REFRESH_WRITES", "SAMPLE",
           "SHARED_TTL_S", "off_centroid"]
