"""A standing ReDoS corpus: every known catastrophic pattern answers (hits or regex_refused) within its deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from lcm import LcmConfig, LcmStore
from lcm.errors import RegexRefusedError
from lcm.regex import compile_user_regex, required_literal

KEY = "agent:redos:main"
DEADLINE_MS = 1000
#: what a grep may take beyond its deadline: one engine window plus Python bookkeeping
SLACK_S = 0.5

# Texts that make backtracking engines explode: long runs that almost match, then fail.
ADVERSARIAL = [
    "a" * 6000 + "!",
    "x" * 6000,
    "ab" * 3000,
    "word " * 1200 + "!",
    "supercalifragilistic" * 300,
    "1" * 3000 + "a",
    "中文字符" * 1500,
    "<" * 3000 + "a",
    "\t " * 3000 + "\n",
    "error: timeout after 30s, will retry",
]

#: The five from the issue (a backtracking engine freezes on each), then the classics.
ISSUE_PATTERNS = ["(.+){20}Q", r"(\w+\s?){1,60}$", "(a|a){1,64}b", "(x|x)*y", "(?:x|x)*y"]
CORPUS = ISSUE_PATTERNS + [
    "(a+)+$", "(a+)+b", "(a*)*b", "(a|aa)+$", "(a|a?)+$", "(.*a){20}", "(.*)*x", r"(\d+)*[a-z]$",
    r"^(\w+\s?)*$", r"(([a-z])+.)+[A-Z]([a-z])+", "(x+x+)+y", r"(\s*,\s*)*$", "(ab|a)*c", "(a{1,30}){1,30}$",
    r"^(([a-z])+.)+[A-Z]$", r"(<+)+>", r"([\w.]+)*@", "(中+)+x", "(.+)+!$", r"(1+)+a1$",
    "error.*timeout.*retry", "a.*b.*c.*d.*e.*f.*g", r"(\pL+\s?){1,4}$",
    # constructs RE2 cannot run: refused, never run by a backtracking engine instead
    "(?=(a+)+b)", "(?!(a+)+b)a", "(?<=(a+))b", "(?<!(a+)+)b", r"(a+)\1+b", "(?>a+)+b", "(a++)+b",
]  # fmt: skip
REFUSED = {"(?=(a+)+b)", "(?!(a+)+b)a", "(?<=(a+))b", "(?<!(a+)+)b", r"(a+)\1+b", "(?>a+)+b", "(a++)+b"}


@pytest.fixture(scope="module")
def hostile() -> Iterator[LcmStore]:
    with LcmStore(":memory:", LcmConfig(grep_regex_deadline_ms=DEADLINE_MS, log_file_enabled=False)) as store:
        store.ingest(KEY, [{"role": "user", "content": t} for t in ADVERSARIAL])
        yield store


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 25 and set(ISSUE_PATTERNS) <= set(CORPUS)


@pytest.mark.parametrize("pattern", CORPUS)
def test_each_pattern_answers_within_its_deadline(hostile: LcmStore, pattern: str) -> None:
    start = time.monotonic()
    for sort in ("recency", "relevance"):
        try:
            res = hostile.grep(pattern, mode="regex", session_key=KEY, sort=sort)
        except RegexRefusedError as exc:
            assert pattern in REFUSED, f"{pattern!r} refused: {exc}"
            assert exc.field == "pattern" and str(exc).startswith("regex refused: ")
            continue
        assert pattern not in REFUSED
        assert not res.truncated, res.warnings  # linear time: the whole conversation is read
        assert res.scanned >= 1 or res.hits == []
    assert time.monotonic() - start < 2 * DEADLINE_MS / 1000 + SLACK_S


def test_issue_patterns_run_and_find_what_they_should(hostile: LcmStore) -> None:
    def ids(pattern: str) -> list[str]:
        return [h.id for h in hostile.grep(pattern, mode="regex", session_key=KEY).hits]

    assert ids("error.*timeout.*retry") == ["msg_10"]  # refused by the old guard
    # \w is ASCII in RE2: the CJK message (msg_7) does not end in a word character
    assert ids(r"(\w+\s?){1,60}$") == ["msg_10", "msg_8", "msg_6", "msg_5", "msg_3", "msg_2"]
    assert ids("(x|x)*y") == ["msg_10"]  # no x, then the y of "retry"
    assert ids("(.+){20}Q") == [] and ids("(a|a){1,64}b") == ["msg_3"]


def test_a_long_text_cannot_hold_a_grep_past_its_deadline(make_store: Callable[..., LcmStore]) -> None:
    # The heaviest program allowed, on ~90 KB that defeats RE2's fast automaton: the scan
    # stops between windows at the deadline and says so (partial, marked truncated).
    store = make_store(grep_regex_deadline_ms=100)
    store.ingest(KEY, [{"role": "user", "content": "a" * 90000}, {"role": "user", "content": "a" * 90000 + "b"}])
    pattern = "([a-z]+[0-9]*){1,800}!"
    assert compile_user_regex(pattern).program_size > 4000
    start = time.monotonic()
    res = store.grep(pattern, mode="regex", session_key=KEY, sort="relevance")
    elapsed = time.monotonic() - start
    assert res.truncated and any("deadline" in w for w in res.warnings)
    assert elapsed < 0.1 + SLACK_S


def test_a_slow_statement_is_interrupted_at_the_deadline(make_store: Callable[..., LcmStore]) -> None:
    # A full-text query over many matches sorted by relevance: SQLite's progress handler stops it.
    store = make_store(grep_regex_deadline_ms=1)
    store.ingest(KEY, [{"role": "user", "content": f"common word number {i} " + "filler " * 40} for i in range(3000)])
    start = time.monotonic()
    res = store.grep("common word", mode="full_text", session_key=KEY, sort="relevance")
    assert res.truncated and any("deadline" in w for w in res.warnings)
    assert time.monotonic() - start < SLACK_S


@pytest.mark.parametrize("pattern,literal", [
    ("error.*timeout", "timeout"), ("[[:alpha:]]abc", None), (r"\pLabcdef", None), ("ab\x00cdef", "cdef"),
    ("(?i:abc)xy", None), ("(?i)straße", None), ("(?i)deploy", "deploy"),
])  # fmt: skip
def test_the_prefilter_literal_is_one_re2_requires(pattern: str, literal: str | None) -> None:
    # A wrong literal would silently drop matches; a NUL would break the FTS5 query.
    assert required_literal(pattern) == literal
    compile_user_regex(pattern)


def test_control_characters_in_a_regex_literal_search_fine(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    store.ingest(KEY, [{"role": "user", "content": "header\x01value and more text"}])
    assert [h.id for h in store.grep("header\x01value", mode="regex", session_key=KEY).hits] == ["msg_1"]
    assert store.grep("nothing\x00here", mode="regex", session_key=KEY).hits == []


@pytest.mark.parametrize("text", [
    "a" * 100_000, " " * 100_000, "a." * 50_000, "a-" * 50_000, ".a" * 50_000, "aB" * 50_000,
    "<relevant-memories>" * 5_000, "<relevant-memories " * 5_000,
], ids=["a", "spaces", "a.", "a-", ".a", "aB", "open-tags", "open-attrs"])  # fmt: skip
def test_compactions_own_patterns_stay_linear(text: str) -> None:
    # Every message a compaction reads goes through these; 20,000 spaces took 19.6 s in the
    # command pattern and 20,000 "a" 2.7 s in the path pattern (quadratic in the length).
    from lcm.extract import SourceUnit, extractive_summary
    from lcm.summarize import strip_injected_tags

    start = time.monotonic()
    stripped = strip_injected_tags(text, ["relevant-memories"])
    summary = extractive_summary([SourceUnit("1", "user", "10:00", stripped)], 200, header="Summary.")
    assert summary.startswith("Summary.") and stripped == text  # no closed block to drop
    assert time.monotonic() - start < 1.0


def test_a_slow_grep_does_not_hold_the_store_from_other_callers(make_store: Callable[..., LcmStore]) -> None:
    # The regex runs outside the database lock: another agent's reads and writes go through
    # while one grep spends its whole deadline on hostile text.
    import threading

    store = make_store(grep_regex_deadline_ms=1500)
    store.ingest(KEY, [{"role": "user", "content": "a" * 90000 + str(i)} for i in range(3)])
    done: list[float] = []
    grep = threading.Thread(target=lambda: done.append(
        store.grep("([a-z]+[0-9]*){1,800}!", mode="regex", session_key=KEY).scanned))
    start = time.monotonic()
    grep.start()
    time.sleep(0.2)
    other = time.monotonic()
    store.ingest("agent:other:main", [{"role": "user", "content": "meanwhile"}])
    assert store.describe("msg_1").kind == "message"
    waited = time.monotonic() - other
    grep.join(10)
    assert done and time.monotonic() - start >= 1.0  # the grep really was busy that long
    assert waited < 0.3, f"another caller waited {waited:.2f} s behind the grep"


def test_re2_grep_agrees_with_python_re_on_ascii_text(make_store: Callable[..., LcmStore]) -> None:
    """Differential check of the literal pre-filter and the windows: on ASCII text without a
    trailing newline (where the dialects agree) grep finds exactly the rows Python's re finds."""
    import random
    import re
    import signal

    rng = random.Random(5)
    words = ["error", "timeout", "retry", "deploy", "ab", "aab", "x1", "Foo", "bar.py", "a-b", "[x]", "(y)", "q?"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.choice([3, 20, 200]))) for _ in range(40)]
    texts.append(" ".join(rng.choice(words) for _ in range(20000)) + " deploy-zz")  # > one 64 KB window
    store = make_store()
    store.ingest(KEY, [{"role": "user", "content": t} for t in texts])
    tokens = [*"abexrotFBpy.-()[]|*+?^$\\12 dw", "error", "timeout", "retry", "deploy", ".*", r"\b", r"\w+", "{1,3}"]

    def python_rows(rx: re.Pattern[str]) -> list[int] | None:
        def give_up(*_: object) -> None:
            raise TimeoutError

        previous = signal.signal(signal.SIGALRM, give_up)  # Python's re may backtrack for ever
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            return [i + 1 for i, t in enumerate(texts) if rx.search(t)]
        except TimeoutError:
            return None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    compared = 0
    while compared < 150:
        pattern = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 8)))
        try:
            rx = re.compile(pattern)
            res = store.grep(pattern, mode="regex", session_key=KEY, limit=200)
        except (re.error, ValueError):  # invalid for Python, or refused / invalid for RE2
            continue
        want = python_rows(rx)
        if want is None:
            continue
        assert sorted(int(h.id[4:]) for h in res.hits) == want, pattern
        compared += 1
    assert store.grep("deploy-zz", mode="regex", session_key=KEY).hits[0].id == f"msg_{len(texts)}"
