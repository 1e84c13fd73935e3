"""Near-duplicate matching on content alone: the cosine that decides a fold.

A fold (and the ``pending_merge`` flag) asks whether a new text says what a stored note
already says. Only the two contents answer that. The engine's vector of a note embeds its
enrichment too (LLM keywords and context, see ``Note.embed_text``): an endpoint that returns
the same long enrichment for everything would make unrelated notes look alike. And after a
fold or an evolution that vector may embed an earlier text until it is re-embedded (see
``amem.refresh``), so a decision read from it would depend on when re-embedding ran, and an
import killed and rerun would fold differently from one run straight through.

So the engine's dense search only proposes candidates; each is then scored by the cosine of
the new content's vector with the vector of the candidate's *current content*, which is a
function of the two texts alone. Content vectors are kept by content hash in a bounded
cache (a new note's is computed anyway, before it is stored); a candidate whose stored vector
is exactly its content's (no enrichment beyond the content, not stale) lends that one; the
rest are embedded together in one encoder call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np

from ..backends.base import Hit
from ..notes import Note
from ..index import STALE_FIELD

#: content vectors kept (384-d float32: 1.5 KB each, so about 12 MB)
CACHE_SIZE = 8192

Embed = Callable[[Sequence[str]], np.ndarray]


def _unit(vector: np.ndarray) -> np.ndarray:
    arr = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm else arr


class ContentVectors:
    """Unit vectors of note contents by content hash, computed once per text while cached.

    A bulk write embeds a window of new contents ahead (:meth:`ahead`), outside the store's
    write lock and in one encoder call over several chunks; each chunk then finds its vectors
    here. The cache has its own small lock for that.
    """

    def __init__(self, embed: Embed, size: int = CACHE_SIZE) -> None:
        self._embed = embed
        self._size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._guard = threading.Lock()
        #: content hash -> vector of the texts the last ``of_hits`` had to embed
        self.fresh: dict[str, np.ndarray] = {}

    def _keep(self, pairs: Sequence[tuple[str, np.ndarray]]) -> None:
        with self._guard:
            for digest, vector in pairs:
                self._cache[digest] = vector
                self._cache.move_to_end(digest)
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)

    def _kept(self, digests: Sequence[str]) -> dict[str, np.ndarray]:
        with self._guard:
            return {d: self._cache[d] for d in digests if d in self._cache}

    def _embed_missing(self, notes: Sequence[Note], kept: dict[str, np.ndarray]
                       ) -> list[tuple[str, np.ndarray]]:
        """The contents of ``notes`` not in ``kept``, embedded in one encoder call and kept."""
        todo = {n.hash: n.content for n in notes if n.hash not in kept}
        if not todo:
            return []
        fresh = list(zip(todo, (_unit(v) for v in self._embed(list(todo.values())))))
        self._keep(fresh)
        return fresh

    def ahead(self, notes: Sequence[Note]) -> int:
        """Embed the contents of ``notes`` not kept yet, in one encoder call, and keep them;
        how many were embedded."""
        return len(self._embed_missing(notes, self._kept([n.hash for n in notes])))

    def embed(self, notes: Sequence[Note]) -> list[np.ndarray]:
        """The content vectors of new notes: those kept (embedded ahead) as they are, the rest
        in one encoder call (and kept)."""
        if not notes:
            return []
        found = self._kept([n.hash for n in notes])
        found.update(self._embed_missing(notes, found))
        return [found[n.hash] for n in notes]

    def of_hits(self, hits: Sequence[Hit]) -> list[np.ndarray]:
        """The current-content vector of each stored note in ``hits`` (in order)."""
        notes = [Note.from_payload(h.payload) for h in hits]
        found = self._kept([n.hash for n in notes])
        missing: dict[str, str] = {}
        for note, hit in zip(notes, hits):
            if note.hash in found:
                continue
            if (hit.dense is not None and not hit.payload.get(STALE_FIELD)
                  and note.embed_text() == note.content):
                found[note.hash] = _unit(hit.dense)  # the stored vector embeds the content
            else:
                missing.setdefault(note.hash, note.content)
        self.fresh = {}
        if missing:
            self.fresh = dict(zip(missing, (_unit(v) for v in self._embed(list(missing.values())))))
            found.update(self.fresh)
        self._keep(list(found.items()))
        return [found[note.hash] for note in notes]


def content_cosines(new: np.ndarray, hits: Sequence[Hit], vectors: ContentVectors) -> list[float]:
    """The cosine of the new content's unit vector with each hit's current content."""
    return [float(np.dot(new, v)) for v in vectors.of_hits(hits)]


def best_match(note_ids: Sequence[str], scores: Sequence[float]) -> int | None:
    """The index of the best match: highest score (to 6 decimals), then lowest note id.

    Not the engine's order: that follows stored vectors, which may embed an earlier text (or
    another batch's float rounding), and the fold must not depend on them.
    """
    if not note_ids:
        return None
    return min(range(len(note_ids)), key=lambda k: (-round(scores[k], 6), note_ids[k]))


__all__ = ["ContentVectors", "best_match", "content_cosines", "CACHE_SIZE"]
