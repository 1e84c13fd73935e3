"""Through the real ``amem`` script: status names the version, the last failure and the debt;
doctor ranks the worst conversations (``--top``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_lcm_host import KEY, amem, amem_json, env_for, turns, write

pytestmark = pytest.mark.slow


def test_status_and_doctor_report_version_debt_and_the_worst_conversations(tmp_path: Path) -> None:
    # A configuration written for lossless-claw: its keys and variables load (exit 0, not 2).
    toml = tmp_path / "amem.toml"
    toml.write_text("[lcm]\ntranscriptGcEnabled = true\nautoRotateSessionFiles = true\n", encoding="utf-8")
    env = env_for(tmp_path / "home", AMEM_CONFIG=str(toml), LCM_FRESH_TAIL_COUNT="4",
                  LCM_ENABLE_SUMMARY_THINKING="true", LCM_STUB_LARGE_TOOL_PAYLOADS="true",
                  LCM_CRITICAL_BUDGET_PRESSURE_RATIO="0.9", LCM_INCREMENTAL_MAX_DEPTH="2")
    assert "--session-key" in amem(env, "serve", "--help").stdout
    version = amem(env, "--version").stdout.split()[-1]
    amem(env, "lcm", "ingest", str(write(tmp_path / "t.jsonl", turns(0, 60))), "--session-key", KEY)
    amem(env, "lcm", "ingest", str(write(tmp_path / "u.jsonl", turns(0, 4))), "--session-key", "agent:host:small")
    tokens = int(amem_json(env, "lcm", "status")["context_tokens"])
    # Between contextThreshold (0.75) and the budget: deferred compaction debt, nothing compacted yet.
    assembled = amem_json(env, "lcm", "assemble", "--session-key", KEY, "--budget", str(int(tokens / 0.8)))
    assert assembled["debt_recorded"] is True

    lcm = amem_json(env, "lcm", "status")
    assert lcm["version"] == version and lcm["last_failure"] is None
    assert lcm["debt"] == {"compaction_pending": 1, "compaction_running": 0, "compaction_failed": 0,
                           "embedding": 64, "trigram": 64}  # ingest left 64 to embed and to trigram-index
    assert lcm["ignored_keys"] == ["LCM_CRITICAL_BUDGET_PRESSURE_RATIO", "LCM_ENABLE_SUMMARY_THINKING",
                                   "LCM_STUB_LARGE_TOOL_PAYLOADS", "autoRotateSessionFiles", "transcriptGcEnabled"]
    whole = amem_json(env, "status")
    assert whole["version"] == version and whole["lcm"]["debt"]["compaction_pending"] == 1

    report = amem_json(env, "lcm", "doctor", "--top", "5")
    assert report["ok"] is True  # debt is not damage
    assert [(h["session_key"], h["score"], h["debt"]) for h in report["worst_conversations"]] == [(KEY, 5, "pending")]
    assert amem_json(env, "doctor")["lcm"]["worst_conversations"][0]["session_key"] == KEY
    done = amem(env, "lcm", "doctor", "--top", "-1", code=2)
    assert "top" in done.stderr


def test_doctor_exits_1_on_damage_as_amem_doctor_does(tmp_path: Path) -> None:
    # `amem lcm doctor || alert` must fire: it exited 0 beside "ok: False"
    import sqlite3

    env = env_for(tmp_path / "home")
    amem(env, "lcm", "ingest", str(write(tmp_path / "t.jsonl", turns(0, 10))), "--session-key", KEY)
    assert amem_json(env, "lcm", "doctor")["ok"] is True
    with sqlite3.connect(tmp_path / "home" / "lcm.db") as db:  # a context item pointing nowhere
        db.execute("PRAGMA foreign_keys = OFF")
        db.execute("DELETE FROM messages WHERE id = (SELECT max(id) FROM messages)")
    report = amem_json(env, "lcm", "doctor", code=1)
    assert report["ok"] is False and report["checks"]["dangling_context_items"] == 1
    assert "ok: False" in amem(env, "lcm", "doctor", code=1).stdout
    amem(env, "doctor", code=1)  # the whole store's doctor agrees
    assert amem_json(env, "lcm", "doctor", "--clean")["orphan_files"] == []  # a report, exit 0


def test_amem_doctor_fails_on_a_conversation_store_that_will_not_open(tmp_path: Path) -> None:
    # ok: True and exit 0 beside "database disk image is malformed" (exploratory test)
    env = env_for(tmp_path / "home")
    amem(env, "lcm", "ingest", str(write(tmp_path / "t.jsonl", turns(0, 400))), "--session-key", KEY)
    db = tmp_path / "home" / "lcm.db"
    with open(db, "r+b") as f:  # pages 3 and 4: the schema's tables
        f.seek(8192)
        f.write(bytes([0xA5]) * 8192)
    report = amem_json(env, "doctor", code=1)
    assert report["ok"] is False and report["lcm"]["failed"] is True
    assert any("could not be opened" in w for w in report["warnings"])
