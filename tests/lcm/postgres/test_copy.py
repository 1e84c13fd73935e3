"""Copying a SQLite store to PostgreSQL: same rows, same ids, same answers; never into a used database."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import LcmValidationError
from lcm.pg.copy import COPIED_TABLES, copy_sqlite_to_postgres
from lcm.pg.db import PgDatabase

from ..conftest import chat

KEY = "agent:main:s"


def test_a_copied_store_answers_like_the_original(tmp_path: Path, pg_url: str, clock: ManualClock) -> None:
    cfg = LcmConfig(fresh_tail_count=8, large_files_dir=str(tmp_path / "files"))
    lite = LcmStore(str(tmp_path / "lcm.db"), cfg, clock=clock)
    lite.ingest(KEY, chat(60))
    clock.advance(60)
    lite.ingest("agent:other:s", chat(6, prefix="other"))
    compacted = lite.compact(KEY, force=True)
    assert compacted.leaf_summaries
    dst = PgDatabase(pg_url)
    try:
        report = copy_sqlite_to_postgres(lite.db, dst)
    finally:
        dst.close()
    assert report.rows["messages"] == 66 and report.rows["summaries"] == len(compacted.leaf_summaries) + len(compacted.condensed_summaries)
    assert set(report.rows) == set(COPIED_TABLES)
    with LcmStore(pg_url, cfg, clock=clock) as pg:
        for pattern, mode in (("module_2.py", "full_text"), ("pytest", "full_text"), (r"bug #\d2", "regex")):
            want = [(h.id, h.kind) for h in lite.grep(pattern, mode=mode, session_key=KEY, limit=30).hits]
            assert want and (pattern != "module_2.py" or {k for _, k in want} == {"message", "summary"})
            assert [(h.id, h.kind) for h in pg.grep(pattern, mode=mode, session_key=KEY, limit=30).hits] == want
        sid = compacted.leaf_summaries[0]
        assert pg.describe(sid) == lite.describe(sid)
        assert pg.assemble(KEY, 4000).to_dict() == lite.assemble(KEY, 4000).to_dict()
        # the server's ids continue after the copied ones
        assert pg.ingest(KEY, [{"role": "user", "content": "after the move"}]).message_ids == [67]
    lite.close()


def test_copy_refuses_a_database_that_holds_conversations(tmp_path: Path, pg_url: str) -> None:
    with LcmStore(pg_url) as pg:
        pg.ingest(KEY, chat(2))
    with LcmStore(str(tmp_path / "lcm.db")) as lite:
        lite.ingest(KEY, chat(4))
        dst = PgDatabase(pg_url)
        try:
            with pytest.raises(LcmValidationError, match="already holds conversations"):
                copy_sqlite_to_postgres(lite.db, dst)
        finally:
            dst.close()
    with LcmStore(pg_url) as pg:
        assert int(pg.db.scalar("SELECT count(*) FROM messages")) == 2  # untouched
