"""Deferred re-embedding: a changed note is saved at once, its vector later, once.

A fold or an evolution changes a note's text. Re-embedding it on the spot costs one small
encoder call per change, and a note that changes five times in an import is embedded five
times (a bulk import of near-duplicates spent most of its time there). The writer instead
saves the new payload and BM25 terms with the note's previous vector and ``vector_stale: true``,
and re-embeds every note it marked, once each, in one call: when a single add or a batch
ends, or, inside an import's window (``StaleVectors.open_window``), when
``import_reembed_every`` notes wait and when the import ends.

The mark makes the gap safe and visible. A process killed inside a batch leaves marked notes
behind: the store's next writes (``REPAIR_LIMIT`` each), the next import and the nightly
consolidation re-embed them (``refresh_vectors`` with no ids); ``MemoryStore.info`` and
``amem doctor`` count them until then.
Meanwhile such a note is still found, by its new text in BM25 and by its previous text's
vector, which a fold (cosine >= 0.85) or an evolution (context and tags) barely moves.
"""

from __future__ import annotations

import itertools
import logging
from typing import Collection, Protocol, Sequence

import numpy as np

from .backends.base import Match, Where
from .index import STALE_FIELD, NoteIndex, note_terms_of
from .notes import Note

log = logging.getLogger(__name__)

#: the payload field, and the filter of every note whose vector embeds an older text
FIELD = STALE_FIELD
#: notes a write re-embeds before it starts, at most (about a second with the default model)
REPAIR_LIMIT = 64
STALE = Where(must=(Match(FIELD, True),))


def refresh_vectors(index: NoteIndex, point_ids: Collection[str] | None = None, *,
                    limit: int | None = None) -> int:
    """Re-embed the notes marked stale, among ``point_ids`` or in the whole store (at most
    ``limit`` of the whole store's).

    Every note is read back from the engine first, so the vector embeds the text as stored now
    (links or tags written after the mark included). Only the vector and the mark change, by a
    field update: a note deleted since keeps its deletion. Returns the number of notes
    re-embedded. The caller holds the store's write lock.
    """
    if point_ids is not None:
        if not point_ids:
            return 0
        hits = index.backend.retrieve(list(point_ids))
    else:  # read before writing: no paging over writes
        hits = list(itertools.islice(index.backend.iterate(STALE), limit))
    notes = [Note.from_payload(h.payload) for h in hits if h.payload.get(FIELD)]
    size = index.config.embed_batch * 8  # the embedder batches inside one call
    for start in range(0, len(notes), size):
        chunk = notes[start:start + size]
        vectors = index.embed_passages([note.embed_text() for note in chunk])
        for note, vector in zip(chunk, vectors):
            mend(index, note, vector)
    return len(notes)


def mend(index: NoteIndex, note: Note, vector: np.ndarray) -> None:
    """Give a marked note the vector (and BM25 terms) of its stored text, then clear the mark.

    Two writes, the mark cleared last: a kill in between leaves the note marked, and the next
    repair embeds it again. A note deleted since keeps its deletion.
    """
    terms = note_terms_of(note)
    index.update_note_fields(note.id, note.agent_id, {}, dense=vector, terms_of=note,
                             terms_were=len(terms), active_only=False)  # its text, as stored
    index.update_note_fields(note.id, note.agent_id, {FIELD: False}, active_only=False)


def count_stale(index: NoteIndex, agent_id: str | None = None) -> int:
    """How many notes (of one agent, or of every agent; active or not) wait for their vector."""
    if agent_id is None:
        return index.backend.count(STALE)
    return index.backend.count(Where(must=(*STALE.must, Match("agent_id", agent_id))))


class _Reported(Protocol):
    warnings: list[str]


class StaleVectors:
    """One writer's notes that wait for their vector, and when to re-embed them.

    An add or a batch collects the point ids it marked in a set from ``batch_set`` and hands it
    back to ``batch_done``, which re-embeds them, unless an import window is open
    (``open_window``): then they wait until ``import_reembed_every`` do, or the window closes.
    Not locked by itself: the writer calls it under its own lock.
    """

    def __init__(self, index: NoteIndex) -> None:
        self._index = index
        self._repaired = False
        self._window: set[str] | None = None
        #: refresh failures inside the open window (for the import report)
        self.problems: list[str] = []

    def repair_once(self) -> None:
        """Before this process's first write: re-embed vectors a killed writer left stale.

        At most ``REPAIR_LIMIT`` a write: a killed writer leaves a batch's worth, but an
        upgrade at open (``amem.upgrades``) may mark thousands, and re-embedding them all
        would hold one ``add`` for minutes (80 notes a second with the default model). Past
        the limit the next writes go on, ``REPAIR_LIMIT`` each, and the nightly job takes the
        rest at once; ``amem doctor`` counts what waits.
        """
        if self._repaired:
            return
        repaired = refresh_vectors(self._index, limit=REPAIR_LIMIT)
        self._repaired = repaired < REPAIR_LIMIT  # a full chunk: more may wait
        if repaired:
            log.warning("re-embedded %d notes marked vector_stale (left by an interrupted "
                        "write, or by an upgrade at open: amem.upgrades)", repaired)

    def batch_set(self) -> set[str]:
        """Where an add or a batch records what it marks (the window's set when one is open)."""
        return self._window if self._window is not None else set()

    def batch_done(self, stale: set[str], results: Sequence[_Reported]) -> None:
        if self._window is None:
            self.refresh(stale, results)
        elif len(stale) >= self._index.config.import_reembed_every:
            problem = self.refresh(stale, results)
            if problem:
                self.problems.append(problem)

    def open_window(self) -> bool:
        """Start deferring past batch ends; False when a window is already open (nested)."""
        if self._window is not None:
            return False
        self._window, self.problems = set(), []
        return True

    def close_window(self, *, interrupted: bool) -> None:
        """Re-embed what waits, unless interrupted: then the marks stay for the next write."""
        stale, self._window = self._window or set(), None
        if not interrupted:
            problem = self.refresh(stale, [])
            if problem:
                self.problems.append(problem)
        elif stale:
            self._repaired = False
            log.warning("interrupted: %d changed notes keep their previous vector (marked "
                        "vector_stale) until the next write", len(stale))

    def refresh(self, stale: set[str], results: Sequence[_Reported]) -> str | None:
        """Re-embed ``stale`` in one call and forget it; on failure, say so and return why.

        The notes are saved already; if the encoder fails now they keep their previous vector
        and their mark, every result says so, and the next write tries again.
        """
        try:
            refresh_vectors(self._index, stale)
        except Exception as exc:  # the writes themselves succeeded: report it, do not raise
            self._repaired = False
            why = (f"{len(stale)} changed notes keep their previous vector for now (marked "
                   f"vector_stale; the next write or the nightly job re-embeds them): "
                   f"re-embedding failed: {type(exc).__name__}: {exc}")
            log.warning("add: %s", why)
            for result in results:
                result.warnings.append(why)
            return why
        finally:
            stale.clear()
        return None


__all__ = ["FIELD", "REPAIR_LIMIT", "STALE", "StaleVectors", "count_stale", "mend",
           "refresh_vectors"]
