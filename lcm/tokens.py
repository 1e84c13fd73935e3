"""Token estimates without a model tokenizer: ~4 ASCII characters a token, ~1.5 tokens a CJK character.

Every ingested message is counted, so the estimate must be cheap; ``benchmarks/lcm_bench.py``
measures its speed. Errors matter little: thresholds carry headroom and the count is stored
per message, so a better estimator only changes future rows.
"""

from __future__ import annotations

import math
import re

from amem.kernel.text import CJK, CJK_WIDE

__all__ = ["estimate_tokens", "is_cjk_text", "CJK_RE"]

# The letters of Han, kana and Hangul, and CJK punctuation/fullwidth forms (amem.kernel.text;
# from that table lcm also counts the Hangul jamo and the katakana extensions as CJK).
CJK_RE = re.compile(f"[{CJK}{CJK_WIDE}]")
_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]")


def estimate_tokens(text: str) -> int:
    """Estimate the token count of ``text`` (never below 1 for non-empty text)."""
    if not text:
        return 0
    if text.isascii():
        return max(1, math.ceil(len(text) / 4))
    cjk = len(CJK_RE.findall(text))
    other_non_ascii = len(_NON_ASCII_RE.findall(text)) - cjk
    ascii_chars = len(text) - cjk - other_non_ascii
    # Accented Latin, Cyrillic etc. split into more pieces than ASCII: ~2 characters a token.
    return max(1, math.ceil(ascii_chars / 4 + cjk * 1.5 + other_non_ascii / 2))


def is_cjk_text(text: str) -> bool:
    """True when the text contains any CJK character."""
    return CJK_RE.search(text) is not None
