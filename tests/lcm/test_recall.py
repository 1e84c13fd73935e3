"""describe / expand / expand_query over the DAG, with and without an LLM."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from lcm import LcmStore
from lcm.errors import LcmNotFoundError, LcmValidationError
from lcm.recall import ExpansionFailedError

from .conftest import ScriptedLLM, chat

KEY = "agent:main:r"


@pytest.fixture
def deep(make_store: Callable[..., LcmStore]) -> LcmStore:
    store = make_store(leaf_chunk_tokens=300, fresh_tail_count=8, max_sweep_iterations=100, condensed_min_fanout=2)
    store.ingest(KEY, [{"role": "user", "content": "The staging password rotation happens every 90 days, decided by Priya"}])
    store.ingest(KEY, chat(200))
    store.compact(KEY, force=True)
    return store


def top_summary(store: LcmStore) -> str:
    return str(store.db.scalar("SELECT summary_id FROM summaries ORDER BY depth DESC, pk LIMIT 1"))


def test_describe_summary_lineage(deep: LcmStore) -> None:
    top = top_summary(deep)
    d = deep.describe(top)
    # lossless-claw's meaning: a condensed summary's parents are the summaries it was condensed
    # from (recall walks them down), its children the summaries condensed from it
    assert d.kind == "summary" and d.summary.kind == "condensed" and d.parent_ids  # type: ignore[union-attr]
    source = deep.describe(d.parent_ids[0])  # type: ignore[union-attr]
    assert top in source.child_ids and source.summary.depth < d.summary.depth  # type: ignore[union-attr]
    assert d.child_ids == [] and "parentIds" not in d.to_dict() and d.to_dict()["parent_ids"] == d.parent_ids  # type: ignore[union-attr]
    assert set(source.source_message_ids) <= set(d.source_message_ids)  # type: ignore[union-attr]
    assert d.to_dict()["summary"]["id"] == top
    m = deep.describe("msg_1")
    assert m.kind == "message" and m.summary_ids and "Priya" in m.content  # type: ignore[union-attr]


def test_describe_errors(deep: LcmStore) -> None:
    with pytest.raises(LcmNotFoundError):
        deep.describe("sum_0000000000000000")
    with pytest.raises(LcmNotFoundError):
        deep.describe("msg_999999")
    with pytest.raises(LcmValidationError):
        deep.describe("sum_xyz")
    # Ids past SQLite's integers overflowed the lookup; thousands of digits broke int() itself.
    for huge in ("msg_99999999999999999999", "msg_" + "9" * 5000):
        with pytest.raises(LcmNotFoundError, match="no message msg_9"):
            deep.describe(huge)
    for trailing in ("msg_1\n", "sum_0000000000000000\n", "file_0000000000000000\n"):
        with pytest.raises(LcmValidationError):  # $ would have matched before the newline
            deep.describe(trailing)


def test_expand_walks_down_to_messages_under_a_cap(deep: LcmStore) -> None:
    top = top_summary(deep)
    full = deep.expand([top], token_cap=100000)
    assert not full.truncated and full.messages
    assert [m.id for m in full.messages] == sorted(m.id for m in full.messages)  # chronological
    assert len({m.via for m in full.messages}) > 1
    capped = deep.expand([top], token_cap=300)
    assert capped.truncated and capped.total_tokens <= 300
    shallow = deep.expand([top], max_depth=0, token_cap=100000)
    assert len(shallow.summaries) == 1 and not shallow.messages
    by_query = deep.expand(query="password rotation", session_key=KEY, token_cap=100000)
    assert any("Priya" in m.content for m in by_query.messages)
    with pytest.raises(LcmValidationError):
        deep.expand(session_key=KEY)


def test_an_expansion_cut_by_max_expand_tokens_says_so(make_store: Callable[..., LcmStore]) -> None:
    # token_cap above maxExpandTokens was lowered silently: truncated, and no word of which cap
    store = make_store(leaf_chunk_tokens=300, fresh_tail_count=8, max_sweep_iterations=100,
                       condensed_min_fanout=2, max_expand_tokens=300)
    store.ingest(KEY, chat(200))
    store.compact(KEY, force=True)
    top = top_summary(store)
    lowered = store.expand([top], token_cap=100000)
    assert lowered.truncated and lowered.total_tokens <= 300
    assert lowered.warnings == ["token_cap 100000 was lowered to maxExpandTokens (300), the most one "
                                "expansion reads; what did not fit is left out"]
    own = store.expand([top], token_cap=200)  # the caller's own cap: nothing to add
    assert own.truncated and own.warnings == []


def test_expand_query_extractive(deep: LcmStore) -> None:
    res = deep.expand_query("How often does the staging password rotate?", query="password", session_key=KEY, max_tokens=200)
    assert res.method == "extractive" and "90 days" in res.answer
    assert res.cited_ids and res.cited_ids[0] == "msg_1"
    assert res.total_source_tokens > 0
    from_top = deep.expand_query("who decided the rotation?", summary_ids=[top_summary(deep)], max_tokens=200)
    assert from_top.expanded_summary_count >= 3 and "Priya" in from_top.answer
    assert set(res.to_dict()) >= {"answer", "cited_ids", "expanded_summary_count", "total_source_tokens", "truncated"}


def test_expand_query_with_llm_loop(deep: LcmStore) -> None:
    top = top_summary(deep)
    child = deep.describe(top).parent_ids[0]  # type: ignore[union-attr]
    llm = ScriptedLLM([f"EXPAND: {child}", "Every 90 days, decided by Priya [msg_1]."])
    deep.recall.llm = llm
    res = deep.expand_query("rotation period?", summary_ids=[top], max_tokens=100)
    assert res.method == "llm" and res.cited_ids == ["msg_1"] and len(llm.calls) == 2


def test_expand_query_llm_failure_is_an_error_code(deep: LcmStore) -> None:
    # It was a silent extractive answer, indistinguishable in use from the model's.
    deep.recall.llm = ScriptedLLM([RuntimeError("boom")])
    with pytest.raises(ExpansionFailedError) as info:
        deep.expand_query("password rotation?", query="password", session_key=KEY)
    assert info.value.code == "expansion_failed"


def test_expand_query_finds_raw_messages_before_compaction(store: LcmStore) -> None:
    store.ingest(KEY, [{"role": "user", "content": "the wifi password is hunter2"}, *chat(4)])
    res = store.expand_query("what is the wifi password?", query="wifi password", session_key=KEY)
    assert "hunter2" in res.answer and res.cited_ids == ["msg_1"]
    with pytest.raises(LcmValidationError):
        store.expand_query("", query="x", session_key=KEY)


class _EndsAtItsDeadline:
    """A deadline-aware model (amem's client) whose request ends with an error when the time
    it was given runs out, or at once when ``broken``."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken

    def complete(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        raise AssertionError("a deadline-aware model is asked with complete_within")

    def complete_within(self, system: str, user: str, *, max_tokens: int | None,
                        seconds: float) -> str:
        from amem.errors import LLMError

        if not self.broken:
            time.sleep(seconds)
        raise LLMError("passed the caller's deadline" if not self.broken else "HTTP 500")


def test_a_model_error_at_the_deadline_is_the_deadline_and_one_before_it_is_raised() -> None:
    from amem.errors import LLMError
    from lcm.recall import complete_by

    # the request's own cut lands a moment before the caller's wait ends: a timeout (None)
    assert complete_by(_EndsAtItsDeadline(), time.monotonic() + 0.2, "s", "u", 16) is None
    # a failure well before the deadline is the model's: raised, never taken for a timeout
    with pytest.raises(LLMError, match="HTTP 500"):
        complete_by(_EndsAtItsDeadline(broken=True), time.monotonic() + 5.0, "s", "u", 16)
