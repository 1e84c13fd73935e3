"""status: the version, the last failure (kept across a restart), the debt owed, ignored keys."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import pytest

from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore, ManualClock, load_config
from lcm.failures import KEEP, record_failure
from lcm.recall import ExpansionFailedError
from lcm.timeutil import iso

from .conftest import ScriptedLLM, chat

KEY = "agent:main:status"


def test_status_names_the_version(store: LcmStore) -> None:
    assert store.status().version == version("amem")
    assert store.status().to_dict()["version"] == version("amem")


def test_the_last_failure_is_kept_across_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "lcm.db"
    cfg = LcmConfig(fresh_tail_count=4, log_file_enabled=False)
    dead = ScriptedLLM(default=ConnectionError("connection refused by 10.0.0.9:8080"))
    with LcmStore(path, cfg, llm=dead, clock=clock) as store:
        assert store.status().last_failure is None
        store.ingest(KEY, chat(40))
        clock.advance(60)
        res = store.compact(KEY, force=True)
        assert res.fallback_summaries
    with LcmStore(path, cfg, clock=clock) as store:  # a new process, no LLM: the record stays
        failure = store.status().last_failure
        assert failure is not None and failure.kind == "summary"
        assert failure.at == iso(clock.now()) and failure.conversation_id == 1
        assert "connection refused by 10.0.0.9:8080" in failure.reason
        assert failure.reason.startswith(f"summary {res.fallback_summaries[-1]} fell back")
        assert store.status().to_dict()["last_failure"]["kind"] == "summary"


def test_a_failed_expansion_is_the_newest_failure(make_store: Callable[..., LcmStore], clock: ManualClock) -> None:
    store = make_store(llm=ScriptedLLM(["Deploys and fixes.", RuntimeError("model overloaded")]),
                       fresh_tail_count=4)
    store.ingest(KEY, chat(40))
    store.compact(KEY, force=True)
    assert store.status().last_failure is None  # the summary worked
    clock.advance(5)
    with pytest.raises(ExpansionFailedError):
        # (a query that finds something: with nothing found no model is asked at all)
        store.expand_query("what was fixed in module 3?", query="pytest", session_key=KEY)
    failure = store.status().last_failure
    assert failure is not None and failure.kind == "expansion" and "expansion_failed" in failure.reason
    assert failure.at == iso(clock.now())


def test_compaction_that_cannot_reach_its_target_is_a_failure(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=64)  # everything is in the fresh tail: nothing can go
    store.ingest(KEY, chat(20))
    res = store.compact_until_under(KEY, 10)
    assert res.tokens_after > 10
    failure = store.status().last_failure
    assert failure is not None and failure.kind == "compaction" and "over the target of 10" in failure.reason


def test_the_record_keeps_the_newest_rows_and_bounds_a_reason(store: LcmStore) -> None:
    for i in range(KEEP + 7):
        record_failure(store.db, f"2025-01-01T00:00:{i % 60:02d}Z", "embedding", f"run {i} " + "x" * 2000)
    assert store.db.scalar("SELECT count(*) FROM lcm_failures") == KEEP
    last = store.status().last_failure
    assert last is not None and last.reason.startswith(f"run {KEEP + 6} ") and len(last.reason) == 500
    record_failure(store.db, "2025-01-02T00:00:00Z", "embedding", f"run {KEEP + 6} " + "x" * 2000)  # the same again
    assert store.db.scalar("SELECT count(*) FROM lcm_failures") == KEEP
    assert store.status().last_failure.at == "2025-01-02T00:00:00Z"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="kind"):
        record_failure(store.db, "2025-01-01T00:00:00Z", "nonsense", "x")


def test_debt_counts_deferred_compaction_and_embedding(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=4)
    store.ingest(KEY, chat(60))
    assert store.status().debt.compaction_pending == 0  # type: ignore[union-attr]
    assert store.assemble(KEY, 1000).debt_recorded  # over the threshold, deferred mode
    debt = store.status().debt
    assert debt is not None and (debt.compaction_pending, debt.compaction_running, debt.compaction_failed) == (1, 0, 0)
    assert debt.embedding is None  # no embedder was ever configured for this store
    store.maintenance()
    assert store.status().debt.compaction_pending == 0  # type: ignore[union-attr]
    with LcmStore(":memory:", LcmConfig(), clock=ManualClock(), embedder=HashingEmbedder()) as semantic:
        semantic.ingest(KEY, chat(6))
        assert semantic.status().debt.embedding == 6  # type: ignore[union-attr]
        semantic.embed_pending()
        assert semantic.status().debt.embedding == 0  # type: ignore[union-attr]


def test_status_lists_the_ignored_lossless_claw_keys() -> None:
    cfg = load_config(env={"LCM_ENABLE_SUMMARY_THINKING": "true", "LCM_CRITICAL_BUDGET_PRESSURE_RATIO": "0.9"},
                      overrides={"transcriptGcEnabled": True})
    with LcmStore(":memory:", cfg, clock=ManualClock()) as store:
        assert store.status().ignored_keys == ["LCM_CRITICAL_BUDGET_PRESSURE_RATIO", "LCM_ENABLE_SUMMARY_THINKING",
                                               "transcriptGcEnabled"]


def test_retention_deletes_the_failures_of_the_conversations_it_deletes(
    make_store: Callable[..., LcmStore], clock: ManualClock
) -> None:
    store = make_store(retention_archived_max_age_days=1)
    old = store.ingest("agent:a", chat(4)).conversation_id
    store.reset("agent:a")
    record_failure(store.db, iso(clock.now()), "compaction", "quoted text of the old conversation", old)
    record_failure(store.db, iso(clock.now()), "embedding", "a run of the whole store")
    clock.advance(3 * 86400)
    assert store.apply_retention().deleted_conversations == [old]
    assert [r[0] for r in store.db.query("SELECT kind FROM lcm_failures")] == ["embedding"]
