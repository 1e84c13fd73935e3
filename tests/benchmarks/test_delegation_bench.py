"""``benchmarks.delegation_bench`` at its smallest, so the delegated-recall benchmark does not rot."""

from __future__ import annotations

from benchmarks.delegation_bench import case


def test_three_conversations_answered_and_a_slow_one_cut_at_the_deadline() -> None:
    fast = case(3, 0, deadline_ms=800, delay=2.0, with_llm=True)
    assert (fast["facts_found"], fast["answered"], fast["truncated"]) == (3, 3, False)
    cut = case(3, 3, deadline_ms=500, delay=2.0, with_llm=True)
    assert (cut["answered"], cut["failed"], cut["failed_codes"], cut["truncated"]) == (2, 1, "timeout", True)
    assert 500 <= cut["elapsed_ms"] < 500 + 600
