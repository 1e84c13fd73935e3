"""Deferred compaction debt is paid after a turn (``LcmStore.after_turn``), not only nightly."""

from __future__ import annotations

from collections.abc import Callable

from lcm import LcmStore

from .conftest import ScriptedLLM, chat

KEY = "agent:main:chat"


def indebted(make_store: Callable[..., LcmStore], **overrides: object) -> tuple[LcmStore, int]:
    store = make_store(fresh_tail_count=8, **overrides)
    store.ingest(KEY, chat(100))
    tokens = store.assemble(KEY, 100000).total_tokens
    assert store.assemble(KEY, int(tokens * 1.2)).debt_recorded  # over 0.75 of the budget, still fits
    assert store.status().pending_debt == 1
    return store, tokens


def test_the_debt_drops_after_a_turn(make_store: Callable[..., LcmStore]) -> None:
    store, tokens = indebted(make_store)
    store.ingest(KEY, chat(2, start=100))  # the next turn
    res = store.after_turn(KEY)
    assert res is not None and res.ran and res.leaf_summaries and res.tokens_after < res.tokens_before
    assert store.status().pending_debt == 0
    assert store.assemble(KEY, 100000).total_tokens < tokens
    assert store.after_turn(KEY) is None  # nothing owed any more: nothing runs


def test_a_turn_without_debt_compacts_nothing(store: LcmStore) -> None:
    store.ingest(KEY, chat(100))
    assert store.after_turn(KEY) is None and store.after_turn("agent:main:other") is None
    assert store.db.scalar("SELECT count(*) FROM summaries") == 0


def test_a_broken_summarizer_still_pays_the_debt_visibly(make_store: Callable[..., LcmStore]) -> None:
    llm = ScriptedLLM(default=RuntimeError("the summarizer is down"))
    store, _ = indebted(make_store, llm=llm)
    res = store.after_turn(KEY)
    assert res is not None and res.ran and llm.calls
    assert res.fallback_summaries == res.leaf_summaries + res.condensed_summaries  # extractive, and said so
    assert store.status().pending_debt == 0
