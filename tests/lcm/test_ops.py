"""status, doctor (finds injected damage), doctor clean, retention, the JSON-lines event log, migrations."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lcm import LcmStore, ManualClock
from lcm.migrations import MIGRATIONS

from .conftest import chat

KEY = "agent:main:o"


def test_status_counts(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=8)
    store.ingest(KEY, chat(100))
    store.compact(KEY, force=True)
    st = store.status()
    assert st.messages == 100 and st.summaries == 1 and st.summaries_by_depth == {"0": 1}
    assert st.compression_ratio > 1 and st.context_tokens < st.message_tokens
    assert st.migrations == list(MIGRATIONS) and st.size_bytes > 0
    assert st.to_dict()["active_conversations"] == 1


def test_doctor_finds_each_kind_of_damage(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=8)
    store.ingest(KEY, chat(100))
    sid = store.compact(KEY, force=True).leaf_summaries[0]
    assert store.doctor().ok
    c = store.db.conn
    with store.db.lock:
        c.execute("PRAGMA foreign_keys = OFF")
        c.execute("INSERT INTO summary_parents VALUES ('sum_1111111111111111', 'sum_2222222222222222', 0)")
        c.execute("INSERT INTO context_items(conversation_id, ordinal, item_type, summary_id) VALUES (1, 9999, 'summary', 'sum_3333333333333333')")
        c.execute("DELETE FROM summary_messages WHERE summary_id = ? AND ordinal = 0", (sid,))  # orphaned message
        c.execute("INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', 5, (SELECT content FROM messages WHERE id = 5))")
    report = store.doctor()
    assert not report.ok
    for check in ("orphan_edges", "dangling_context_items", "unreachable_messages", "fts_out_of_sync"):
        assert report.checks[check] >= 1, check
    assert all(i.severity == "error" for i in report.issues)


def test_doctor_finds_a_lost_edge_of_the_summary_dag(make_store: Callable[..., LcmStore]) -> None:
    # One summary_parents row deleted cut 341 messages off what expand reaches from the
    # context, and doctor said ok (exploratory test, 2026-12-05): the recorded counts tell it.
    from .kit_helpers import dag_store

    store, _ = dag_store(make_store)
    assert store.doctor().ok
    with store.db.reading() as c:
        edge = c.execute("SELECT summary_id, parent_summary_id FROM summary_parents ORDER BY summary_id, ordinal "
                         "LIMIT 1").fetchone()
    with store.db.atomic() as c:
        c.execute("DELETE FROM summary_parents WHERE summary_id = ? AND parent_summary_id = ?", (edge[0], edge[1]))
    report = store.doctor()
    assert not report.ok and report.checks["broken_summaries"] >= 1
    found = [i for i in report.issues if i.check == "broken_summaries" and i.id == edge[0]]
    assert len(found) == 1 and "a source edge or row is missing" in found[0].detail


def test_doctor_reports_a_damaged_file_instead_of_failing(tmp_path: Path, clock: ManualClock) -> None:
    # The operator's command for a damaged database must say what it found: the page of one
    # table overwritten, quick_check lists it and the checks that cannot read say so.
    from lcm import LcmConfig

    path = tmp_path / "lcm.db"
    store = LcmStore(path, LcmConfig(fresh_tail_count=8), clock=clock)
    store.ingest(KEY, chat(100))
    store.compact(KEY, force=True)
    assert store.doctor().ok
    page_size = int(store.db.scalar("PRAGMA page_size"))
    root = int(store.db.scalar("SELECT rootpage FROM sqlite_master WHERE name = 'summaries'"))
    store.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    with open(path, "r+b") as f:  # the table's root page: every read of summaries fails
        f.seek((root - 1) * page_size)
        f.write(bytes([0xA5]) * page_size)
    damaged = LcmStore(path, LcmConfig(fresh_tail_count=8), clock=clock)
    try:
        report = damaged.doctor()
    finally:
        damaged.close()
    assert not report.ok and report.worst_conversations == []
    # a root page this broken fails quick_check itself: the finding names it as the first
    # check that could not read (a damaged leaf page is listed by quick_check instead)
    not_run = [i for i in report.issues if i.check == "checks_not_run"]
    assert len(not_run) == 1 and not_run[0].severity == "error"
    assert "the check 'sqlite_quick_check' and those after it could not read the database" in not_run[0].detail
    assert "malformed" in not_run[0].detail


def test_doctor_clean_is_read_only(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_store(str(tmp_path / "lcm.db"))
    store.ingest("agent:main:subagent:abc", chat(4))
    store.reset("agent:main:subagent:abc")
    store.ingest("agent:main:cron:nightly", chat(2), session_id="r1")
    live = store.ingest(None, chat(2), session_id="live").conversation_id  # a host naming it by id alone
    orphan = store.ingest(None, chat(2), session_id="orphan").conversation_id
    with store.db.atomic() as c:  # archived long ago by a host that named it by id alone
        c.execute("UPDATE conversations SET active = 0, archived_at = '2025-01-01T00:00:00Z' WHERE id = ?", (orphan,))
    (tmp_path / "lcm-files" / "c9").mkdir(parents=True)
    (tmp_path / "lcm-files" / "c9" / "file_00000000000000ff.txt").write_text("x")
    before = store.status()
    report = store.doctor_clean()
    assert report.totals["archived_subagent"] == 1 and report.totals["cron"] == 1 and report.totals["null_key"] == 1
    # only the archived one: an active conversation without a session key is live, not an orphan
    assert [r["conversation_id"] for r in report.null_key] == [orphan] and live != orphan
    assert report.orphan_files == ["c9/file_00000000000000ff.txt"]
    assert store.status() == before


def test_retention_by_age_never_touches_active(make_store: Callable[..., LcmStore], clock: ManualClock) -> None:
    store = make_store(retention_archived_max_age_days=30, large_file_threshold_tokens=100)
    old = store.ingest(KEY, [{"role": "tool", "content": "blob " * 400}, *chat(10)])
    store.reset(KEY)
    store.ingest(KEY, chat(10, prefix="new"))
    clock.advance(31 * 86400)
    dry = store.apply_retention(dry_run=True)
    assert dry.deleted_conversations == [old.conversation_id] and store.status().conversations == 2
    res = store.apply_retention()
    assert res.deleted_conversations == [old.conversation_id] and res.deleted_messages == 11 and res.deleted_files == 1
    st = store.status()
    assert st.conversations == 1 and st.messages == 10 and st.large_files == 0
    assert store.doctor().ok
    assert store.grep("msg", session_key=KEY).hits == [] and store.grep("new", session_key=KEY).hits


def test_retention_by_size(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_store(str(tmp_path / "lcm.db"), retention_max_database_bytes=1)
    a = store.ingest("agent:a", chat(50))
    store.reset("agent:a")
    store.ingest("agent:b", chat(50))
    res = store.apply_retention()
    assert res.deleted_conversations == [a.conversation_id]  # archived only; b and the new a stay
    assert store.status().active_conversations == 2


def test_event_log_is_json_lines(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_store(str(tmp_path / "lcm.db"), fresh_tail_count=8)
    store.ingest(KEY, chat(40))
    store.compact(KEY, force=True)
    store.reset(KEY)
    lines = [json.loads(x) for x in (tmp_path / "lcm-log.jsonl").read_text().splitlines()]
    assert [e["event"] for e in lines] == ["ingest", "summary", "compact", "reset"]
    assert lines[1]["model"] == "extractive" and lines[0]["ts"].endswith("Z")


def test_migrations_apply_once_and_persist(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "lcm.db"
    with LcmStore(path, clock=clock) as s:
        s.ingest(KEY, chat(3))
        assert s.db.scalar("PRAGMA journal_mode") == "wal"
    with LcmStore(path, clock=clock) as s:
        assert s.status().messages == 3 and s.status().migrations == list(MIGRATIONS)
        assert s.db.scalar("SELECT count(*) FROM lcm_migrations") == len(MIGRATIONS)


def test_contradictory_arguments(tmp_path: Path) -> None:
    import pytest

    from lcm import LcmConfig

    with pytest.raises(ValueError):
        LcmStore(tmp_path / "a.db", LcmConfig(database_path=str(tmp_path / "b.db")))
    with pytest.raises(ValueError):  # an explicit config reads no environment: no path at all
        LcmStore(None, LcmConfig())
    with pytest.raises(ValueError):
        LcmStore(":memory:", llm=object())  # type: ignore[arg-type]


def test_time_order_migration_reads_rows_stored_before_it(tmp_path: Path, clock: ManualClock) -> None:
    """A database from before migration 0003 with an imported older message is marked out of order."""
    from lcm.db import Database

    path = tmp_path / "old.db"
    db = Database(path)
    with db.atomic() as c:
        c.execute("CREATE TABLE lcm_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for name in ("0001_core_tables", "0002_full_text"):
            MIGRATIONS[name](c)
            c.execute("INSERT INTO lcm_migrations VALUES (?, '2026-01-01T00:00:00Z')", (name,))
        c.execute(
            "INSERT INTO conversations(id, session_key, active, created_at, updated_at) "
            "VALUES (1, 'agent:main:x', 1, '2026-01-01', '2026-01-01')"
        )
        for seq, at in enumerate(["2026-01-05T00:00:00Z", "2026-01-02T00:00:00Z"]):
            c.execute(
                "INSERT INTO messages(conversation_id, seq, role, content, token_count, identity_hash, created_at) "
                "VALUES (1, ?, 'user', 'deploy', 1, ?, ?)",
                (seq, f"h{seq}", at),
            )
    db.close()
    with LcmStore(path, clock=clock) as s:
        assert s.status().migrations == list(MIGRATIONS)
        flags = {r[0]: r[1] for r in s.db.query("SELECT name, out_of_order FROM lcm_time_order")}
        assert flags == {"messages": 1}
        hits = s.grep("deploy", mode="full_text", all_conversations=True, scope="messages").hits
        assert [h.created_at[:10] for h in hits] == ["2026-01-05", "2026-01-02"]
        found = [(i.check, i.severity, i.id) for i in s.doctor().issues if i.severity == "info"]
        assert found == [("rows_out_of_time_order", "info", "messages")]


def test_rows_out_of_time_order_is_a_finding_not_damage(store: LcmStore) -> None:
    store.ingest(KEY, [{"role": "user", "content": "new", "created_at": "2026-05-01T00:00:00Z"}])
    assert store.doctor().checks["rows_out_of_time_order"] == 0
    store.ingest("agent:main:old", [{"role": "user", "content": "old", "created_at": "2020-05-01T00:00:00Z"}])
    report = store.doctor()
    assert report.ok and report.checks["rows_out_of_time_order"] == 1
