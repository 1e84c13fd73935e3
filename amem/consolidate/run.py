"""Consolidation: merge near-duplicate notes, cascade their links, resolve ``pending_merge``.

Per agent, one run does, in this order:

1. **Resume.** An active note whose ``merged_into`` is set is a merge a crashed run started;
   it is finished first (or the mark is cleared when its survivor is gone).
2. **Repair links.** Every link to a merged note is pointed at its survivor, links to notes
   that no longer exist (or were deleted) are dropped, self-links and repeats go. A link
   between two active notes whose target does not link back (a write killed before its
   back-links, in a store written before they were marked owed: ``amem.backlinks``) gets its
   other half.
3. **Group** active notes by ``(note_type, category)``. Knowledge notes (``note_type ==
   "knowledge"``) follow their own rule: they are grouped, paired and merged only with
   knowledge notes of the same category, never with memory notes, because a knowledge note is
   a general fact and a memory note is about a subject; merging them would tie one to the other.
4. **Pairs**: for every note, its nearest neighbours inside its group with cosine >=
   threshold, exact, by blocked matrix products over the snapshot's vectors (never a Python
   loop over all pairs, never an approximate index).
5. **Clusters**: pairs are taken best first and joined only while every member stays within
   the threshold of the cluster's survivor (the most informative member), so a chain
   A~B~C with A !~ C never folds C into A. Two notes of one supersession chain (a fact and
   the note that replaced it, ``amem.supersede``) never share a cluster: merging them would
   lose the history (they are often close: "Alice drinks coffee", "Alice drinks tea now").
6. **Merge** each loser into its survivor (LLM when configured, offline otherwise; see
   :mod:`amem.consolidate.merge`) and cascade its links.
7. **Pending**: a note still flagged ``pending_merge`` is merged into its nearest neighbour of
   the same note type (any category and not of its supersession chain) when that is within the
   threshold; else the flag is cleared.

Write order of one merge, so that a crash anywhere leaves no link pointing at an inactive or
missing note and the next run finishes the job: mark the loser ``merged_into`` (it stays
active), write the survivor (its history records the loser, which makes the step idempotent),
point every link to the loser at the survivor, then deactivate the loser.

A second run over a consolidated store writes nothing. Adds that run while consolidation is
writing are not blocked; a link one of them makes to a note being merged is repaired by the
next run.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from ..backlinks import settle
from ..index import NoteIndex
from ..purge import sweep_expired
from ..refresh import refresh_vectors
from ..supersede import Superseder
from .merge import MergeLLM
from .report import ConsolidationReport

log = logging.getLogger(__name__)

#: cosine at or above which two notes of a group are duplicates
DEFAULT_THRESHOLD = 0.75

#: ``progress(stage, done, total)``; stages: scan, pairs, merge, pending
Progress = Callable[[str, int, int], None]


def consolidate(index: NoteIndex, *, agent_ids: Sequence[str] | None = None,
                progress: Progress | None = None, llm: MergeLLM | None = None,
                threshold: float | None = None, index_first: bool | None = None
                ) -> ConsolidationReport:
    """Consolidate the notes of ``agent_ids`` (every agent in the store when None).

    Args:
        index: the notes of the open store.
        agent_ids: tenants to consolidate; None means every agent with a note.
        progress: called as ``progress(stage, done, total)`` (the CLI draws a bar).
        llm: merges by this model when given (offline on any ``LLMError``).
        threshold: duplicate cosine; default ``index.config.consolidate_threshold`` (0.75).
        index_first: build the engine index first. Pair finding never uses it (it is exact,
            in memory); only the pending step's engine queries, which are exact as well.
    """
    cfg_threshold = index.config.consolidate_threshold
    thr = float(cfg_threshold if threshold is None else threshold)
    if not -1.0 <= thr <= 1.0:
        raise ValueError(f"threshold is a cosine and must lie in [-1, 1], got {thr}")
    from .agent import AgentRun  # networkx (the link graph) loads when a run starts

    started = time.perf_counter()
    agents = list(index.agents() if agent_ids is None else agent_ids)
    report = ConsolidationReport({}, thr)
    # Every neighbour search here is exact (an HNSW index loses neighbours), so building the
    # index first only helps callers that ask for it; the nightly job optimises afterwards.
    if index_first:
        log.info("building the engine index before consolidation")
        index.backend.optimize()
        report.indexed_first = True
    for agent in agents:
        # the threshold is on the calibrated scale; engine scores and dot products are raw
        run = AgentRun(index, agent, index.raw_cosine(thr), llm, progress)
        report.agents[agent] = run.run()
    report.duration = time.perf_counter() - started
    log.info("consolidated %d agent(s): %d merges, %d links rewritten in %.1fs", len(agents),
             report.merges, report.links_rewritten, report.duration)
    return report


class Consolidator:
    """The nightly maintenance of one store: expired notes swept, stale vectors mended,
    owed back-links written, duplicates merged, then the supersessions the write path missed (``amem.supersede``)."""

    def __init__(self, index: NoteIndex, superseder: Superseder, llm: MergeLLM | None) -> None:
        self._index = index
        self._superseder = superseder
        self._llm = llm

    def run(self, agent_ids: Sequence[str] | None, *,
            progress: Progress | None = None) -> ConsolidationReport:
        """Consolidate ``agent_ids`` (every agent when None), under the write lock."""
        index = self._index
        # The one write lock: an add linking to a note mid-merge would dangle.
        with index.lock:
            # Expired notes go first: none is merged into a survivor that outlives it.
            expired = sweep_expired(index, agent_ids)
            # Pairs are found by vector: first mend any a killed writer left stale.
            refreshed = refresh_vectors(index)
            # Back-links a killed add owed, before the link repair reads the links.
            settled = settle(index)
            report = consolidate(index, agent_ids=agent_ids, progress=progress, llm=self._llm)
            report.vectors_refreshed = refreshed
            report.links_settled = settled
            report.expired_deleted = expired.expired_deleted
            for agent, part in report.agents.items():
                outcome = self._superseder.sweep(agent)
                report.superseded += len(outcome.superseded)
                report.marks_released += len(outcome.released)
                part.warnings.extend(outcome.warnings)
            return report


__all__ = ["Consolidator", "DEFAULT_THRESHOLD", "Progress", "consolidate"]
