"""Bulk writes (``add_many`` and imports): expired ids freed first, supersession judged after.

Around ``Writer.add_many`` a batch does two things a single ``add`` does too:

* **Expired ids.** An item that names its id (an import derives it from the text) may meet a
  note of that id that expired and waits for the nightly sweep. It is swept first
  (``amem.purge.sweep_ids``: hard delete, links to it dropped), so the new note takes the id
  instead of being refused as an id clash; the result's warning names the note it replaced.
* **Supersession.** Each note the batch created is put to the same judge as an add
  (``amem.supersede``), oldest first, so a chain inside one file ends with its last fact
  current. Only notes that state a change are judged (the offline rule says no to any other;
  the nightly sweep uses the same bound for an LLM), and an LLM judges at most
  ``LLM_CHECKS_PER_BATCH`` notes of a batch: the rest are left to the nightly sweep, and
  their results say so.

Between its chunks a long batch also starts the index build once enough points wait for it
(``IndexBuilder.maybe_build(growing=True)``, ``amem.index_build``), so an import of 100k notes
is mostly indexed when it ends instead of wholly brute-forced until one build swaps in; and
it waits for a running build when the part not yet indexed has grown too far
(``IndexBuilder.wait_for_room``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import ValidationError
from ..index import NoteIndex
from ..notes import Note, point_id
from ..purge import sweep_ids
from ..supersede import OFFLINE, Superseder, change_marker
from .result import NEW_STATUSES, AddResult
from .writer import Writer

log = logging.getLogger(__name__)

#: chunks whose new contents are embedded together, before the write lock is taken for them
#: (``Writer.embed_ahead``); the importer hands over this many chunks at a time
AHEAD_CHUNKS = 4
#: notes of one batch an LLM supersede judge is asked about (one call each); the rest wait
#: for the nightly sweep. The offline rule has no bound: it costs one engine query a note.
LLM_CHECKS_PER_BATCH = 16


@dataclass
class BatchOutcome:
    """What one bulk batch wrote, and what the two extra steps did."""

    results: list[AddResult]
    #: ids of expired notes swept so a new note could take them
    expired_replaced: list[str] = field(default_factory=list)
    #: older notes this batch's notes superseded
    superseded: list[str] = field(default_factory=list)
    #: notes stating a change that were left to the nightly sweep (the LLM bound)
    deferred: int = 0
    #: who judged: "offline", an LLM label, or "off"
    decided_by: str = "off"


def check_batch(batch: object, default: str) -> None:
    """Refuse a ``batch`` (notes embedded together) that is not a whole number of at least 1;
    ``default`` says what leaving it out gives. Below 1 the writer was handed no chunk at
    all: every item read, none written, and no error."""
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise ValidationError(f"batch must be a whole number of at least 1 (notes embedded "
                              f"together), not {batch!r}; leave it out for {default}",
                              field="batch")


class BulkWriter:
    """``add_many`` and imports of one store: the writer's batches with the two extra steps."""

    def __init__(self, index: NoteIndex, writer: Writer, superseder: Superseder) -> None:
        self._index = index
        self._writer = writer
        self._superseder = superseder

    def add_batch(self, items: Sequence[dict[str, Any]], *, enrich: bool = True,
                  agent_id: str | None = None, batch: int | None = None,
                  supersede: bool = True) -> BatchOutcome:
        """``Writer.add_many`` with expired ids freed first and supersession judged after.

        Items go in chunks of ``batch`` (the store's ``embed_batch``), each under the write
        lock as ``Writer.add_many`` holds it, so searches and other writers interleave between
        chunks; the new contents of every ``AHEAD_CHUNKS`` chunks are embedded together first,
        without the lock (``Writer.embed_ahead``); after each chunk, the index build starts in
        the background if the points written since the last one call for it, or waits for a
        running one when too many wait (``amem.index_build``). ``supersede=False`` skips the judgement (the nightly sweep
        still covers them).
        """
        check_batch(batch, f"the store's embed_batch ({self._index.config.embed_batch})")
        size = batch or self._index.config.embed_batch
        total = BatchOutcome([])
        for start in range(0, len(items), size):
            if start % (size * AHEAD_CHUNKS) == 0:
                self._writer.embed_ahead(items[start:start + size * AHEAD_CHUNKS],
                                         enrich=enrich, agent_id=agent_id)
            part = self._chunk(items[start:start + size], enrich, agent_id, size, supersede)
            total.results.extend(part.results)
            total.expired_replaced.extend(part.expired_replaced)
            total.superseded.extend(part.superseded)
            total.deferred += part.deferred
            total.decided_by = part.decided_by
            self._index.build.maybe_build(background=True, growing=True)
            self._index.build.wait_for_room()
        return total

    def _chunk(self, items: Sequence[dict[str, Any]], enrich: bool, agent_id: str | None,
               size: int, supersede: bool) -> BatchOutcome:
        default = self._writer.agent(agent_id)
        wanted: dict[str, list[str]] = {}
        for item in items:
            nid, agent = item.get("id"), item.get("agent_id") or default
            if isinstance(nid, str) and isinstance(agent, str):
                wanted.setdefault(agent, []).append(nid)
        with self._index.lock:
            replaced: dict[tuple[str, str], str] = {}
            for agent, ids in wanted.items():
                for nid, expired_at in sweep_ids(self._index, agent, ids).items():
                    replaced[(agent, nid)] = expired_at
            results = self._writer.add_many(items, enrich=enrich, agent_id=agent_id, batch=size)
            outcome = BatchOutcome(results, expired_replaced=sorted(n for _, n in replaced))
            for item, result in zip(items, results):
                was = replaced.get((item.get("agent_id") or default, result.id))
                if was is not None and result.status in NEW_STATUSES:
                    result.warnings.append(f"replaced note {result.id!r} of the same id, which "
                                           f"expired at {was} and was not swept yet")
            if supersede:
                self._supersede(items, outcome, enrich, default)
        return outcome

    def _supersede(self, items: Sequence[dict[str, Any]], outcome: BatchOutcome, enrich: bool,
                   default: str) -> None:
        """Judge the batch's new notes that state a change, oldest first (write lock held)."""
        label = self._superseder.judge.label
        outcome.decided_by = label
        todo: dict[str, list[int]] = {}
        for i, (item, result) in enumerate(zip(items, outcome.results)):
            # as add: the --no-enrich fast path skips the check
            if result.status in NEW_STATUSES and item.get("enrich", enrich) \
                    and change_marker(str(item.get("text", ""))):
                todo.setdefault(str(item.get("agent_id") or default), []).append(i)
        budget = LLM_CHECKS_PER_BATCH if label != OFFLINE else None
        for agent, rows in todo.items():
            hits = self._index.backend.retrieve(
                [point_id(agent, outcome.results[i].id) for i in rows], with_vectors=True)
            found = {str(h.payload.get("id")): h for h in hits
                     if h.payload.get("agent_id") == agent}
            queue = sorted(((Note.from_payload(found[r.id].payload), r) for r in
                            (outcome.results[i] for i in rows) if r.id in found),
                           key=lambda nr: (nr[0].event_time or nr[0].timestamp, nr[0].id))
            for note, result in queue:
                vector = found[note.id].dense
                if vector is None or not note.is_active:
                    continue
                if budget is not None:
                    if budget <= 0:
                        outcome.deferred += 1
                        result.warnings.append("supersede check deferred to the nightly sweep "
                                               f"(an LLM judges at most {LLM_CHECKS_PER_BATCH} "
                                               "notes of a batch)")
                        continue
                    budget -= 1
                done = self._superseder.check(note, vector)
                result.supersedes = done.superseded
                result.warnings.extend(done.warnings)
                outcome.superseded.extend(done.superseded)
        if outcome.deferred:
            log.info("%d supersede checks of a batch deferred to the nightly sweep",
                     outcome.deferred)


__all__ = ["AHEAD_CHUNKS", "BatchOutcome", "BulkWriter", "LLM_CHECKS_PER_BATCH"]
