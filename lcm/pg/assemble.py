"""Assembly on PostgreSQL: the shared Assembler, its context statement kept off parallel plans."""

from __future__ import annotations

from lcm.assemble import Assembler
from lcm.conn import Connection
from lcm.pg.db import PgConnection

__all__ = ["PgAssembler"]


class PgAssembler(Assembler):
    """:class:`lcm.assemble.Assembler` with its read transactions planned serially.

    The planner's row estimate for one conversation's context items is the table's average
    (about 5,000 a conversation at 1M messages in 200 conversations), and from there it picks
    a parallel plan with two workers: starting them took 6-10 ms of a ~1 ms statement at 1M
    (``EXPLAIN ANALYZE``: the workers' own part 0.6 ms each). Assembly reads one
    conversation's rows by index, which no worker speeds up.
    """

    def prepare_read(self, c: Connection) -> None:
        assert isinstance(c, PgConnection)
        c.raw.execute("SET LOCAL max_parallel_workers_per_gather = 0")
