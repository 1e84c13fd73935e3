"""Hybrid recall's ranking maths: the word leg's terms, its BM25 over the candidates, the fusion.

``grep(mode="hybrid")`` (:mod:`lcm.semantic`) gathers candidates from two legs, the nearest
vectors and the engine's full-text index read with the question's words OR-ed, then ranks
them here, the same way on SQLite and PostgreSQL:

1. :func:`index_words`: the words the full-text index is asked for. Function words go
   ("what", "did", "the"): OR-ed, they match most of a conversation and fill the word leg's
   candidates with turns that share nothing else with the question.
2. :func:`candidate_bm25`: every candidate scored by BM25 over the terms of its date and its
   text (:func:`lcm.ranking.terms`: stop words out and amem's Snowball stems, as in the notes
   store; CJK as character bigrams), ``k1 = 1.2``, ``b = 0.3`` (the notes store's parameters: short
   turns are not favoured for being short). The date ("8 May 2023", in the store's time
   zone) is what a note of amem carries in its text: a question naming a month or a year
   then finds that day's turns. Document frequencies are counted over the candidates, not
   the whole store (a local IDF): the candidates are the turns near the question by either
   leg, and among them a word every candidate shares (the speaker's name) weighs little.
3. :func:`fuse`: z-score fusion (:func:`amem.kernel.fusion.zscore_fusion`) of that BM25 and the
   cosine, weights ``WORD_WEIGHT`` and ``1 - WORD_WEIGHT``: unlike RRF it keeps how far the
   best match of a leg stands out.

Measured on the LoCoMo dev conversations as messages (``benchmarks.lcm_semantic``, RESULTS.md
"LCM semantic recall"): R@10 0.631 with RRF of FTS5's BM25 and the cosine, 0.71 with this.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar
from zoneinfo import ZoneInfo

from amem.kernel.fusion import zscore_fusion
from amem.kernel.terms import STOPWORDS
from lcm.ranking import bm25_of_counts, terms

__all__ = ["WORD_WEIGHT", "K1", "B", "CANDIDATES", "index_words", "date_label", "candidate_bm25", "fuse"]

#: the word leg's weight in the fusion (the cosine's is 1 - this): chosen on half the LoCoMo
#: dev questions from 0.4 / 0.5 (RESULTS.md); the notes store uses 0.4 over its own BM25
WORD_WEIGHT = 0.5
#: BM25 parameters: amem's (``amem.bm25``), not FTS5's fixed b = 0.75
K1 = 1.2
B = 0.3
#: candidates each leg contributes at least (more when the caller asks for more hits)
CANDIDATES = 50

K = TypeVar("K", bound=Hashable)
_TERM = re.compile(r'"[^"]*"|\S+')
_WORDISH = re.compile(r"\w+")


def index_words(pattern: str) -> str:
    """``pattern`` without its function words, for the full-text index's OR-ed query.

    A token whose every word is a stop word goes (``"What"``, ``"did"``, ``"it?"``); a quoted
    phrase stays whole. When nothing would be left (``"what is it"``) the pattern is returned
    as it is, so the index still sees the words the caller typed.
    """
    kept = []
    for m in _TERM.finditer(pattern):
        token = m.group(0)
        words = _WORDISH.findall(token.lower())
        if token.startswith('"') or not words or any(w not in STOPWORDS for w in words):
            kept.append(token)
    left = " ".join(kept)
    return left if _WORDISH.search(left) else pattern


@functools.lru_cache(maxsize=8192)
def date_label(stored: str, tz: str) -> str:
    """A stored timestamp as the day it names in zone ``tz``: ``"8 May 2023"`` ("" if unreadable).

    Kept per process: every candidate of a hybrid grep is labelled, and the same turns come
    back grep after grep (parsing, converting and formatting was ~2 us a candidate)."""
    try:
        dt = datetime.fromisoformat(stored).astimezone(ZoneInfo(tz))
    except ValueError:
        return ""
    return f"{dt.day} {dt.strftime('%B %Y')}"


#: texts up to this length keep their terms in a small per-process cache (a chat turn; a long
#: pasted text is tokenised each time, so the cache stays within a few tens of MB)
_CACHED_CHARS = 1000


def _counted(text: str) -> tuple[int, Mapping[str, int]]:
    found = terms(text)
    return len(found), Counter(found)


#: read-only: the counts are shared by every grep that meets the text again
_cached_counts = functools.lru_cache(maxsize=2048)(_counted)


def _counts(text: str) -> tuple[int, Mapping[str, int]]:
    # An agent greps the same history again and again and the same turns come back as
    # candidates: tokenising and stemming was most of a hybrid grep's own time, then
    # counting each candidate's terms again (BM25 only looks up the question's).
    return _cached_counts(text) if len(text) <= _CACHED_CHARS else _counted(text)


def candidate_bm25(query: str, texts: Sequence[str]) -> list[float]:
    """BM25 (k1 ``K1``, b ``B``) of each candidate text for ``query`` over lcm's terms, the
    document frequencies counted among the candidates. 0.0 for a text sharing no term."""
    return bm25_of_counts([_counts(t) for t in texts], terms(query), k1=K1, b=B)


def fuse(candidates: Sequence[K], words: Mapping[K, float], cosines: Mapping[K, float],
         weight: float = WORD_WEIGHT) -> list[tuple[K, float]]:
    """Z-score fusion of the word scores (every candidate has one) and the cosines, best first.

    A candidate without a cosine (not embedded yet) is given the lowest cosine known: it is
    found by its words alone, never lifted by a similarity it was not measured to have.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be within 0..1, got {weight!r}")
    fill = min(cosines.values()) if cosines else 0.0
    return zscore_fusion(candidates, [words, cosines], [weight, 1.0 - weight], [0.0, fill])
