"""Interruption: a crash before any write of a run leaves consistent links; the next run finishes."""

from __future__ import annotations

from typing import Any

import pytest

from amem import MemoryStore
from amem.backlinks import mend_links
from amem.kernel.clock import ManualClock

from tests.fakes.backends import FlakyBackend, InjectedCrash

from .conftest import TableEmbedder, angle_vector, link_problems, open_store, put, state


def seed(store: MemoryStore) -> None:
    """Two clusters, a pending note with a duplicate elsewhere, a knowledge pair, many links."""
    put(store, "a1", "Eve's flight lands at Heathrow terminal five at 7am", vector=angle_vector(0),
        links=["b1", "z"], retrieval_count=1)
    put(store, "a2", "Eve lands at Heathrow terminal five", vector=angle_vector(8), links=["a1", "z"])
    put(store, "a3", "Eve lands at Heathrow", vector=angle_vector(16), links=["b2"])
    put(store, "b1", "The build cache lives in an S3 bucket in eu-west-1",
        vector=angle_vector(0, axis=2), category="Technical", links=["a2", "a3"])
    put(store, "b2", "Build cache is in S3", vector=angle_vector(12, axis=2), category="Technical",
        links=["a1", "a2", "z"])
    put(store, "p", "Build cache bucket S3 eu-west-1", vector=angle_vector(20, axis=2),
        category="Project", pending_merge=True, links=["b2"])
    put(store, "k1", "Idempotent jobs can be retried safely", vector=angle_vector(0, axis=4),
        note_type="knowledge", links=["z"])
    put(store, "k2", "Idempotent jobs are safe to retry", vector=angle_vector(10, axis=4),
        note_type="knowledge", links=["k1", "a3"])
    put(store, "z", "Unrelated: the office closes at six", vector=angle_vector(0, axis=6),
        links=["a1", "a2", "a3", "k2", "b2"])


def reference(kind: str, table: TableEmbedder, clock: ManualClock) -> tuple[dict[str, Any], int]:
    with open_store(kind, table, clock, flaky=True) as s:
        seed(s)
        s.index.backend.arm(None)
        report = s.consolidate()
        assert report.merges == 5 and link_problems(s) == []
        return state(s), s.index.backend.writes


# Every write on the fast in-memory engine; a sample on the embedded default (slow to open).
@pytest.mark.parametrize("kind, step", [("qdrant-local", 1), ("edge", 7)])
def test_crash_before_every_write_then_resume_gives_the_uninterrupted_result(
        kind: str, step: int, table: TableEmbedder, clock: ManualClock) -> None:
    expected, writes = reference(kind, table, clock)
    assert writes > 20  # every merge is several writes: the loop below covers each of them
    for fail_at in range(0, writes, step):
        with open_store(kind, table, clock, flaky=True) as s:
            seed(s)
            backend = s.index.backend
            assert isinstance(backend, FlakyBackend)
            backend.arm(fail_at)
            with pytest.raises(InjectedCrash):
                s.consolidate()
            assert link_problems(s) == [], f"after a crash at write {fail_at}"
            backend.arm(None)
            s.consolidate()
            assert state(s) == expected, f"resume after a crash at write {fail_at}"
            assert link_problems(s) == []
            backend.arm(0)  # a third run must not write at all
            assert s.consolidate().merges == 0


def test_resume_counts_the_finished_merge_once(table: TableEmbedder, clock: ManualClock) -> None:
    with open_store("edge", table, clock, flaky=True) as s:
        seed(s)
        # the seed's one-way links get their other halves first (amem.backlinks), so that the
        # run's first writes are the merge's
        mend_links(s.index)
        s.index.backend.arm(2)  # intent + survivor written, cascade not yet
        with pytest.raises(InjectedCrash):
            s.consolidate()
        marked = [n for n, _ in s.iter_notes() if n.merged_into]
        assert len(marked) == 1 and marked[0].is_active  # the loser is still live
        s.index.backend.arm(None)
        report = s.consolidate()
        assert report.agents["default"].resumed == 1
        survivor = s.get(marked[0].merged_into or "")
        merges = [h for h in survivor.evolution_history if h.get("merged") == marked[0].id]
        assert len(merges) == 1  # retrieval counts and history were not applied twice
