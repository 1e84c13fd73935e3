"""A ``delete_all`` killed half way is recorded in the store's metadata before its first delete
and reported until a call runs to its end (findings F5: a half-erased agent looked whole)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from amem.purge import BATCH, ERASING, unfinished_erasures
from tests.fakes.backends import FlakyBackend, InjectedCrash


def test_a_delete_all_killed_after_its_first_batch_is_reported_until_run_again(
        tmp_path: Path, clock: ManualClock) -> None:
    backend = FlakyBackend(EdgeBackend(str(tmp_path / "store"), 64))
    with MemoryStore(config=load_config(), embedder=HashingEmbedder(64), clock=clock,
                     backend=backend) as store:
        store.add_many([{"text": f"note {i} of agent a"} for i in range(BATCH + 40)],
                       agent_id="a", enrich=False)
        store.add("keep me", agent_id="other", enrich=False)
        backend.arm(1)  # the first batch goes, the process dies at the second
        with pytest.raises(InjectedCrash):
            store.delete_all(agent_id="a")
        backend.arm(None)
        # on disk before the first delete: a kill -9 (no close) leaves it for the next open
        on_disk = json.loads((tmp_path / "store" / "meta.json").read_text(encoding="utf-8"))
        assert on_disk[ERASING] == {"a": "2026-01-10T12:00:00+00:00"}
        assert unfinished_erasures(store.index) == [
            {"agent_id": "a", "started_at": "2026-01-10T12:00:00+00:00", "notes_left": 40}]
        assert store.delete_all(agent_id="a") == 40  # run again: the rest
        assert unfinished_erasures(store.index) == []
        assert [n.content for n, _ in store.iter_notes(agent_id="other")] == ["keep me"]
    reopened = json.loads((tmp_path / "store" / "meta.json").read_text(encoding="utf-8"))
    assert ERASING not in reopened


def test_a_finished_delete_all_leaves_no_record(clock: ManualClock) -> None:
    with MemoryStore(config=load_config(), embedder=HashingEmbedder(64), clock=clock,
                     backend=EdgeBackend.temporary(64)) as store:
        store.add("one note", enrich=False)
        assert store.delete_all() == 1
        assert ERASING not in store.index.meta and unfinished_erasures(store.index) == []
