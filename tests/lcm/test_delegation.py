"""Delegated deep recall: ranked conversation buckets, one shared deadline, one shared token cap.

The slow model is real waiting (a scripted LLM that sleeps for some conversations), so the
deadline, the partial answer and the breakdown are what a caller would see.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest

from lcm import LcmStore
from lcm.delegation import Bucket, rank_buckets
from lcm.recall import ExpansionFailedError, ExpansionTimeoutError

from .conftest import ScriptedLLM

KEYS = [f"agent:main:s{i}" for i in range(5)]


def _fill(store: LcmStore, keys: list[str] = KEYS) -> dict[str, int]:
    """One conversation per key, each mentioning the staging password once; compacted."""
    ids = {}
    for n, key in enumerate(keys):
        store.ingest(key, [{"role": "user", "content": f"conversation {n}: the staging password is rotated by team-{n}"}])
        store.ingest(key, [{"role": ("assistant", "user")[i % 2], "content": f"filler {n}.{i} about lunch and weather"}
                           for i in range(12)])
        store.compact(key, force=True)
        ids[key] = store.conversation(key).id  # type: ignore[union-attr]
    return ids


@pytest.fixture
def many(make_store: Callable[..., LcmStore]) -> LcmStore:
    store = make_store(fresh_tail_count=4, leaf_chunk_tokens=60, leaf_min_fanout=4)
    _fill(store)
    return store


def test_buckets_rank_given_ids_then_count_then_newest_then_id() -> None:
    buckets = [Bucket(5, ["a"], candidates=1, newest="2026-01-02"), Bucket(4, ["b"], candidates=1, newest="2026-01-02"),
               Bucket(9, ["c", "d"], candidates=2, newest="2025-01-01"), Bucket(7, ["e"], explicit=1, candidates=1),
               Bucket(3, ["f"], candidates=1, newest="2026-03-01")]
    assert [b.conversation_id for b in rank_buckets(buckets)] == [7, 9, 3, 4, 5]
    backed = [Bucket(2, candidates=1, newest="x"), Bucket(1, candidates=1, newest="x", message_backed=1)]
    assert [b.conversation_id for b in rank_buckets(backed)] == [1, 2]


def test_cross_conversation_expands_the_top_three_and_marks_the_rest_skipped(many: LcmStore) -> None:
    res = many.expand_query("who rotates the staging password?", query="staging password", session_key=KEYS,
                            max_tokens=400)
    rows = res.conversation_breakdown
    assert len(rows) == 5
    assert [r.status for r in rows] == ["success"] * 3 + ["skipped"] * 2
    assert {r.error_code for r in rows[3:]} == {"bucket_limit"}
    assert res.truncated  # two conversations were not read
    assert len(res.source_conversation_ids) == 3
    assert all(r.phase == "done" and r.elapsed_ms >= 0 for r in rows[:3])
    assert len(set(re.findall(r"team-\d", res.answer))) == 3 and "Partial coverage" in res.answer
    out = res.to_dict()["conversation_breakdown"][0]
    assert set(out) >= {"conversation_id", "status", "summary_ids", "phase", "elapsed_ms", "error_code", "tokens"}


def test_one_shared_token_cap(many: LcmStore) -> None:
    res = many.expand_query("who rotates the staging password?", query="staging password", session_key=KEYS,
                            token_cap=60)
    assert res.total_source_tokens <= 60
    assert sum(r.tokens for r in res.conversation_breakdown) <= 60


def test_a_slow_bucket_times_out_and_the_others_still_answer(many: LcmStore) -> None:
    slow_conv = many.conversation(KEYS[1]).id  # type: ignore[union-attr]

    def answer(system: str, user: str) -> str:
        conv = int(re.search(r"Conversation: (\d+)", user).group(1))  # type: ignore[union-attr]
        if conv == slow_conv:
            time.sleep(2)
            return json.dumps({"answer": "made up [msg_999]", "citedIds": ["msg_999"]})
        cite = re.search(r"\[(msg_\d+) user", user).group(1)  # type: ignore[union-attr]
        return json.dumps({"answer": f"team of conversation {conv} [{cite}]", "citedIds": [cite]})

    many.recall.llm = ScriptedLLM(default=answer)
    began = time.monotonic()
    res = many.expand_query("who rotates the staging password?", query="staging password", session_key=KEYS,
                            timeout_ms=800)
    took = time.monotonic() - began
    assert took < 0.8 + 0.5  # the shared deadline, not the slow bucket's 2 s
    by_conv = {r.conversation_id: r for r in res.conversation_breakdown}
    late = by_conv[slow_conv]
    assert (late.status, late.error_code, late.phase) == ("failed", "timeout", "answer")
    assert 700 <= late.elapsed_ms <= 1300 and late.cited_ids == []
    assert [r.status for r in res.conversation_breakdown].count("success") == 2
    assert res.truncated and res.method == "llm"
    assert slow_conv not in res.source_conversation_ids and "msg_999" not in res.cited_ids
    assert "made up" not in res.answer and f"{slow_conv} (failed: timeout)" in res.answer


def test_every_bucket_late_is_a_timeout_that_keeps_the_breakdown(many: LcmStore) -> None:
    many.recall.llm = ScriptedLLM(default=lambda s, u: time.sleep(1) or "too late")
    with pytest.raises(ExpansionTimeoutError) as info:
        many.expand_query("who rotates it?", query="staging password", session_key=KEYS[:2], timeout_ms=300)
    res = info.value.result
    assert res is not None and res.error_code == "timeout" and res.error
    assert (res.total_source_tokens, res.expanded_summary_count, res.cited_ids) == (0, 0, [])
    assert [(r.status, r.error_code) for r in res.conversation_breakdown] == [("failed", "timeout")] * 2
    assert many.status().last_failure.kind == "expansion"  # type: ignore[union-attr]


def test_a_failing_model_keeps_its_readable_error(many: LcmStore) -> None:
    many.recall.llm = ScriptedLLM(default=RuntimeError("rate limited by the provider"))
    with pytest.raises(ExpansionFailedError) as info:
        many.expand_query("who?", query="staging password", session_key=KEYS[0])
    assert info.value.code == "expansion_failed"
    (row,) = info.value.result.conversation_breakdown  # type: ignore[union-attr]
    assert row.error_code == "expansion_failed" and "rate limited" in (row.error or "")


def test_the_sub_agent_calls_tools_scoped_to_its_conversation(many: LcmStore) -> None:
    mine = many.conversation(KEYS[0]).id  # type: ignore[union-attr]
    foreign = str(many.db.scalar("SELECT summary_id FROM summaries WHERE conversation_id != ? LIMIT 1", (mine,)))
    replies = [json.dumps({"tool": "lcm_grep", "arguments": {"pattern": "password"}}),
               json.dumps({"tool": "lcm_describe", "arguments": {"id": foreign}}),
               json.dumps({"tool": "lcm_describe", "arguments": {"id": "msg_1"}}),
               "```json\n" + json.dumps({"answer": "team-0 rotates it [msg_1]", "citedIds": ["msg_1", "msg_77"]})
               + "\n```"]
    llm = ScriptedLLM(replies)
    many.recall.llm = llm
    res = many.expand_query("who rotates it?", query="staging password", session_key=KEYS[0])
    assert res.answer == "team-0 rotates it [msg_1]" and res.cited_ids == ["msg_1"]  # msg_77 was never shown
    assert res.conversation_breakdown[0].summary_ids  # it started from the summary the query found
    transcript = llm.calls[-1][1]
    assert '"id": "msg_1"' in transcript and "Result: error (not_found)" in transcript  # the other conversation
    assert "team-0" in transcript and len(llm.calls) == 4


def test_a_small_answer_cap_says_truncated_not_nothing_matches(many: LcmStore) -> None:
    # Before: every passage was longer than 40 tokens, so the answer said nothing matches
    # with truncated false.
    res = many.expand_query("who rotates the staging password?", query="staging password", session_key=KEYS[0],
                            max_tokens=8)
    assert res.truncated and res.cited_ids and "No stored source passage" not in res.answer
