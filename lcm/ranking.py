"""lcm's ranking maths as pure functions: passage tokens, BM25 terms and BM25 scores.

RRF is the kernel's (:func:`amem.kernel.fusion.rrf`, one for amem and lcm; ties go to the id
seen first, the first ranking deciding, where lcm's own copy compared ``str(id)``).
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from amem.kernel.terms import STOPWORDS
from amem.kernel.text import CJK, bigrams

__all__ = ["tokenize", "terms", "bm25_scores", "bm25_of_counts"]

# A word, or one CJK letter (the letters of a run become bigrams); the group says which.
_TOKEN = re.compile(rf"([a-z0-9_./-]+)|([{CJK}])", re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; CJK characters become bigrams so Chinese/Japanese terms match."""
    out: list[str] = []
    cjk_run: list[str] = []
    for word, letter in _TOKEN.findall(text):
        if letter:
            cjk_run.append(letter)
            continue
        if cjk_run:  # any word, even one that strips to nothing ("..."), ends the run
            out += bigrams("".join(cjk_run))
            cjk_run = []
        word = word.lower().strip("./-")
        if word:
            out.append(word)
    if cjk_run:
        out += bigrams("".join(cjk_run))
    return out


_snowball_lock = threading.Lock()
_snowball: Any = None


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """An English word's Snowball (Porter 2) stem, by the rule of the notes store's
    ``amem.text.stem`` (words of three letters or fewer, and any with a non-ASCII letter or a
    digit, are left alone), so a question meets a turn as it meets a note. Kept here because
    lcm takes only the standard-library kernel from amem; the stemmer loads on first use."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    global _snowball
    with _snowball_lock:  # its stemWord is not thread-safe
        if _snowball is None:
            import snowballstemmer

            _snowball = snowballstemmer.stemmer("english")
        return str(_snowball.stemWord(word))


def terms(text: str) -> list[str]:
    """BM25 terms of ``text``: :func:`tokenize`'s with the shared stop words out
    (``amem.kernel.terms``) and English words stemmed, so "deployed" meets "deployment" and
    "what did" matches nothing. Paths and versions ("v4.1", "module_8.py") stay whole."""
    return [stem(t) for t in tokenize(text) if t not in STOPWORDS]


def bm25_scores(docs: Sequence[Sequence[str]], query: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """BM25 score of each tokenized doc for the query terms (0.0 when nothing matches)."""
    return bm25_of_counts([(len(d), Counter(d)) for d in docs], query, k1=k1, b=b)


def bm25_of_counts(docs: Sequence[tuple[int, Mapping[str, int]]], query: Sequence[str], k1: float = 1.2,
                   b: float = 0.75) -> list[float]:
    """:func:`bm25_scores` of docs given as (length in terms, count of each term): only the
    query's terms are looked up, so counts kept between calls are not counted again. The
    document frequencies are those of ``docs``."""
    if not docs:
        return []
    n = len(docs)
    avgdl = sum(length for length, _ in docs) / n or 1.0
    terms = list(dict.fromkeys(query))
    df = {t: sum(1 for _, tf in docs if tf.get(t)) for t in terms}
    out = []
    for length, tf in docs:
        score = 0.0
        for t in terms:
            f = tf.get(t, 0)
            if f == 0:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * length / avgdl))
        out.append(score)
    return out
