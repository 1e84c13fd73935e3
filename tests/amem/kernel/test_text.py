"""One CJK table: every module that asks "is this CJK?" answers as the kernel does."""

from __future__ import annotations

import re
import unicodedata

import pytest

from amem import text as amem_text
from amem.enrich import keywords
from amem.kernel.text import CJK, CJK_WIDE, HAN, KANA, bigrams, has_cjk, has_han, is_cjk_char
from lcm import assemble, ranking, tokens

_BMP = [chr(c) for c in range(0x80, 0x10000) if not 0xD800 <= c <= 0xDFFF]


def test_every_cjk_check_agrees_with_the_kernel_table_over_the_whole_bmp() -> None:
    cjk = {ch for ch in _BMP if is_cjk_char(ch)}
    wide = set(re.findall(f"[{CJK_WIDE}]", "".join(_BMP)))
    # lcm's token estimate: CJK letters plus CJK punctuation and full/halfwidth forms
    assert {ch for ch in _BMP if tokens.is_cjk_text(ch)} == cjk | wide
    # lcm's passage tokenizer makes a one-character term (a bigram seed) of exactly those letters
    assert {ch for ch in _BMP if ranking.tokenize(ch) == [ch.lower()] and is_cjk_char(ch)} == cjk
    assert not any(is_cjk_char(t) for ch in _BMP if not is_cjk_char(ch) for t in ranking.tokenize(ch))
    # amem's keyword extractor
    assert {ch for ch in _BMP if keywords._CJK_ANY.match(ch)} == cjk
    # amem's BM25 tokenizer and lcm's prompt terms see the same Han
    han = {ch for ch in _BMP if has_han(ch)}
    assert {ch for ch in _BMP if amem_text.has_han(ch)} == han
    assert {ch for ch in _BMP if assemble.prompt_terms(ch * 2) == {(ch * 2).lower()} and has_han(ch)} == han


@pytest.mark.parametrize("ch,why", [
    ("ㅋ", "Hangul compatibility jamo (lcm's tables lacked it)"),
    ("ᄀ", "Hangul conjoining jamo (lcm's tables lacked it)"),
    ("ㇰ", "katakana phonetic extension (lcm's tables lacked it)"),
    ("﨑", "a compatibility ideograph that is a unified ideograph (lcm's tokenizer lacked it)"),
    ("ｱ", "halfwidth katakana"),
])
def test_the_former_differences_are_cjk_everywhere(ch: str, why: str) -> None:
    assert is_cjk_char(ch) and has_cjk(f"x{ch}y"), why
    assert tokens.is_cjk_text(ch), why
    assert ranking.tokenize(ch + ch) == [(ch + ch).lower()], why
    assert tokens.estimate_tokens(ch * 2) == 3  # 1.5 tokens a CJK character


def test_yijing_hexagrams_are_symbols_not_han() -> None:
    hexagram = "\u4dc0"  # inside lcm's old U+3400-9FFF span, but category So
    assert unicodedata.category(hexagram) == "So"
    assert not is_cjk_char(hexagram) and not has_han(hexagram)
    assert ranking.tokenize(hexagram * 3) == [] and assemble.prompt_terms(hexagram * 2) == set()


def test_bigrams_and_the_tables() -> None:
    assert bigrams("数据库") == ["数据", "据库"] and bigrams("数") == ["数"] and bigrams("") == []
    assert re.fullmatch(f"[{HAN}]+", "数據") and re.fullmatch(f"[{KANA}]+", "ひらがなカタカナｶﾀｶﾅ")
    # amem's tokenizer is unchanged by the halfwidth kana: NFKC makes them full width first
    assert amem_text.tokenize("ｶﾀｶﾅ") == amem_text.tokenize("カタカナ") == ["カタ", "タカ", "カナ"]
