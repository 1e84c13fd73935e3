"""Session lifecycle: ``/reset``, ``/new``, stateless sessions, the per-session spend guard,
and the threshold rule named in the log for every compaction decision."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmStore
from lcm.errors import LcmValidationError

from .conftest import ScriptedLLM, chat

KEY = "agent:main:life"


def test_new_empties_the_context_and_keeps_the_conversation(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    first = store.ingest(KEY, chat(6)).conversation_id
    assert store.assemble(KEY, 100000).items
    out = store.new_context(KEY)
    assert out.conversation_id == first and out.pruned_items == 6 and out.pruned_tokens > 0
    assert store.assemble(KEY, 100000).items == []  # the next turn starts fresh
    assert store.conversation(KEY).id == first  # type: ignore[union-attr]  # same row, still active
    assert store.grep("module_4", mode="regex", session_key=KEY).hits  # history still recallable
    nxt = store.ingest(KEY, chat(2, start=50))
    assert nxt.conversation_id == first and len(store.assemble(KEY, 100000).items) == 2
    assert store.new_context("agent:main:nobody").conversation_id is None


def test_reset_archives_and_opens_a_fresh_row_for_the_same_key(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    first = store.ingest(KEY, chat(4)).conversation_id
    res = store.reset(KEY)
    assert res.archived_conversation_id == first and res.conversation_id != first
    assert store.conversation(KEY).id == res.conversation_id  # type: ignore[union-attr]
    assert store.grep("module_2", mode="regex", session_key=KEY).hits  # the family still reads it


def test_stateless_sessions_read_but_never_write_whatever_skip_says(make_store: Callable[..., LcmStore]) -> None:
    for skip in (True, False):
        store = make_store(stateless_session_patterns=("agent:*:cron:*",), skip_stateless_sessions=skip)
        res = store.ingest("agent:main:cron:nightly", chat(4))
        # before: with skipStatelessSessions false the messages were stored
        assert res.stateless and res.stored == 0, skip
        assert store.db.scalar("SELECT count(*) FROM messages") == 0
        for write in (store.reset, store.new_context):
            with pytest.raises(LcmValidationError, match="reads but never writes"):
                write("agent:main:cron:nightly")
        store.ingest(KEY, chat(4))
        assert store.grep("module", mode="regex", session_key=[KEY, "agent:main:cron:nightly"]).hits


def test_the_spend_guard_counts_per_session(make_store: Callable[..., LcmStore]) -> None:
    llm = ScriptedLLM(default="A short summary of the work.")
    store = make_store(llm=llm, fresh_tail_count=4, summary_max_calls_per_window=1, leaf_min_fanout=4,
                       leaf_chunk_tokens=80)
    busy, quiet = "agent:main:busy", "agent:main:quiet"
    store.ingest(busy, chat(30))
    store.ingest(quiet, chat(30, prefix="q"))
    first = store.compact(busy, force=True)
    assert first.leaf_summaries and first.fallback_summaries  # its second call was over its own cap
    other = store.compact(quiet, force=True)
    # before: the busy session had spent the store's one call, so this one fell back at once
    made = store.db.query("SELECT model FROM summaries WHERE conversation_id = ? ORDER BY pk",
                          (other.conversation_id,))
    assert made[0]["model"] != "extractive-fallback"


def test_every_compaction_decision_names_its_rule(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    log = tmp_path / "lcm-log.jsonl"
    store = make_store(log_file=str(log), fresh_tail_count=4)
    store.ingest(KEY, chat(20))
    store.assemble(KEY, 100000)  # far below the threshold
    store.assemble(KEY, 100)  # over it: compacted (or debt)
    decisions = [json.loads(line) for line in log.read_text().splitlines()
                 if json.loads(line)["event"] == "compaction_decision"]
    assert [d["decision"] for d in decisions][0] == "below-threshold"
    assert decisions[1]["decision"] in ("compacted", "debt-recorded")
    assert all(d["rule"] == "contextThreshold" and d["threshold_tokens"] == int(0.75 * d["budget"])
               for d in decisions)


def test_status_shows_enabled_engine_coverage_and_the_ratio_as_1_to_n(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=4, leaf_chunk_tokens=80, leaf_min_fanout=4)
    store.ingest(KEY, chat(30))
    before = store.status()
    engine = "postgresql" if type(store).__name__ == "PgLcmStore" else "sqlite"
    assert (before.enabled, before.engine, before.summarized_source_tokens, before.summarized_coverage) == \
        (True, engine, 0, 0.0)
    assert before.compression == "1:1.0"
    store.compact(KEY, force=True)
    after = store.status()
    covered = store.db.scalar("SELECT sum(token_count) FROM messages WHERE id IN (SELECT message_id FROM summary_messages)")
    assert after.summarized_source_tokens == covered and 0 < after.summarized_coverage < 1
    assert after.summarized_coverage == round(int(covered) / int(after.message_tokens), 4)
    assert after.compression == f"1:{after.compression_ratio:.1f}"
    assert make_store(enabled=False).status().enabled is False


def test_a_debt_row_keeps_the_hosts_provider_model_and_cache_telemetry(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=4)
    store.ingest(KEY, chat(30))
    ctx = store.assemble(KEY, 400, model="claude-x", provider="anthropic", cache_read_tokens=1200,
                         cache_write_tokens=0)
    assert ctx.debt_recorded
    row = store.db.one("SELECT model, provider, cache_read_tokens, cache_write_tokens FROM compaction_debt")
    assert tuple(row) == ("claude-x", "anthropic", 1200, 0)
    with pytest.raises(LcmValidationError) as bad:
        store.assemble(KEY, 400, cache_read_tokens=-1)
    assert bad.value.field == "cache_read_tokens"
