"""Step 1b of a search: the query's vector moved off what the tenant's notes share.

e5's vectors share one large direction (notes about nothing in common sit at cosine 0.7-0.8),
and what a store is generally about leans the same way: in a chat where every note is one of
two people talking, "What European countries has Maria been to?" is closest to every turn
Maria told, and "I took a solo trip to Spain" ranks past 50. Two corrections, both of the
query's vector for ranking, both read from the tenant's own notes:

* **the centroid**: ``q - centering * mean``, the tenant's mean note vector taken off (the
  order of ``q.d - centering * mean.d``): what the whole store is about anyway;
* **the common words** (the dense leg's IDF): each word of the query found in at least
  :data:`COMMON_SHARE` of the tenant's notes (both speakers' names in a chat, "user" in an
  assistant's notes) has ``common_words`` of its own vector, embedded alone as a query, taken
  off first. BM25 already weighs such a word by its rarity; the query's vector did not.

LoCoMo dev, every realization of the embedding (benchmarks/RESULTS.md, "The query off the
tenant's centroid"): with both at their defaults, R@10 0.800-0.804 -> 0.817-0.833, MRR
0.605-0.609 -> 0.606-0.612, multi-hop 0.499-0.515 -> 0.557-0.577. CMRC (Chinese articles,
whose questions hold no such words) holds: hit@1 0.704 -> 0.707, hit@10 0.928 -> 0.919. A
centering of 0.75 read best on LoCoMo alone but put CMRC's hit@10 below its own dense baseline.

Only ranking reads the moved vector: the dense leg, the BM25 hits' cosines, the fusion and the
neighbours of step 4b. What a caller sees or sets keeps the query's own vector, whose scale
``amem.similarity`` calibrates: the ``similarity`` of a result, ``min_similarity``, the link
gate and usage heat.

Both come from the first :data:`SAMPLE` of the tenant's live notes in point-id order (ids are
hashes, so that is an even sample of a larger store; a smaller one is read whole), kept per
tenant until writes reach :data:`REFRESH_SHARE` of the notes they were taken over (at least
:data:`REFRESH_WRITES`), as the backend's ``generation`` counts them; a shared server's store,
which other processes write, is read again after :data:`SHARED_TTL_S`. A mean and a word's
share move little with a tenth more notes, so a kept reading ranks as a fresh one would, within
a rare swap of near-equal notes. Fewer than :data:`MIN_NOTES` live notes have no centroid or
common words worth the name: their searches rank by the query's own vector. A common word's
vector is embedded once per process (:data:`KEPT_WORDS` of them).
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from typing import NamedTuple, Sequence

import numpy as np

from ..backends.base import Match, Where
from ..config import AmemConfig
from ..index import NoteIndex
from ..text import surface_terms, tokenize

#: live notes a tenant needs before its searches are moved
MIN_NOTES = 50
#: notes read for a centroid and the words' shares (the first, in point-id order)
SAMPLE = 1000
#: a word is common when at least this share of the sample holds it (LoCoMo conv-30: the two
#: speakers' names, "dance", "thank", "i'm"). LoCoMo dev, scratch: 0.1 and 0.25 within 0.001
#: of R@10 and 0.004 of multi-hop
COMMON_SHARE = 0.25
#: characters of a sampled note whose terms are counted: a long note's later words add little
#: to what is common, and 1,000 notes of 32,000 characters would take seconds to tokenise
TERM_CHARS = 2000
#: a kept reading is read again once the writes since reach this share of its tenant's notes
REFRESH_SHARE = 0.1
#: ... and at least this many writes
REFRESH_WRITES = 64
#: seconds a reading is kept for a store other processes may write (generation None)
SHARED_TTL_S = 600.0
#: tenants whose readings are kept (least recently searched out first)
KEPT_TENANTS = 1024
#: common words whose vectors are kept
KEPT_WORDS = 1024
#: common words taken off one query, the first in its order: each new one is an embedding, and
#: a query of many inflections of one common word must not cost hundreds
QUERY_WORDS = 8


def ranking_vector(qvec: np.ndarray, words: Sequence[np.ndarray], word_weight: float,
                   centroid: np.ndarray | None, share: float) -> np.ndarray:
    """``qvec`` less ``word_weight`` of each common word's vector, at unit length, then less
    ``share`` of the centroid, at unit length (float32). ``qvec`` itself, the same object,
    when neither applies or what is left vanishes (a query of common words alone, a query
    equal to the mean of identical notes)."""
    take_words = word_weight > 0 and len(words) > 0
    take_mean = centroid is not None and share > 0
    if not (take_words or take_mean):
        return qvec
    moved: np.ndarray | None = np.asarray(qvec, dtype=np.float64)
    if take_words:
        moved = _unit(moved - word_weight * np.sum(np.asarray(words, dtype=np.float64), axis=0))
    if take_mean and moved is not None:
        moved = _unit(moved - share * np.asarray(centroid, dtype=np.float64))
    return qvec if moved is None else moved.astype(np.float32)


def _unit(vector: np.ndarray) -> np.ndarray | None:
    norm = float(np.linalg.norm(vector))
    return vector / norm if math.isfinite(norm) and norm >= 1e-6 else None


def common_terms(texts: Sequence[str]) -> frozenset[str]:
    """The BM25 terms at least :data:`COMMON_SHARE` of ``texts`` hold."""
    held = Counter(term for text in texts for term in set(tokenize(text)))
    least = COMMON_SHARE * len(texts)
    return frozenset(term for term, n in held.items() if n >= least)


class Shared(NamedTuple):
    """What a tenant's notes share: their mean vector (not normalised) and their common terms;
    None and nothing below :data:`MIN_NOTES` live notes."""

    centroid: np.ndarray | None
    common: frozenset[str]


class _Kept(NamedTuple):
    shared: Shared
    notes: int  # the tenant's live notes when it was read
    generation: int | None
    read_at: float  # the clock's epoch second


_NOTHING = Shared(None, frozenset())


class Centroids:
    """The tenants' :class:`Shared` readings, read when first needed and kept as the module
    docstring says, and the common words' vectors."""

    def __init__(self, index: NoteIndex) -> None:
        self._index = index
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._words: OrderedDict[str, np.ndarray] = OrderedDict()
        self._guard = threading.Lock()

    def rank_vector(self, qvec: np.ndarray, query: str, agent_id: str,
                    config: AmemConfig) -> np.ndarray:
        """The vector a search by ``agent_id`` ranks with (``qvec`` embeds ``query``)."""
        if config.centering <= 0 and config.common_words <= 0:
            return qvec
        shared = self.of(agent_id)
        words: list[np.ndarray] = []
        if config.common_words > 0 and shared.common:
            common = dict.fromkeys(surface for surface, term in surface_terms(query)
                                   if term in shared.common)
            words = self.word_vectors(list(common)[:QUERY_WORDS])
        return ranking_vector(qvec, words, config.common_words, shared.centroid,
                              config.centering)

    def of(self, agent_id: str) -> Shared:
        """``agent_id``'s reading now (kept, or read again)."""
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
            return kept.shared
        where = Where(must=(Match("agent_id", agent_id), Match("is_active", True)))
        notes = backend.count(where)
        shared = _NOTHING
        if notes >= MIN_NOTES:
            hits, _ = backend.scroll(where, limit=SAMPLE, with_vectors=True,
                                     fields=("id", "content"))
            vectors = [h.dense for h in hits if h.dense is not None]
            if len(vectors) >= MIN_NOTES:
                shared = Shared(np.mean(np.stack(vectors).astype(np.float64), axis=0),
                                common_terms([str(h.payload.get("content", ""))[:TERM_CHARS]
                                              for h in hits]))
        with self._guard:
            self._kept[agent_id] = _Kept(shared, notes, generation, now)
            self._kept.move_to_end(agent_id)
            while len(self._kept) > KEPT_TENANTS:
                self._kept.popitem(last=False)
        return shared

    def word_vectors(self, words: Sequence[str]) -> list[np.ndarray]:
        """Each word embedded alone as a query, kept (the same words recur: a store's names)."""
        out = []
        for word in words:
            with self._guard:
                vector = self._words.get(word)
                if vector is not None:
                    self._words.move_to_end(word)
            if vector is None:
                vector = self._index.embed_query(word)
                with self._guard:
                    self._words[word] = vector
                    while len(self._words) > KEPT_WORDS:
                        self._words.popitem(last=False)
            out.append(vector)
        return out


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
    if kept.shared.centroid is None:
        return writes == 0
    return writes < max(REFRESH_WRITES, REFRESH_SHARE * kept.notes)


__all__ = ["COMMON_SHARE", "Centroids", "MIN_NOTES", "QUERY_WORDS", "REFRESH_SHARE",
           "REFRESH_WRITES", "SAMPLE", "SHARED_TTL_S", "Shared", "TERM_CHARS", "common_terms",
           "ranking_vector"]
