"""Assembly: budget filling, tagged summaries, a stable prefix, prompt-aware eviction, debt and maintenance."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lcm import LcmStore
from lcm.errors import LcmValidationError

from .conftest import chat

KEY = "agent:main:a"


def ids(ctx: object) -> list[str]:
    return [it.id for it in ctx.items]  # type: ignore[attr-defined]


def test_summaries_then_tail_within_budget(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=10)
    store.ingest(KEY, chat(60))
    store.compact(KEY, force=True)
    ctx = store.assemble(KEY, 100000)
    assert ctx.items[0].type == "summary" and ctx.items[0].content.startswith("<summary id=\"sum_")
    assert 'kind="leaf" depth="0" earliest="2025-01-01 00:00"' in ctx.items[0].content
    assert [it.type for it in ctx.items[-10:]] == ["message"] * 10 and ctx.tail_count == 10
    assert ctx.total_tokens == sum(it.token_count for it in ctx.items) <= 100000
    assert ctx.messages[-1] == {"role": "assistant", "content": ctx.items[-1].content}
    assert ctx.to_dict()["messages"][0]["role"] == "user"


def test_budget_evicts_oldest_first_and_keeps_newest(store: LcmStore) -> None:
    store.ingest(KEY, chat(100))
    small = store.assemble(KEY, 200)
    assert small.dropped_count > 0 and small.total_tokens <= 200 and small.warnings
    assert small.items[-1].content.startswith("msg 99")
    assert not small.over_budget and not any("over budget" in w for w in small.warnings)
    tiny = store.assemble(KEY, 1)
    assert len(tiny.items) == 1  # the newest message even over budget
    # ... and the result says so: a host that trusts the budget would overflow its window
    assert tiny.over_budget and tiny.total_tokens > tiny.token_budget == 1
    said = [w for w in tiny.warnings if w.startswith("over budget")]
    assert len(said) == 1 and f"holds {tiny.items[0].token_count} tokens" in said[0]
    assert tiny.to_dict()["over_budget"] is True


def test_prefix_is_stable_between_turns(store: LcmStore) -> None:
    store.ingest(KEY, chat(40))
    store.compact(KEY, force=True)
    first = store.assemble(KEY, 50000)
    store.ingest(KEY, chat(2, start=40))
    second = store.assemble(KEY, 50000)
    assert ids(second)[: len(ids(first))] == ids(first)
    assert [it.content for it in second.items[: len(first.items)]] == [it.content for it in first.items]
    assert first.prefix_hash == second.prefix_hash
    store.ingest(KEY, chat(100, start=42))
    store.compact(KEY, force=True)
    assert store.assemble(KEY, 50000).prefix_hash != first.prefix_hash  # compaction rewrote the prefix


def test_prompt_aware_eviction_keeps_relevant_old_items(make_store: Callable[..., LcmStore]) -> None:
    msgs = [{"role": "user", "content": "the kubernetes ingress certificate expired on the staging cluster"}]
    msgs += chat(60)
    # leafMinFanout above the message count: nothing can compact, so eviction alone decides.
    plain = make_store(fresh_tail_count=4, leaf_min_fanout=1000)
    aware = make_store(fresh_tail_count=4, leaf_min_fanout=1000, prompt_aware_eviction=True)
    for s in (plain, aware):
        s.ingest(KEY, msgs)
    budget = 300
    assert not any("kubernetes" in it.content for it in plain.assemble(KEY, budget, prompt="kubernetes certificate").items)
    kept = aware.assemble(KEY, budget, prompt="kubernetes certificate")
    assert any("kubernetes" in it.content for it in kept.items)
    assert ids(kept) == sorted(ids(kept), key=lambda i: int(i[4:]))  # still chronological


def test_threshold_debt_is_paid_by_maintenance(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=8)
    store.ingest(KEY, chat(100))
    tokens = store.assemble(KEY, 100000).total_tokens
    ctx = store.assemble(KEY, int(tokens * 1.2))  # over 0.75 of the budget, still fits
    assert ctx.debt_recorded and not ctx.compacted and store.status().pending_debt == 1
    result = store.maintenance()
    assert len(result.compactions) == 1 and result.compactions[0].ran and not result.failures
    assert store.status().pending_debt == 0
    assert result.retention is not None and result.retention.deleted_conversations == []


def test_over_budget_compacts_synchronously(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=8)
    store.ingest(KEY, chat(400))
    ctx = store.assemble(KEY, 2000)
    assert ctx.compacted and ctx.dropped_count == 0 and ctx.total_tokens <= 2000
    assert ctx.summary_count >= 1


def test_inline_mode_compacts_at_threshold(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=8, proactive_threshold_compaction_mode="inline")
    store.ingest(KEY, chat(100))
    tokens = store.assemble(KEY, 100000).total_tokens
    ctx = store.assemble(KEY, int(tokens * 1.2))
    assert ctx.compacted and not ctx.debt_recorded


def test_unknown_session_assembles_empty(store: LcmStore) -> None:
    ctx = store.assemble("agent:none", 1000)
    assert ctx.items == [] and ctx.conversation_id is None
    # said, not only empty: a mistyped key read as a fresh session
    assert ctx.warnings == ["no active conversation for session key 'agent:none': nothing to assemble"]


@pytest.mark.parametrize("key", ["", "   ", "agent:main:a "])
def test_a_blank_or_padded_session_key_is_refused(store: LcmStore, key: str) -> None:
    # it opened a conversation nobody asks for again, unsaid
    with pytest.raises(LcmValidationError) as err:
        store.ingest(key, [{"role": "user", "content": "hello"}])
    assert err.value.field == "session_key"
    with pytest.raises(LcmValidationError):
        store.assemble(key, 1000)
    assert int(store.db.scalar("SELECT count(*) FROM conversations")) == 0
