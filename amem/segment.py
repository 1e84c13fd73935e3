"""Chinese word segmentation: jieba, loaded once, with a cost bounded by the text's length.

BM25 tokenisation (``amem.text``) and offline keywords (``amem.enrich.keywords``) both cut Han
text with jieba; this is the one place that loads it and decides how it runs.

jieba's HMM guesses words that are not in its dictionary by a Viterbi pass over each run of
unknown single characters. On ordinary prose that pass is short, but its cost is ~100 µs a
character when a run is long: a 32,000-character note of one repeated character took 4.4 s
per pass here (0.07 s without the HMM), and an add cuts a note several times. Runs longer than
:data:`HMM_MAX_CHARS` are therefore cut by the dictionary alone. Recall does not depend on the
guess: BM25 also indexes every character bigram of a Han run, so an unknown word in a long
note still meets the same word in a query.
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any

#: longest Han run cut with jieba's HMM; longer runs use the dictionary alone (see above)
HMM_MAX_CHARS = 2000

_lock = threading.Lock()
_modules: tuple[Any, Any] | None = None


def jieba_modules() -> tuple[Any, Any]:
    """``jieba`` and ``jieba.analyse``, imported and initialised once, quietly."""
    global _modules
    if _modules is None:
        with _lock:
            if _modules is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # jieba imports pkg_resources on old setuptools
                    import jieba  # heavy: ~1 s to build its prefix dictionary
                    import jieba.analyse

                jieba.setLogLevel(logging.WARNING)  # it logs its dictionary build otherwise
                jieba.initialize()
                _modules = (jieba, jieba.analyse)
    return _modules


def use_hmm(han: str) -> bool:
    """Whether a run of Han text is short enough for jieba's HMM (see the module docstring)."""
    return len(han) <= HMM_MAX_CHARS


def cut(han: str) -> list[str]:
    """Words of a Han run (jieba's precise mode)."""
    jieba, _ = jieba_modules()
    return list(jieba.cut(han, HMM=use_hmm(han)))


def cut_for_search(han: str) -> list[str]:
    """Words of a Han run and the shorter words inside long ones (jieba's search mode)."""
    jieba, _ = jieba_modules()
    return list(jieba.cut_for_search(han, HMM=use_hmm(han)))


def tfidf_keywords(words: list[str], limit: int) -> list[tuple[str, float]]:
    """The ``limit`` words of ``words`` with the highest TF-IDF under jieba's IDF table.

    The same scoring as ``jieba.analyse.extract_tags`` (which would cut the text a second
    time, with the HMM whatever its length): unknown words get the median IDF, jieba's stop
    words and one-character words are left out, ties keep first occurrence.
    """
    _, analyse = jieba_modules()
    tfidf = analyse.default_tfidf
    counts: dict[str, int] = {}
    for word in words:
        if len(word.strip()) < 2 or word.lower() in tfidf.stop_words:
            continue
        counts[word] = counts.get(word, 0) + 1
    total = sum(counts.values())
    if not total:
        return []
    # multiplied in jieba's order, so the weights are the very floats extract_tags gives
    scored = [(w, c * (tfidf.idf_freq.get(w, tfidf.median_idf) / total)) for w, c in counts.items()]
    scored.sort(key=lambda item: -item[1])  # stable: ties keep the text's order
    return scored[:limit]
