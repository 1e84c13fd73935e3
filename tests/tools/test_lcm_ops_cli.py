"""Through the real ``amem`` script: status names the version, the last failure and the debt;
doctor ranks the worst conversations (``--top``)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from lcm.largefiles import LEFTOVER_AGE_S

from ..permissions import unwritable
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
    # a large-file write killed at its rename, long ago: named, then deleted on --apply alone
    left = tmp_path / "home" / "lcm-files" / "c1" / "file_00000000000000aa.txt.tmp"
    left.parent.mkdir(parents=True)
    left.write_text("half")
    os.utime(left, (time.time() - LEFTOVER_AGE_S - 60,) * 2)
    assert amem_json(env, "lcm", "doctor", "--clean")["leftover_files"] == ["c1/" + left.name]
    assert "--clean" in amem(env, "lcm", "doctor", "--apply", code=2).stderr and left.exists()
    assert amem_json(env, "lcm", "doctor", "--clean", "--apply")["removed_files"] == ["c1/" + left.name]
    assert not left.exists()


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
    (said,) = [w for w in report["warnings"] if "could not be opened" in w]
    # the file, what is wrong and what to do, each once (the advice was given twice, with a
    # pointer to `amem doctor` inside doctor's own report)
    assert str(db) in said and "malformed" in said
    assert said.count("restore") == 1 and "amem doctor" not in said, said


def test_amem_doctor_gives_a_store_this_user_may_not_write_its_own_advice(tmp_path: Path) -> None:
    """A conversation store this user may not write is not damaged: doctor called its four
    full-text indexes out of sync, and an ingest failed as "unexpected OperationalError"."""
    env = env_for(tmp_path / "home")
    src = write(tmp_path / "t.jsonl", turns(0, 4))
    amem(env, "lcm", "ingest", str(src), "--session-key", KEY)
    write(tmp_path / "t.jsonl", turns(0, 6))
    with unwritable(tmp_path / "home" / "lcm.db"):
        report = amem_json(env, "doctor", code=1)
        refused = amem(env, "lcm", "ingest", str(src), "--session-key", KEY, code=1)
    lcm = report["lcm"]
    assert lcm["checks"]["fts_out_of_sync"] == 0, lcm
    (issue,) = [i for i in lcm["issues"] if i["check"] == "not_writable"]
    assert "permissions" in issue["detail"] and "backup" not in issue["detail"], issue
    assert "cannot be written" in refused.stderr and "unexpected" not in refused.stderr, refused.stderr


def test_amem_doctor_names_a_conversation_store_a_newer_amem_migrated(tmp_path: Path) -> None:
    # Older code opened it silently; refused now, the advice must not be to restore a backup
    # or move the intact store aside (what a damaged file is told).
    env = env_for(tmp_path / "home")
    amem(env, "lcm", "ingest", str(write(tmp_path / "t.jsonl", turns(0, 4))), "--session-key", KEY)
    with sqlite3.connect(tmp_path / "home" / "lcm.db") as db:
        db.execute("INSERT INTO lcm_migrations VALUES ('0099_from_the_future', '2027-01-01')")
    assert "migrated by a newer amem" in amem(env, "lcm", "status", code=1).stderr
    report = amem_json(env, "doctor", code=1)
    assert report["lcm"]["too_new"] is True
    (warning,) = [w for w in report["warnings"] if "could not be opened" in w]
    assert "newer version" in warning and "backup" not in warning


def test_a_read_without_an_embedder_keeps_the_one_a_conversation_only_home_recorded(tmp_path: Path) -> None:
    """A host feeding `amem lcm ingest` with one embedder, then `amem lcm status` without one:
    each such read recorded the default embedder instead (and back), and said every message
    was owed a re-embed. It now opens the store with the embedder it records."""
    env = env_for(tmp_path / "home")
    amem(env, "lcm", "ingest", str(write(tmp_path / "t.jsonl", turns(0, 6))), "--session-key", KEY)
    amem(env, "lcm", "embed")
    plain = {k: v for k, v in env.items() if k != "AMEM_EMBEDDER"}
    for _ in range(2):
        done = amem(plain, "lcm", "status", "--json")
        report = json.loads(done.stdout)["embedding"]
        assert (report["model_id"], report["debt"], report["previous_model_id"]) == ("hashing-v1-d64", 0, None)
        assert "embedder changed" not in done.stderr


def test_a_damaged_or_unwritable_conversation_store_is_named_with_what_to_do(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    amem(env, "lcm", "ingest", str(write(tmp_path / "t.jsonl", turns(0, 6))), "--session-key", KEY)
    db = tmp_path / "home" / "lcm.db"
    with db.open("r+b") as f:
        f.truncate(3000)
    for command in (("lcm", "status"), ("lcm", "grep", "hello")):
        done = amem(env, *command, code=1)
        assert f"conversation store {db}" in done.stderr and "restore it from a backup" in done.stderr
        assert "unexpected" not in done.stderr


def test_a_read_only_store_file_is_said_to_be_one(tmp_path: Path) -> None:
    import sqlite3
    from contextlib import closing

    from lcm.errors import unopenable

    db = tmp_path / "lcm.db"
    with closing(sqlite3.connect(db)) as setup:
        setup.execute("CREATE TABLE t (x)")
    # a real refusal, whoever runs the test (root writes any file it may open read-write)
    with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as ro:
        with pytest.raises(sqlite3.OperationalError) as refused:
            ro.execute("INSERT INTO t VALUES (1)")
    message = str(unopenable(str(db), refused.value))
    assert "cannot be opened for writing" in message and str(db) in message
    assert "restore" not in message  # nothing is damaged


def test_an_embedder_given_for_one_command_never_re_embeds_the_conversations(tmp_path: Path) -> None:
    """`amem lcm embed` with one embedder, then with `--embedder` naming another for one
    command: it re-embedded every message with that one (and back again at the next command).
    The store now keeps its embedder, says so, and moves only when asked."""
    env = env_for(tmp_path / "home")
    amem(env, "lcm", "ingest", str(write(tmp_path / "t.jsonl", turns(0, 6))), "--session-key", KEY)
    amem(env, "lcm", "embed")
    refused = amem(env, "--embedder", "hashing-32", "lcm", "embed", "--json", code=1)
    assert "embedder_mismatch" in refused.stderr or "made by 'hashing-v1-d64'" in refused.stderr
    status = json.loads(amem(env, "--embedder", "hashing-32", "lcm", "status", "--json").stdout)["embedding"]
    assert (status["model_id"], status["given_model_id"], status["debt"]) == ("hashing-v1-d64", "hashing-v1-d32", 0)
    again = json.loads(amem(env, "lcm", "embed", "--json").stdout)
    assert again["embedded_messages"] == 0 and again["model_id"] == "hashing-v1-d64"
    switched = json.loads(amem(env, "--embedder", "hashing-32", "lcm", "embed", "--switch-embedder",
                               "--json").stdout)
    assert (switched["model_id"], switched["embedded_messages"], switched["pending"]) == ("hashing-v1-d32", 6, 0)
