"""Deferred re-embedding: a changed note is saved at once, its vector once per batch.

A fold or an evolution changes a note's text. Re-embedding it on the spot costs one small
encoder call per change, and a note that changes five times in one import batch is embedded
five times (a bulk import of near-duplicates spent most of its time there). The writer instead
saves the new payload and BM25 terms with the note's previous vector and ``vector_stale: true``,
and at the end of the batch re-embeds every note it marked, once each, in one call.

The mark makes the gap safe and visible. A process killed inside a batch leaves marked notes
behind: the store's next write, the next import and the nightly consolidation re-embed them
(``refresh_vectors`` with no ids); ``MemoryStore.info`` and ``amem doctor`` count them until then.
Meanwhile such a note is still found, by its new text in BM25 and by its previous text's
vector, which a fold (cosine >= 0.85) or an evolution (context and tags) barely moves.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Collection

from .backends.base import Match, Where
from .notes import Note

if TYPE_CHECKING:
    from .store import MemoryStore

log = logging.getLogger(__name__)

#: the payload field, and the filter of every note whose vector embeds an older text
FIELD = "vector_stale"
STALE = Where(must=(Match(FIELD, True),))


def refresh_vectors(store: "MemoryStore", point_ids: Collection[str] | None = None) -> int:
    """Re-embed the notes marked stale, among ``point_ids`` or in the whole store.

    Every note is read back from the engine first, so the vector embeds the text as stored now
    (links or tags written after the mark included), and the rewrite clears the mark. Returns
    the number of notes re-embedded. The caller holds the writer's lock.
    """
    if point_ids is not None:
        if not point_ids:
            return 0
        hits = store.backend.retrieve(list(point_ids))
    else:
        hits = list(store.backend.iterate(STALE))  # read all before writing: no paging over writes
    notes = [Note.from_payload(h.payload) for h in hits if h.payload.get(FIELD)]
    size = max(store.config.embed_batch, 1) * 8  # the embedder batches inside one call
    for start in range(0, len(notes), size):
        chunk = notes[start:start + size]
        vectors = store.embed_passages([note.embed_text() for note in chunk])
        store.write_points([store.make_point(note, vector, count_stats=False)
                            for note, vector in zip(chunk, vectors)])
    return len(notes)


def count_stale(store: "MemoryStore") -> int:
    """How many notes (any agent, active or not) wait for their vector."""
    return store.backend.count(STALE)


__all__ = ["FIELD", "STALE", "count_stale", "refresh_vectors"]
