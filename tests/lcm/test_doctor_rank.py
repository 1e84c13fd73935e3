"""doctor ranks the worst conversations by a severity score a reader can redo from its reasons."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from lcm import LcmStore
from lcm.errors import LcmValidationError
from lcm.health import score

from .conftest import ScriptedLLM, chat


def test_score_is_the_sum_of_its_parts() -> None:
    findings = Counter({("error", "broken_summaries"): 1, ("warning", "fallback_summaries"): 2})
    points, reasons = score(findings, failures=12, debt="failed", context_tokens=45000, active=True)
    # 20 + 2*5 + 3*10 (failures capped at 10) + 15 + 45000 // 20000
    assert points == 20 + 10 + 30 + 15 + 2
    assert reasons == ["12 recorded failure(s)", "1 error finding(s): broken_summaries",
                       "compaction debt failed", "2 warning finding(s): fallback_summaries",
                       "45000 context tokens"]
    assert score(Counter(), 0, None, 45000, active=False) == (0, [])  # archived context is never read
    assert score(Counter(), 0, None, 0, active=True) == (0, [])


def test_doctor_lists_the_worst_conversations_first(make_store: Callable[..., LcmStore]) -> None:
    down = [True]  # the model is down while the first conversation is compacted

    def reply(system: str, user: str) -> str:
        if down[0]:
            raise RuntimeError("model down")
        return "Deploys and fixes were discussed."

    store = make_store(llm=ScriptedLLM(default=reply), fresh_tail_count=4, circuit_breaker_threshold=100)
    store.ingest("agent:a:healthy", chat(6))
    store.ingest("agent:a:degraded", chat(30))
    degraded = store.compact("agent:a:degraded", force=True)
    assert degraded.fallback_summaries
    down[0] = False
    store.ingest("agent:a:broken", chat(30))
    broken = store.compact("agent:a:broken", force=True)
    assert broken.leaf_summaries and not broken.fallback_summaries
    store.db.conn.execute("DELETE FROM summary_messages WHERE summary_id = ?", (broken.leaf_summaries[0],))
    store.ingest("agent:a:indebted", chat(60))
    assert store.assemble("agent:a:indebted", 1000).debt_recorded

    report = store.doctor()
    assert not report.ok
    ranked = [(h.session_key, h.score) for h in report.worst_conversations]
    assert [k for k, _ in ranked] == ["agent:a:broken", "agent:a:degraded", "agent:a:indebted"]
    worst = report.worst_conversations[0]
    assert worst.errors >= 1 and any("broken_summaries" in r for r in worst.reasons)
    fallback = len(degraded.fallback_summaries)
    assert report.worst_conversations[1].score == 5 * fallback + 3 * fallback  # warnings + recorded failures
    assert report.worst_conversations[2].debt == "pending" and report.worst_conversations[2].score == 5
    assert [h.session_key for h in store.doctor(top=1).worst_conversations] == ["agent:a:broken"]
    assert store.doctor(top=0).worst_conversations == []
    assert report.to_dict()["worst_conversations"][0]["session_key"] == "agent:a:broken"
    with pytest.raises(LcmValidationError) as bad:
        store.doctor(top=-1)
    assert bad.value.field == "top"
