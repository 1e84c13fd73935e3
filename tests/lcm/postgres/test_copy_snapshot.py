"""``amem lcm migrate`` copies one consistent snapshot while another process writes the source, and
its verification refuses a copy that does not match (issue 24, item 4)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import CopyVerificationError
from lcm.pg.copy import copy_sqlite_to_postgres, reference_checks
from lcm.pg.db import PgDatabase

from ..conftest import chat

ROOT = Path(__file__).resolve().parents[3]
CFG = dict(fresh_tail_count=8, log_file_enabled=False, replay_flood_threshold_external=10**6,
           replay_flood_threshold_internal=10**6)  # fmt: skip

#: ingests two messages a call into three conversations and compacts one of them every tenth
#: call (summaries made, context items replaced), writing how many calls it finished
WRITER = textwrap.dedent("""
    import os
    import sys
    from pathlib import Path
    from lcm import LcmConfig, LcmStore
    path, progress, calls = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    cfg = LcmConfig(fresh_tail_count=8, log_file_enabled=False, replay_flood_threshold_external=10**6,
                    replay_flood_threshold_internal=10**6)
    with LcmStore(path, cfg) as store:
        print("READY", flush=True)
        for i in range(calls):
            key = f"agent:w:{i % 3}"
            store.ingest(key, [{"role": "user", "content": f"writer {i}: is shard {i} healthy?"},
                               {"role": "assistant", "content": f"writer {i}: shard {i} answered in {i % 97} ms"}])
            if i % 10 == 9:
                store.compact(key, force=True)
            progress.with_suffix(".tmp").write_text(str(i + 1))
            os.replace(progress.with_suffix(".tmp"), progress)  # a reader never sees it half written
""")


def _progress(path: Path) -> int:
    try:
        return int(path.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _seed(path: Path, clock: ManualClock) -> None:
    with LcmStore(str(path), LcmConfig(**CFG), clock=clock) as lite:
        for k in range(3):
            key = f"agent:w:{k}"
            for start in range(0, 1200, 200):
                lite.ingest(key, chat(200, start=start, prefix=f"seed {k}"))
            lite.compact(key, force=True)


def test_migrate_while_another_process_writes_copies_a_consistent_snapshot(
        tmp_path: Path, pg_url: str, clock: ManualClock) -> None:
    path, progress = tmp_path / "lcm.db", tmp_path / "progress"
    _seed(path, clock)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writer = subprocess.Popen([sys.executable, str(script), str(path), str(progress), "3000"],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "READY"
        deadline = time.monotonic() + 30
        while _progress(progress) < 20 and time.monotonic() < deadline:  # past its first compactions
            time.sleep(0.02)
        with LcmStore(str(path), LcmConfig(**CFG), clock=clock) as lite:
            before = _progress(progress)
            dst = PgDatabase(pg_url)
            try:
                report = copy_sqlite_to_postgres(lite.db, dst)
            finally:
                dst.close()
            during = _progress(progress) - before
    finally:
        writer.kill()
        writer.wait(10)
        if writer.stdout is not None:
            writer.stdout.close()
    assert during > 0, "the writer made no call while the copy ran: the test proved nothing"
    with LcmStore(pg_url, LcmConfig(**CFG), clock=clock) as pg:
        checks = pg.doctor().checks
        assert (checks["dangling_context_items"], checks["orphan_edges"], checks["unreachable_messages"]) == (0, 0, 0)
        with pg.db.reading() as c:
            assert set(reference_checks(c).values()) == {0}
        copied = int(pg.db.scalar("SELECT count(*) FROM messages"))
    assert report.carried == {} and set(report.checks.values()) == {0}
    # the copy is the source at one instant: at least the seed, at most what the writer finished
    assert 3 * 1200 <= copied == report.rows["messages"] <= 3 * 1200 + 2 * (before + during + 1)


def _damage_on_insert(url: str, table: str, where: str) -> None:
    """A destination trigger that silently drops the rows of ``table`` matching ``where``: a copy
    that loses rows on the way, which only the verification can notice."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"""CREATE FUNCTION lose_rows() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF {where} THEN RETURN NULL; END IF; RETURN NEW; END $$""")
        conn.execute(f"CREATE TRIGGER lose_rows BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION lose_rows()")


@pytest.mark.parametrize(("table", "where", "named"), [
    ("summaries", "NEW.pk = 1", "context items pointing nowhere"),
    ("context_items", "NEW.item_type = 'message' AND NEW.ordinal % 7 = 0", "messages reachable from nothing"),
])  # fmt: skip
def test_verification_refuses_a_copy_with_a_planted_inconsistency(
        tmp_path: Path, pg_url: str, clock: ManualClock, table: str, where: str, named: str) -> None:
    with LcmStore(str(tmp_path / "lcm.db"), LcmConfig(**CFG), clock=clock) as lite:
        lite.ingest("agent:a:s", chat(60))
        assert lite.compact("agent:a:s", force=True).leaf_summaries
        dst = PgDatabase(pg_url)
        try:
            LcmStore(pg_url).close()  # migrate the destination, then plant the fault in it
            _damage_on_insert(pg_url, table, where)
            with pytest.raises(CopyVerificationError) as err:
                copy_sqlite_to_postgres(lite.db, dst)
        finally:
            dst.close()
    message = str(err.value)
    assert f"{table}: " in message and "in the source snapshot" in message and named in message
    assert err.value.code == "verification_failed" and any(p.startswith(f"{table}: ") for p in err.value.problems)
    with psycopg.connect(pg_url) as conn:  # rolled back: the destination holds nothing
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)


def test_damage_the_source_already_had_is_copied_and_reported(tmp_path: Path, pg_url: str, clock: ManualClock) -> None:
    with LcmStore(str(tmp_path / "lcm.db"), LcmConfig(**CFG), clock=clock) as lite:
        lite.ingest("agent:a:s", chat(12))
        with lite.db.atomic() as c:  # an item whose message is gone, as an old bug could leave it
            c.execute("DELETE FROM context_items WHERE ordinal = 3")
        dst = PgDatabase(pg_url)
        try:
            report = copy_sqlite_to_postgres(lite.db, dst)
        finally:
            dst.close()
    assert report.carried == {"messages_reachable_from_nothing": 1}
    assert report.rows["messages"] == 12 and report.rows["context_items"] == 11


def test_the_reachability_checks_stay_linear_on_the_server(pg_url: str) -> None:
    # NOT IN a subquery is re-read per row once its set outgrows work_mem (the doctor and the
    # copy's checks then ran for minutes); a small work_mem and a deadline make that show at
    # 20k rows: the anti joins take milliseconds, the per-row plan tens of seconds.
    LcmStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO conversations(id, session_key, created_at, updated_at) VALUES (1, 'k', 't', 't')")
        conn.execute("INSERT INTO messages(id, conversation_id, seq, role, content, token_count, identity_hash, "
                     "created_at) SELECT g, 1, g, 'user', 'm', 1, 'h', 't' FROM generate_series(1, 20000) g")
        conn.execute("INSERT INTO context_items(conversation_id, ordinal, item_type, message_id) "
                     "SELECT 1, g, 'message', g FROM generate_series(1, 20000) g")
        conn.execute("ANALYZE")
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None
        conn.execute(f'ALTER DATABASE "{name[0]}" SET work_mem = \'64kB\'')
        conn.execute(f'ALTER DATABASE "{name[0]}" SET statement_timeout = \'5s\'')
    with LcmStore(pg_url) as pg:
        with pg.db.reading() as c:
            assert set(reference_checks(c).values()) == {0}
        assert pg.doctor().checks["unreachable_messages"] == 0
