"""Compaction: the DAG keeps every message reachable; tail rules; LLM normal -> aggressive -> fallback."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lcm import LcmStore
from lcm.compaction import Item, tail_start
from lcm.extract import FALLBACK_MARKER, FOOTER_PREFIX, TRUNCATED_MARKER

from .conftest import ScriptedLLM, chat

KEY = "agent:main:long"


def reachable_message_ids(store: LcmStore, conv_id: int) -> set[int]:
    """Messages reachable from the context items: directly, or down the DAG from a summary."""
    rows = store.db.query(
        "WITH RECURSIVE down(id) AS ("
        " SELECT summary_id FROM context_items WHERE conversation_id = ? AND item_type = 'summary'"
        " UNION SELECT p.parent_summary_id FROM summary_parents p JOIN down ON p.summary_id = down.id)"
        " SELECT sm.message_id FROM down JOIN summary_messages sm ON sm.summary_id = down.id"
        " UNION SELECT message_id FROM context_items WHERE conversation_id = ? AND item_type = 'message'",
        (conv_id, conv_id),
    )
    return {r[0] for r in rows}


def test_tail_start_rules() -> None:
    def items(roles: str, tokens: int = 10) -> list[Item]:
        return [Item(i, "message", i, None, tokens, {"u": "user", "a": "assistant", "t": "tool"}[r], None)
                for i, r in enumerate(roles)]  # fmt: skip

    assert tail_start(items("uauaua"), 2, None) == 4
    assert tail_start(items("uatttt"), 2, None) == 0  # never split the newest user turn
    assert tail_start(items("uauaua"), 6, 25) == 4  # token cap keeps only two of 10 tokens
    assert tail_start(items("ua"), 2, 5) == 0  # the newest message is kept even over the cap
    assert tail_start([], 3, None) == 0


def test_long_conversation_stays_fully_reachable(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(leaf_chunk_tokens=2000, max_sweep_iterations=200, fresh_tail_count=32,
                       leaf_target_tokens=300, condensed_target_tokens=300)  # fmt: skip
    for start in range(0, 10000, 1000):
        store.ingest(KEY, chat(1000, start=start))
    conv = store.conversation(KEY)
    assert conv is not None
    res = store.compact_until_under(KEY, 6000)
    assert res.ran and res.leaf_summaries and res.condensed_summaries
    assert res.tokens_after <= 6000 < res.tokens_before
    all_ids = {r[0] for r in store.db.query("SELECT id FROM messages WHERE conversation_id = ?", (conv.id,))}
    assert len(all_ids) == 10000
    assert reachable_message_ids(store, conv.id) == all_ids
    depths = store.status().summaries_by_depth
    assert int(max(depths)) >= 2
    assert store.doctor().ok
    # The fresh tail is still raw and in order.
    ctx = store.assemble(KEY, 8000)
    tail = [it for it in ctx.items if it.type == "message"]
    assert len(tail) == 32 and tail[-1].content.startswith("msg 9999")


def test_threshold_gate_and_fanout(store: LcmStore) -> None:
    store.ingest(KEY, chat(100))
    below = store.compact(KEY, token_budget=100000)
    assert not below.ran and below.reason == "below-threshold"
    assert store.compact(KEY).reason == "no-token-budget"
    over = store.compact(KEY, token_budget=1000)
    assert over.ran and over.reason == "threshold" and len(over.leaf_summaries) == 1  # 36 old messages, one chunk
    assert store.compact("agent:nobody", force=True).reason == "no-conversation"


def test_sweep_max_iterations_bounds_a_sweep(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(leaf_chunk_tokens=200, max_sweep_iterations=3, fresh_tail_count=8)
    store.ingest(KEY, chat(400))
    res = store.compact(KEY, force=True)
    assert res.iterations == 3 and res.stopped == "max-iterations"
    assert store.doctor().ok


def test_sweep_deadline_stops_cleanly(make_store: Callable[..., LcmStore], clock: object) -> None:
    import time

    def slow(system: str, user: str) -> str:
        time.sleep(0.06)
        return "Summary: things happened.\nExpand for details about: things"

    store = make_store(llm=ScriptedLLM(default=slow), leaf_chunk_tokens=200, sweep_deadline_ms=100, fresh_tail_count=8)
    store.ingest(KEY, chat(400))
    res = store.compact(KEY, force=True)
    assert res.stopped == "deadline" and 1 <= res.iterations <= 3
    assert store.doctor().ok


def test_llm_normal_summary_is_used(make_store: Callable[..., LcmStore]) -> None:
    llm = ScriptedLLM(default="User asked to check src/module_0.py; fixed bug #0 by running pytest.")
    store = make_store(llm=llm, summary_model="tiny-model", fresh_tail_count=8)
    store.ingest(KEY, chat(40))
    res = store.compact(KEY, force=True)
    sid = res.leaf_summaries[0]
    summary = store.describe(sid).summary  # type: ignore[union-attr]
    assert summary.model == "tiny-model" and summary.status == "ok"
    assert "src/module_0.py" in summary.content and FOOTER_PREFIX in summary.content  # footer added when missing
    assert len(llm.calls) == 1 and "Target length" in llm.calls[0][1]


def test_llm_failure_goes_aggressive_then_fallback(make_store: Callable[..., LcmStore]) -> None:
    # normal raises, aggressive returns usable text
    llm = ScriptedLLM([TimeoutError("slow"), "Bug fixes in src/module_2.py.\nExpand for details about: bugs"])
    store = make_store(llm=llm, fresh_tail_count=8)
    store.ingest(KEY, chat(40))
    sid = store.compact(KEY, force=True).leaf_summaries[0]
    assert store.describe(sid).summary.status == "ok"  # type: ignore[union-attr]
    assert "as briefly as possible" in llm.calls[1][0]
    # both attempts fail (garbage, then an exception) -> deterministic fallback, marked
    llm2 = ScriptedLLM(["   ", ValueError("bad json")])
    store2 = make_store(llm=llm2, fresh_tail_count=8)
    store2.ingest(KEY, chat(40))
    res = store2.compact(KEY, force=True)
    assert res.fallback_summaries == res.leaf_summaries
    s = store2.describe(res.leaf_summaries[0]).summary  # type: ignore[union-attr]
    assert s.status == "fallback" and s.model == "extractive-fallback" and s.content.startswith(FALLBACK_MARKER)
    assert "src/module_0.py" in s.content
    report = store2.doctor()
    assert report.ok and report.checks["fallback_summaries"] == 1  # degraded, not broken


def test_refusals_and_bloated_replies_are_rejected(make_store: Callable[..., LcmStore]) -> None:
    llm = ScriptedLLM(["I'm sorry, I can't help with that.", "word " * 5000])
    store = make_store(llm=llm, fresh_tail_count=8)
    store.ingest(KEY, chat(60))
    res = store.compact(KEY, force=True)
    assert res.fallback_summaries  # refusal, then a "summary" longer than the source


def test_oversized_reply_is_truncated_and_marked(make_store: Callable[..., LcmStore]) -> None:
    long_reply = "\n".join(f"fact {i}: module_{i}.py changed" for i in range(400))
    store = make_store(llm=ScriptedLLM(default=long_reply), leaf_target_tokens=100, fresh_tail_count=8,
                       summary_max_overage_factor=2)  # fmt: skip
    store.ingest(KEY, [{"role": "user", "content": f"long message {i} " + "detail " * 200} for i in range(30)])
    res = store.compact(KEY, force=True)
    assert res.truncated_summaries
    s = store.describe(res.truncated_summaries[0]).summary  # type: ignore[union-attr]
    assert TRUNCATED_MARKER in s.content and s.token_count <= 100 * 2 + 10
    assert store.doctor().checks["truncated_summaries"] == 1


def test_circuit_breaker_skips_the_llm_after_repeated_failures(make_store: Callable[..., LcmStore]) -> None:
    llm = ScriptedLLM(default=RuntimeError("401 unauthorized"))
    store = make_store(llm=llm, circuit_breaker_threshold=2, leaf_chunk_tokens=150, fresh_tail_count=8,
                       max_sweep_iterations=4)  # fmt: skip
    store.ingest(KEY, chat(200))
    res = store.compact(KEY, force=True)
    assert res.iterations == 4 and len(res.fallback_summaries) == 4
    assert len(llm.calls) == 2  # the breaker opened after two failures


def test_injected_context_is_stripped_from_summarizer_input_only(make_store: Callable[..., LcmStore]) -> None:
    llm = ScriptedLLM(default="Short summary of the work.")
    store = make_store(llm=llm, fresh_tail_count=2, leaf_min_fanout=2)
    text = "question about deploys <relevant-memories>SECRET-RECALL-BLOCK</relevant-memories>"
    store.ingest(KEY, [{"role": "user", "content": text}] + chat(10))
    store.compact(KEY, force=True)
    assert "SECRET-RECALL-BLOCK" not in llm.calls[0][1]
    assert store.db.scalar("SELECT content FROM messages WHERE seq = 1") == text


def test_context_threshold_override_by_session_pattern(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(context_threshold_overrides=[
        {"name": "tg", "match": {"sessionPattern": "agent:*:telegram:**"}, "contextThreshold": 0.1, "freshTailCount": 4}
    ])  # fmt: skip
    store.ingest("agent:a:telegram:chat1", chat(40))
    store.ingest("agent:a:web", chat(40))
    assert store.compact("agent:a:telegram:chat1", token_budget=5000).ran
    assert not store.compact("agent:a:web", token_budget=5000).ran


@pytest.mark.parametrize("depth", [0, 1])
def test_sweep_max_depth_limits_routine_condensation(make_store: Callable[..., LcmStore], depth: int) -> None:
    store = make_store(leaf_chunk_tokens=150, fresh_tail_count=8, sweep_max_depth=depth, max_sweep_iterations=50,
                       summary_prefix_target_tokens=100000)  # fmt: skip
    store.ingest(KEY, chat(300))
    res = store.compact(KEY, force=True)
    assert res.leaf_summaries
    assert bool(res.condensed_summaries) is (depth == 1)
