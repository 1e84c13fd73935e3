"""Step 4b of a search: a note is lifted by the standing of the notes told right before and
after it.

In a conversation kept as notes, the turn that answers a question often shares few words with
it ("5 years already!") while the turn next to it matches well ("How long have you been
married?"). The fused ranking sees each note alone; this step looks at the notes next to the
best candidates in event time and lifts a note by its best neighbour's fused standing
(``ranking.neighbour_lift``). Neighbours outside the candidates are brought in, scored on the
candidates' own z scale. Measured on LoCoMo dev (benchmarks/RESULTS.md, issue 29): R@10 of
categories 1-4 0.717 -> 0.79 with the turns' own times, on both held-apart halves and in every
conversation.

Neighbours are notes of the same search scope (the search's own filter) less than
``neighbour_gap_s`` seconds from a seed, up to ``neighbour_span`` on each side; notes stamped
with the very same instant are never neighbours, and the notes of a bulk write (more than
``ranking.BULK_INSTANT`` at one instant: an import without times) have none and are none: the
note added right after an import is not the next thing any imported note said.
Only z-score fusion has the scale this needs: with RRF the step is skipped.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Collection, Sequence

import numpy as np

from .. import ranking
from ..backends.base import HasId, Hit, Range, Where, VectorBackend
from ..config import AmemConfig
from .fuse import ZTable

log = logging.getLogger(__name__)

#: at most this many notes read around the seeds (their times only); more means notes stamped
#: close together by the hundred, where an incomplete window cannot tell which note came next
WINDOW_LIMIT = 256
#: the payload key holding a note's event time in epoch seconds (``amem.notefields``)
TIME_FIELD = "event_ts"


def lift(config: AmemConfig, backend: VectorBackend, qvec: np.ndarray, where: Where,
         fused: list[tuple[str, float]], sparse_hits: Sequence[Hit], dense_hits: Sequence[Hit],
         table: ZTable | None, cosine: dict[str, float], fields: Sequence[str]
         ) -> tuple[list[tuple[str, float]], list[Hit]]:
    """The fused ranking with neighbours lifted, and the neighbours brought in from outside it.

    ``fused`` is step 4's ranking of the hits (their payloads must hold ``event_ts``) and
    ``table`` the z-score table it came from (the brought notes' cosines are added to it);
    ``cosine`` is filled for the notes brought in, whose payloads hold ``fields``. Returns
    ``fused`` unchanged (and no hits) when the step is off, the fusion is RRF (no table), or
    no seed has a neighbour.
    """
    weight, span = config.neighbour_weight, config.neighbour_span
    if weight <= 0 or span <= 0 or table is None or not fused:
        return fused, []
    payloads = {h.id: h.payload for h in (*sparse_hits, *dense_hits)}
    seeds = [pid for pid, _ in fused[:config.neighbour_seeds]]
    times = {pid: float(t) for pid in seeds
             if isinstance(t := payloads[pid].get(TIME_FIELD), (int, float))}
    if not times:
        return fused, []
    gap = config.neighbour_gap_s
    # Open intervals on each side of every seed's instant (seeds of one conversation overlap:
    # merged, so the engine tests a few ranges, not two per seed). The notes stamped with a
    # seed's very instant are never its neighbours (ranking.time_neighbours), so a bulk import
    # written at one time reads nothing here (_intervals). Only the times are read, from the
    # event_ts index (reading them from the payloads cost three times the scan: 1.1 against
    # 0.35 ms for ~140 notes at 10k, plus 0.7 ms turning them into hits).
    intervals = _intervals(sorted(set(times.values())), gap)
    window = Where(must=(where,), should=tuple(Range(TIME_FIELD, gt=lo, lt=hi)
                                               for lo, hi in intervals))
    # the ordered read starts at the window's lowest bound, not at the store's oldest note
    near = backend.times(window, TIME_FIELD, WINDOW_LIMIT, start=intervals[0][0])
    if len(near) >= WINDOW_LIMIT:
        # An incomplete window would take a farther note for the next one: rank as fused.
        log.info("adjacent: over %d notes within %.0f s of the top matches; neighbours not "
                 "used for this search", WINDOW_LIMIT, gap)
        return fused, []
    for pid, t in near:
        times.setdefault(pid, t)
    sources = ranking.time_neighbours(times, seeds, span, gap)
    if not sources:
        return fused, []
    # The window leaves the seeds' own instants out: whether one is a bulk write (an import
    # at one time) is read now, for the seeds that lift a note only (a store of such writes
    # reads nothing more; a conversation's seeds, one small read).
    lifting = {times[s] for told in sources.values() for s in told}
    bulk = _bulk_instants(backend, where, lifting)
    if bulk:
        sources = ranking.time_neighbours(times, seeds, span, gap, bulk)
        if not sources:
            return fused, []
    known = {pid for pid, _ in fused}
    wanted = [pid for pid in sources if pid not in known]
    # the neighbours brought in with their cosines and ranking fields: one exact query over
    # their ids (the engine scores its float vectors; reading the vectors and whole payloads
    # to score them here cost twice as much), in id order as a scroll gives them, so equal
    # scores keep one order
    brought = sorted(backend.dense_search(qvec, Where(must=(HasId(tuple(wanted)),)),
                                          len(wanted), exact=True, fields=fields),
                     key=lambda h: h.id) if wanted else []
    columns, missing, moments = table.columns, table.missing, table.moments
    for hit in brought:  # scored on the candidates' scale: BM25 did not rank them (its floor)
        cosine[hit.id] = hit.score
        columns[1][hit.id] = round(hit.score, 6)
    weights = [config.sparse_weight, config.dense_weight]
    # the candidates' totals as fusion computed them, in the fused order (ties keep it)
    base = {pid: table.totals[pid] for pid, _ in fused}
    base.update((h.id, ranking.zscore_total(h.id, columns, weights, missing, moments))
                for h in brought)
    return ranking.neighbour_lift(base, sources, weight), brought


def _bulk_instants(backend: VectorBackend, where: Where, instants: Collection[float]) -> set[float]:
    """Which of ``instants`` hold more than ``ranking.BULK_INSTANT`` notes of the scope.

    One ordered read of the instants' times, of at most ``BULK_INSTANT + 1`` notes each; when
    a bulk instant fills it, the instants above the read's last are read again (a few reads at
    most, one in a conversation, where instants hold a note or two)."""
    most = ranking.BULK_INSTANT
    bulk: set[float] = set()
    rest = sorted(instants)
    while rest:
        limit = (most + 1) * len(rest)
        exact = Where(must=(where,), should=tuple(Range(TIME_FIELD, gte=t, lte=t) for t in rest))
        got = backend.times(exact, TIME_FIELD, limit, start=rest[0])
        counts = Counter(t for _, t in got)
        bulk.update(t for t, n in counts.items() if n > most)
        if len(got) < limit:
            return bulk
        # the read stopped inside its last instant; those below it were read whole
        last = got[-1][1]
        rest = [t for t in rest if t > last or (t == last and t not in bulk)]
    return bulk


def _intervals(instants: Sequence[float], gap: float) -> list[tuple[float, float]]:
    """Open intervals ``(t - gap, t)`` and ``(t, t + gap)`` around each of ``instants``,
    overlapping ones merged. A seed's own instant stays out unless another seed's interval
    covers it, so notes that all share one instant (a bulk import) are never read."""
    halves = sorted((lo, hi) for t in set(instants) for lo, hi in ((t - gap, t), (t, t + gap)))
    merged: list[tuple[float, float]] = []
    for lo, hi in halves:
        if merged and lo < merged[-1][1]:  # strict: (t - gap, t) and (t, t + gap) stay apart
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


__all__ = ["lift"]
