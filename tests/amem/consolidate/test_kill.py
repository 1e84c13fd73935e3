"""A real crash: a child process dies (``os._exit``, no close, no flush) in the middle of a run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock

from .conftest import TableEmbedder, link_problems, open_store, state
from .test_interrupt import seed

ROOT = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent("""
    import os, sys
    from amem import MemoryStore, load_config
    from amem.kernel.clock import ManualClock
    from tests.amem.consolidate.conftest import TableEmbedder
    from tests.amem.consolidate.test_interrupt import seed

    def die_after_two(stage, done, total):
        if stage == "merge" and done == 2:
            os._exit(9)  # no close, no flush: the engine's WAL is all that survives

    store = MemoryStore(sys.argv[1], config=load_config(), embedder=TableEmbedder(),
                        clock=ManualClock("2026-03-01T12:00:00+00:00"))
    seed(store)
    store.consolidate(progress=die_after_two)
    sys.exit(0)
""")


def test_killed_child_leaves_a_consistent_store_and_the_next_run_finishes(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-01T12:00:00+00:00")
    with open_store("edge", TableEmbedder(), clock) as ref:
        seed(ref)
        ref.consolidate()
        expected = state(ref)
    path = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run([sys.executable, "-c", CHILD, str(path)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 9, child.stderr
    table = TableEmbedder()
    with MemoryStore(path, config=load_config(), embedder=table, clock=clock) as store:
        seed_vectors(table)
        assert link_problems(store) == []
        merged_so_far = [n.id for n, _ in store.iter_notes(include_inactive=True) if not n.is_active]
        assert len(merged_so_far) == 2
        store.consolidate()
        assert state(store) == expected
        assert link_problems(store) == []


def seed_vectors(table: TableEmbedder) -> None:
    """Fill the table as ``seed`` does, without writing notes (the store already has them)."""
    with open_store("qdrant-local", table, ManualClock("2026-03-01T12:00:00+00:00")) as scratch:
        seed(scratch)
