"""The whole-store checks (the doctor's reachability finding, the copy's reference checks) grow
linearly with the store: context_items has no index on message_id, and a correlated NOT EXISTS
over it scanned it once per message (the doctor took over 10 minutes at 100k messages).

Counted in SQLite virtual-machine steps (deterministic), not seconds: doubling the store must
not quadruple the work."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from lcm import LcmStore
from lcm.db import sqlite_only
from lcm.pg.copy import reference_checks

from .conftest import chat


def _steps(conn: sqlite3.Connection, work: Callable[[], object]) -> int:
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0  # go on

    conn.set_progress_handler(tick, 1000)
    try:
        work()
    finally:
        conn.set_progress_handler(None, 0)
    return count[0]


def _store_of(make_store: Callable[..., LcmStore], n: int) -> LcmStore:
    store = make_store(replay_flood_threshold_external=10**6, replay_flood_threshold_internal=10**6)
    for start in range(0, n, 500):
        store.ingest(f"agent:a:{start % 3}", chat(500, start=start))
    return store


def test_the_checks_grow_linearly(make_store: Callable[..., LcmStore]) -> None:
    small, large = _store_of(make_store, 2000), _store_of(make_store, 4000)
    conn = {id(s): sqlite_only(s.db, "counting steps").conn for s in (small, large)}
    checks: list[tuple[str, Callable[[LcmStore], object]]] = [
        ("doctor", lambda s: s.doctor(top=1)), ("reference checks", lambda s: reference_checks(conn[id(s)]))]
    for name, check in checks:
        a = _steps(conn[id(small)], lambda: check(small))
        b = _steps(conn[id(large)], lambda: check(large))
        assert b < 3 * a, f"{name}: {a} -> {b} steps for twice the messages (quadratic)"
