"""Tokenisation for BM25: words, jieba for Chinese, character bigrams for kana and hangul.

Every script keeps its terms: Latin/Cyrillic/... words by ``\\w+`` (lower-cased, NFKC),
Han runs by jieba's search-mode cut plus character bigrams (both help: jieba finds words,
bigrams catch what jieba segments differently in the query and the note), kana and hangul
runs by overlapping character bigrams (unigrams for a run of one).
"""

from __future__ import annotations

import logging
import re
import functools
import threading
import unicodedata
import zlib
from collections import Counter
from typing import Any, Iterable

from . import segment
from .kernel.text import HAN as _HAN
from .kernel.text import HANGUL as _HANGUL
from .kernel.text import KANA as _KANA
from .kernel.text import bigrams as _bigrams
from .kernel.text import has_han as has_han
from .kernel.terms import STOPWORDS as STOPWORDS  # shared with lcm's hybrid recall

log = logging.getLogger(__name__)

# The script tables are the kernel's (amem.kernel.text). Its KANA adds halfwidth katakana,
# which changes no term here: tokenize() NFKC-normalises them to full width first.
# Combining marks are not \w in Python's re, yet Indic, Thai, Arabic... words need them.
_MARKS = r"\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed" \
    r"\u0900-\u0963\u0966-\u0dff\u0e00-\u0eff\u0f00-\u0fff\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"
_WORD = rf"(?:[^\W_{_HAN}{_KANA}{_HANGUL}]|[{_MARKS}])+"
_RUN = re.compile(rf"([{_HAN}]+)|([{_KANA}]+)|([{_HANGUL}]+)|({_WORD}(?:['’]{_WORD})?)")

#: bumped whenever a note's BM25 terms change (``tokenize`` maps a text to other terms, or
#: ``amem.bm25.note_terms`` builds the field otherwise): stored BM25 vectors made by another
#: version no longer match the query's terms or weights, so the store rebuilds them at open
#: (``amem.upgrades``). 3: enrichment terms the content already holds are not counted again.
TOKENIZER_VERSION = 3

_snowball_lock = threading.RLock()
_snowball: Any = None


def _english_stemmer() -> Any:
    """The Snowball (Porter 2) English stemmer, built once; its ``stemWord`` is not thread-safe."""
    global _snowball
    if _snowball is None:
        with _snowball_lock:
            if _snowball is None:
                import snowballstemmer

                _snowball = snowballstemmer.stemmer("english")
    return _snowball


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """English words to their Snowball (Porter 2) stem; possessive 's dropped first.

    Snowball joins the forms people and questions use ("deployment"/"deployed",
    "studied"/"study", "connection"/"connected") where a suffix stripper joined few; the same
    function runs on notes and queries, so an odd stem ("happi") still matches itself.
    Non-ASCII and short words are left alone.
    """
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    with _snowball_lock:
        return str(_english_stemmer().stemWord(word))


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """The BM25 terms of ``text`` in order (repeats kept: they are term frequencies)."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[str] = []
    for han, kana, hangul, word in _RUN.findall(text):
        if word:
            word = word.replace("’", "'")
            stemmed = stem(word)
            if keep_stopwords or (word not in STOPWORDS and stemmed not in STOPWORDS):
                out.append(stemmed)
        elif han:
            for piece in segment.cut_for_search(han):
                if keep_stopwords or piece not in STOPWORDS:
                    out.append(piece)
            if len(han) > 1:
                out.extend(_bigrams(han))
        elif kana:
            out.extend(_bigrams(kana))
        elif hangul:
            out.extend(_bigrams(hangul))
    return out


def surface_terms(text: str) -> list[tuple[str, str]]:
    """Each word of ``text`` as written (NFKC, lower case, a possessive 's dropped) beside the
    BM25 term it gives, stop words left out, in order; a Chinese run gives its jieba pieces
    (each its own term; the bigrams name no word). Kana and hangul runs give nothing: their
    terms are bigrams, not words. What a word of a query is, to embed it alone."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[tuple[str, str]] = []
    for han, _kana, _hangul, word in _RUN.findall(text):
        if word:
            word = word.replace("’", "'")
            stemmed = stem(word)
            if word not in STOPWORDS and stemmed not in STOPWORDS:
                out.append((word[:-2] if word.endswith("'s") else word, stemmed))
        elif han:
            out.extend((piece, piece) for piece in segment.cut_for_search(han)
                       if piece not in STOPWORDS)
    return out


#: a sentence: up to its closing marks (English and full-width), or the text's unclosed end
_SENTENCE = re.compile(r"[^.!?。！？]*[.!?。！？]+|[^.!?。！？]+$")
_BRACKETED = re.compile(r"\[[^\]]*\]")
#: a speaker's label opening a chat turn ("Melanie: ...", "user: ..."): part of no sentence
_SPEAKER = re.compile(r"^\s*[^\W\d][\w .'-]{0,39}:\s+")
_ASKING = ("?", "？")


def question_share(text: str) -> float:
    """The share of ``text``'s sentence characters in sentences that end with a question mark
    (0 for a text without sentences); bracketed annotations and a speaker's label opening the
    text are left out. A note stores it (``asks``) for search steps 4e and 5b
    (``amem.search.replies``), which rank a note that asks below one that tells."""
    bare = _SPEAKER.sub("", _BRACKETED.sub(" ", text), count=1)
    sentences = [s.strip() for s in _SENTENCE.findall(bare)]
    sentences = [s for s in sentences if s]
    total = sum(len(s) for s in sentences)
    if not total:
        return 0.0
    return sum(len(s) for s in sentences if s.endswith(_ASKING)) / total


def term_id(term: str) -> int:
    """A stable 31-bit id for a term (the sparse vector's index)."""
    return zlib.crc32(term.encode("utf-8")) & 0x7FFFFFFF


def term_counts(tokens: Iterable[str]) -> Counter[str]:
    return Counter(tokens)
