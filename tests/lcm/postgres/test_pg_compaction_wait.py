"""Assembly behind another host's compaction on PostgreSQL: a bounded wait, then store_locked."""

from __future__ import annotations

import psycopg
import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import StoreBusyError
from lcm.pg.db import LOCK_COMPACTION, lock_key

from ..conftest import chat

KEY = "agent:main:wait"


def test_assemble_behind_a_stuck_compaction_gives_up_as_store_locked(pg_clean_url: str, clock: ManualClock) -> None:
    # deadlines of 0.1 s: a run holds the lock at most that long, so a waiter gives up after 0.2 s
    cfg = LcmConfig(log_file_enabled=False, compact_until_under_deadline_ms=100, sweep_deadline_ms=100)
    with LcmStore(pg_clean_url, cfg, clock=clock) as store:
        conv_id = store.ingest(KEY, chat(200)).conversation_id
        assert conv_id is not None
        with psycopg.connect(pg_clean_url, autocommit=True) as other_host:  # holds the compaction lock
            other_host.execute("SELECT pg_advisory_lock(%s::int4, %s::int4)", [LOCK_COMPACTION, lock_key(str(conv_id))])
            with pytest.raises(StoreBusyError, match=f"compaction lock of conversation {conv_id}") as err:
                store.assemble(KEY, 500)
            assert err.value.code == "store_locked" and err.value.path.startswith("postgresql://")
        assert store.assemble(KEY, 500).compacted  # the holder is gone: compacts as usual
