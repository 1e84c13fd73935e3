"""Script handling shared by amem and lcm: one table of CJK ranges and the helpers built on it.

There were four tables, three different (amem's tokenizer and keyword extractor, lcm's token
estimate, lcm's passage tokenizer). The decisions taken where they differed:

* Han: the unified ideographs (U+4E00-9FFF), Extension A (U+3400-4DBF: rare characters of
  names and places) and the compatibility ideographs (U+F900-FAFF: twelve of them are unified
  ideographs in their own right, e.g. 﨑 of Japanese surnames). lcm's ``\\u3400-\\u9fff`` also
  took U+4DC0-4DFF, the Yijing hexagram *symbols* (category So, not Han): they are out.
  Extensions B and later (U+20000 and up) stay out for now: adding them changes amem's BM25
  terms, which needs a ``TOKENIZER_VERSION`` bump and a rebuild of every store.
* Kana: hiragana, katakana, the katakana phonetic extensions (U+31F0-31FF, small Ainu kana)
  and halfwidth katakana (U+FF66-FF9F). amem's tokenizer NFKC-normalises first, which maps
  halfwidth katakana to full width, so for it the halfwidth range changes nothing; the keyword
  extractor and lcm read raw text, where it matters.
* Hangul: the syllables (U+AC00-D7AF), the conjoining jamo (U+1100-11FF) and the compatibility
  jamo (U+3130-318F: ㅋㅋ, ㅠㅠ are everyday chat). lcm lacked both jamo blocks.
* CJK symbols and punctuation (U+3000-303F) and the full/halfwidth forms (U+FF00-FFEF) are not
  letters of any script: they are a separate class, :data:`CJK_WIDE`, that lcm's token
  estimate counts as CJK-sized.

The tables are regex character-class bodies (``f"[{HAN}]"``), so callers combine them.
"""

from __future__ import annotations

import re

__all__ = ["HAN", "HIRAGANA", "KATAKANA", "KANA", "HANGUL", "CJK", "CJK_WIDE", "has_han", "has_cjk",
           "is_cjk_char", "bigrams"]

#: Han ideographs: Extension A, the unified block, the compatibility block
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
HIRAGANA = "\u3040-\u309f"
#: katakana, its phonetic extensions, halfwidth katakana
KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
KANA = HIRAGANA + KATAKANA
#: Hangul syllables, conjoining jamo, compatibility jamo
HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
#: the letters of the CJK scripts
CJK = HAN + KANA + HANGUL
#: what CJK text also holds that is not a letter: CJK punctuation, full/halfwidth forms
CJK_WIDE = "\u3000-\u303f\uff00-\uffef"

_HAN_RE = re.compile(f"[{HAN}]")
_CJK_RE = re.compile(f"[{CJK}]")


def has_han(text: str) -> bool:
    """True when ``text`` holds a Han ideograph."""
    return _HAN_RE.search(text) is not None


def has_cjk(text: str) -> bool:
    """True when ``text`` holds a letter of a CJK script (Han, kana, Hangul)."""
    return _CJK_RE.search(text) is not None


def is_cjk_char(ch: str) -> bool:
    """True when the one character ``ch`` is a letter of a CJK script."""
    return len(ch) == 1 and _CJK_RE.match(ch) is not None


def bigrams(run: str) -> list[str]:
    """Overlapping character pairs of a run of CJK letters (the run itself when it is one
    character): how text without spaces between words becomes terms that match."""
    if len(run) <= 1:
        return [run] if run else []
    return [run[i:i + 2] for i in range(len(run) - 1)]
