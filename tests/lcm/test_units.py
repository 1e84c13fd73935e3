"""Pure pieces: token estimates, globs, ranking maths, the extractive summarizer, the RE2 regex wrapper."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from lcm.errors import RegexRefusedError
from lcm.extract import FOOTER_PREFIX, TRUNCATED_MARKER, SourceUnit, extractive_summary, truncate_to_tokens
from amem.kernel.fusion import rrf
from lcm.ranking import bm25_of_counts, bm25_scores, tokenize
from lcm.regex import DeadlineExceeded, compile_user_regex, required_literal
from lcm.sessions import glob_match, is_cron_key
from lcm.summarize import strip_injected_tags
from lcm.tokens import estimate_tokens


def test_token_estimate_ascii_and_cjk() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 100) == 100
    assert estimate_tokens("数据库" * 10) == 45  # 1.5 tokens a CJK character
    assert estimate_tokens("ab 数据") == 4  # ceil(3/4 + 3)


def test_glob_semantics() -> None:
    assert glob_match("agent:*:cron:**", "agent:main:cron:nightly:run:1")
    assert not glob_match("agent:*:cron:**", "agent:main:sub:cron:x")  # * stops at ':'
    assert glob_match("agent:*:**:active-memory:**", "agent:a:b:c:active-memory:x")
    assert is_cron_key("agent:ops:cron:job") and not is_cron_key("agent:ops:chat")
    assert glob_match("x**", "x\nline") and glob_match("a b#&~[*]", "a b#&~[q]")  # ** spans newlines


def test_globs_match_in_linear_time() -> None:
    # Backtracking took 153 s on this 400-character key; keys come from callers.
    start = time.monotonic()
    assert not glob_match("agent:**a**a**a**a**b", "agent:" + "a" * 400)
    assert time.monotonic() - start < 0.5


def test_rrf_and_bm25_are_pure() -> None:
    fused = rrf([["a", "b", "c"], ["c", "a"]])
    assert [k for k, _ in fused] == ["a", "c", "b"]
    scores = bm25_scores([tokenize("the deploy failed"), tokenize("lunch plans"), []], tokenize("deploy"))
    assert scores[0] > 0 and scores[1] == 0 and scores[2] == 0
    assert "数据" in tokenize("数据库")


def test_bm25_is_the_okapi_formula_over_the_docs_given() -> None:
    import math

    docs = [["deploy", "failed", "deploy"], ["lunch", "plans"], ["deploy", "ok", "now", "done"]]
    n, avgdl, k1, b = 3, 3.0, 1.2, 0.3
    idf = math.log(1 + (n - 2 + 0.5) / (2 + 0.5))  # "deploy" is in two of three docs

    def term(tf: int, length: int) -> float:
        return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))

    assert bm25_scores(docs, ["deploy", "deploy"], k1=k1, b=b) == [term(2, 3), 0.0, term(1, 4)]
    # the same from counts kept between calls (lcm.hybrid keeps each turn's)
    counts = [(len(d), Counter(d)) for d in docs]
    assert bm25_of_counts(counts, ["deploy"], k1=k1, b=b) == bm25_scores(docs, ["deploy"], k1=k1, b=b)
    assert bm25_of_counts([], ["deploy"]) == [] and bm25_of_counts(counts, []) == [0.0, 0.0, 0.0]


def test_extractive_summary_keeps_what_recall_needs() -> None:
    units = [
        SourceUnit("1", "user", "10:00", "hi there, how are you doing today my friend"),
        SourceUnit("2", "user", "10:01", "The build fails with ModuleNotFoundError in src/app/main.py"),
        SourceUnit("3", "assistant", "10:02", "Run `pip install -e .` then retry; we decided to pin numpy 1.26 on 2025-03-04"),
        SourceUnit("4", "assistant", "10:03", "ok " * 50),
    ]
    text = extractive_summary(units, 80, header="Summary of 4 messages.")
    assert text.startswith("Summary of 4 messages.")
    assert "ModuleNotFoundError" in text and "src/app/main.py" in text
    assert "pip install" in text and "2025-03-04" in text
    assert text.splitlines()[-1].startswith(FOOTER_PREFIX)
    assert estimate_tokens(text) <= 100


def test_truncate_marks_and_keeps_footer() -> None:
    text = "\n".join(f"line {i} " + "x" * 40 for i in range(50)) + f"\n{FOOTER_PREFIX} a, b"
    cut, was = truncate_to_tokens(text, 60)
    assert was and TRUNCATED_MARKER in cut and cut.endswith(f"{FOOTER_PREFIX} a, b")
    assert truncate_to_tokens("short", 60) == ("short", False)


def test_strip_injected_tags() -> None:
    text = "before <relevant-memories id='1'>secret recall</relevant-memories> after <x/> <relevant_memories/>"
    out = strip_injected_tags(text, ["relevant-memories", "relevant_memories"])
    assert "secret" not in out and "before" in out and "after" in out


@pytest.mark.parametrize("pattern,names", [
    (r"(a)\1", "backreference"), (r"(?P<n>a)(?P=n)", "backreference"), ("(?=a)b", "lookahead"),
    ("(?!a)b", "negative lookahead"), ("(?<=a)b", "lookbehind"), ("(?<!a)b", "negative lookbehind"),
    ("(?>a+)b", "atomic group"), ("a++b", "possessive"), ("(?(1)a|b)", "conditional"),
    (r"a\Z", "use .z"), ("(?x) a", "flag"), ("a{1001}", "1000"), (r"(\pL+\s?){1,50}$", "instructions"),
    ("", "empty"), ("(unclosed", "missing "), ("x" * 501, "longer than"),
])  # fmt: skip
def test_regex_refusals_name_the_construct(pattern: str, names: str) -> None:
    with pytest.raises(RegexRefusedError, match=names) as err:
        compile_user_regex(pattern)
    assert err.value.field == "pattern" and err.value.code == "regex_refused"


@pytest.mark.parametrize("pattern", [
    "error.*line", "error.*timeout.*retry", r"\w+\s+\w+", r"(\d{1,3}\.){3}\d{1,3}", "colou?r", "a.*b.*x",
    "(a+)+$", r"(\w+\s?){1,60}$", r"\pL+", "(?i)Straße",
])  # fmt: skip
def test_regex_accepts_what_re2_runs_in_linear_time(pattern: str) -> None:
    assert compile_user_regex(pattern).pattern == pattern


def test_windowed_scan_finds_matches_anywhere_and_keeps_anchors() -> None:
    rx = compile_user_regex("b+c")
    text = "x" * 5000 + "bbc" + "é" * 30000 + "bc"
    assert rx.positions(text, time.monotonic() + 5, 5) == [5000, 35003]  # character offsets, past windows
    # Windows keep the whole text as context: ^ and $ are the text's edges, not a window's.
    assert compile_user_regex("^x").positions("x" * 100000, time.monotonic() + 5, 100) == [0]
    assert compile_user_regex("x$").positions("x" * 100000, time.monotonic() + 5, 100) == [99999]
    with pytest.raises(DeadlineExceeded):
        rx.positions("x" * 100000, time.monotonic() - 1, 1)  # checked between windows
    # A match across a window boundary is found through the overlap (once).
    needle = compile_user_regex("needle")
    for edge in (needle.window - 3, 2 * needle.window - needle.window // 8 - 3):
        text = "x" * edge + "needle" + "x" * 200000
        assert needle.positions(text, time.monotonic() + 5, 10) == [edge]


def test_required_literal() -> None:
    assert required_literal("error.*line") == "error"
    assert required_literal(r"\d+") is None
