"""Assembly on PostgreSQL reads its context statement without a parallel plan (lcm.pg.assemble)."""

from __future__ import annotations

from lcm import LcmConfig, LcmStore
from lcm.assemble import _CONTEXT_ROWS
from lcm.pg.assemble import PgAssembler
from lcm.pg.db import PgConnection, translate

from ..conftest import chat

KEY = "agent:main:a"
#: make every parallel plan look free, as the planner's row estimate does at 1M messages, and
#: keep the planner on scans a worker can share: with 40 messages it may otherwise pick index
#: lookups in a nested loop, which it did not run in parallel (the control failed once under
#: the full suite's load, with whatever statistics the tables had then)
_PARALLEL_IS_FREE = ("SET LOCAL parallel_setup_cost = 0; SET LOCAL parallel_tuple_cost = 0; "
                     "SET LOCAL min_parallel_table_scan_size = 0; SET LOCAL min_parallel_index_scan_size = 0; "
                     "SET LOCAL enable_nestloop = off; SET LOCAL enable_indexscan = off; "
                     "SET LOCAL enable_indexonlyscan = off; SET LOCAL enable_bitmapscan = off")  # fmt: skip


def _plan(c: PgConnection, conv_id: int) -> str:
    c.raw.execute(_PARALLEL_IS_FREE)
    return "\n".join(r[0] for r in c.raw.execute("EXPLAIN " + translate(_CONTEXT_ROWS), [conv_id]))


def test_the_context_statement_runs_without_parallel_workers(pg_clean_url: str) -> None:
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as store:
        store.ingest(KEY, chat(40))
        assert isinstance(store.assembler, PgAssembler)
        conv_id = store.assemble(KEY, 100_000).conversation_id
        assert conv_id is not None
        with store.db.reading() as c:
            assert isinstance(c, PgConnection)
            # the control: without the assembler's setting this planner goes parallel here
            assert "Gather" in _plan(c, conv_id)
        with store.db.reading() as c:
            assert isinstance(c, PgConnection)
            store.assembler.prepare_read(c)
            assert "Gather" not in _plan(c, conv_id)
