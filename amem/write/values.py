"""Whether two alike notes state different values: another fact, never a duplicate.

Notes alike in shape but not in fact ("Server A has 16 GB of RAM" beside server B's, two
bills of another amount and month, "Mum takes 5 mg ..." beside "Dad takes 5 mg ...") sit
as close as real rewordings with the default embedder (note similarity 0.88-0.91 against
0.85-0.93 for paraphrases), so no cosine threshold tells them apart. Their words do: each
holds a value the other lacks. A value is a word with a digit (whole: "10:40", "LH400",
"2026-11-03") or a capitalised word (a name, a unit, an identifier: "Bob", "GB", "B"; one
that opens a sentence only when it is no stop word). A rewording may add a value ("Alice
has a peanut allergy" -> "..., found in 2019") or drop one, but a pair where *each* side
holds one the other lacks states two facts (or a change, which is the supersession
judge's to decide, not a fold's).
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..text import tokenize

_WORD = re.compile(r"[\w.:/-]*\w")
_DIGIT = re.compile(r"\d")


@lru_cache(maxsize=4096)
def _parse(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(values, words)`` of ``text``: its values, and every word it holds (raw and stemmed)."""
    values: set[str] = set()
    words: set[str] = set(tokenize(text))
    for match in _WORD.finditer(text):
        word = match.group().strip(".:/-")
        if not word:
            continue
        key = word.casefold()
        words.add(key)
        if not word.isalnum():  # "10:40", "db-2.internal": its parts, as the tokenizer cuts them
            words.update(tokenize(word))
        if _DIGIT.search(word):
            values.add(key)
        elif word[0].isupper() and word != "I":
            if not _opens_sentence(text, match.start()) or tokenize(word):
                values.add(key)
    return frozenset(values), frozenset(words)


def _opens_sentence(text: str, at: int) -> bool:
    """Whether the word at ``at`` opens a sentence: nothing before it but spaces, or a line
    break or one of ``.!?:;`` before the spaces right before it. Read backwards from ``at``
    (a regex over ``text[:at]`` for every capitalised word was quadratic in the text)."""
    i = at - 1
    while i >= 0 and text[i].isspace():
        if text[i] == "\n":
            return True
        i -= 1
    return i < 0 or text[i] in ".!?:;"


def _new_values(a: str, b: str) -> set[str]:
    """The values of ``a`` that ``b`` does not hold (as a word or its stem)."""
    values, _ = _parse(a)
    _, words = _parse(b)
    out = set()
    for value in values:
        stems = set(tokenize(value))
        if value not in words and not (stems and stems <= words):
            out.add(value)
    return out


def state_different_values(a: str, b: str) -> bool:
    """Whether each of two texts holds a value the other lacks (see the module docstring)."""
    return bool(_new_values(a, b)) and bool(_new_values(b, a))


__all__ = ["state_different_values"]
