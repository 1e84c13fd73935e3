"""Pure pieces: token estimates, globs, ranking maths, the extractive summarizer, the regex guard."""

from __future__ import annotations

import time

import pytest

from lcm.errors import RegexGuardError
from lcm.extract import FOOTER_PREFIX, TRUNCATED_MARKER, SourceUnit, extractive_summary, truncate_to_tokens
from lcm.ranking import bm25_scores, rrf, tokenize
from lcm.regex_guard import check_regex, required_literal
from lcm.search import _Timeout, regex_positions
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


def test_rrf_and_bm25_are_pure() -> None:
    fused = rrf([["a", "b", "c"], ["c", "a"]])
    assert [k for k, _ in fused] == ["a", "c", "b"]
    scores = bm25_scores([tokenize("the deploy failed"), tokenize("lunch plans"), []], tokenize("deploy"))
    assert scores[0] > 0 and scores[1] == 0 and scores[2] == 0
    assert "数据" in tokenize("数据库")


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


@pytest.mark.parametrize(
    "pattern", ["(a+)+$", "(a|aa)*b", "(\\w+\\s?)*$", "a.*b.*x", "a.{0,200}b.*x", "(.*)\\1x", "", "(unclosed", "x" * 501]
)
def test_regex_guard_refuses(pattern: str) -> None:
    with pytest.raises(RegexGuardError) as err:
        check_regex(pattern)
    assert err.value.field == "pattern"


@pytest.mark.parametrize("pattern", ["error.*line", r"\w+\s+\w+", r"(\d{1,3}\.){3}\d{1,3}", "colou?r", "a.{0,16}b.*c"])
def test_regex_guard_accepts_ordinary_patterns(pattern: str) -> None:
    assert check_regex(pattern).pattern == pattern


def test_windowed_regex_respects_its_deadline() -> None:
    # (ab?)*c passes the static guard but is quadratic on this text: windows bound each call.
    text = "ab" * 40000
    compiled = check_regex(r"(ab?)*c")
    start = time.monotonic()
    with pytest.raises(_Timeout):
        regex_positions(compiled, text, time.monotonic() + 0.3, 1)
    assert time.monotonic() - start < 2.0
    assert regex_positions(check_regex("b+c"), "x" * 5000 + "bbc" + "y" * 5000, time.monotonic() + 5, 5) == [5000]


def test_required_literal() -> None:
    assert required_literal("error.*line") == "error"
    assert required_literal(r"\d+") is None
