"""Assembly on PostgreSQL reads its context statement without a parallel plan (lcm.pg.assemble)."""

from __future__ import annotations

from lcm import LcmConfig, LcmStore
from lcm.assemble import _CONTEXT_ROWS
from lcm.pg.assemble import PgAssembler
from lcm.pg.db import PgConnection, translate

from ..conftest import chat

KEY = "agent:main:a"
#: the control: a Gather over any plan that may run in parallel (PostgreSQL 15's
#: ``force_parallel_mode``, ``debug_parallel_query`` from 16), so the planner's choice no longer
#: rests on the tables' statistics, which made the control fail under the full suite's load
#: (with 40 messages an estimate of one row gave a plan with no Gather). The planner enters
#: parallel mode at all only with ``max_parallel_workers_per_gather`` above 0, the setting the
#: assembler turns off, so the forced Gather shows whether that setting holds.
_FORCE = ("force_parallel_mode", "debug_parallel_query")


def _plan(c: PgConnection, conv_id: int) -> str:
    version = int(c.raw.execute("SHOW server_version_num").fetchone()[0])
    c.raw.execute(f"SET LOCAL {_FORCE[version >= 160000]} = on")
    return "\n".join(r[0] for r in c.raw.execute("EXPLAIN " + translate(_CONTEXT_ROWS), [conv_id]))


def test_the_context_statement_runs_without_parallel_workers(pg_clean_url: str) -> None:
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as store:
        store.ingest(KEY, chat(40))
        assert isinstance(store.assembler, PgAssembler)
        conv_id = store.assemble(KEY, 100_000).conversation_id
        assert conv_id is not None
        with store.db.reading() as c:
            assert isinstance(c, PgConnection)
            # the control: without the assembler's setting the statement gets its Gather
            assert "Gather" in _plan(c, conv_id)
        with store.db.reading() as c:
            assert isinstance(c, PgConnection)
            store.assembler.prepare_read(c)
            assert "Gather" not in _plan(c, conv_id)
