"""Token estimates without a model tokenizer: ~4 ASCII characters a token, ~1.5 tokens a CJK character.

Every ingested message is counted, so the estimate must be cheap; ``benchmarks/lcm_bench.py``
measures its speed. Errors matter little: thresholds carry headroom and the count is stored
per message, so a better estimator only changes future rows.
"""

from __future__ import annotations

import math
import re

__all__ = ["estimate_tokens", "is_cjk_text", "CJK_RE"]

# Han, Hiragana, Katakana, Hangul and CJK punctuation/fullwidth forms.
CJK_RE = re.compile(
    "[\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
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
