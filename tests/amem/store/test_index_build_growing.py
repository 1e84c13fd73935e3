"""A long bulk write builds the index as it goes (``amem.index_build``, ``GROWTH``), so the
searches during and right after it brute-force only what was written since the last build."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.backends import _edge_build
from amem.embed.hashing import HashingEmbedder
from amem.backends.edge import EdgeBackend
from amem.index_build import BACKLOG, GROWTH, SEGMENT_SHARE
from amem.kernel.clock import ManualClock
from amem.notes import point_id

from ...buildkill import WATCH_BUILD_CHILDREN, KilledWriter


class StateAtEachBatch:
    """The hashing embedder, noting the store's build state each time a chunk is embedded
    (an Embedder seam: the bulk write embeds once per chunk, before writing it)."""

    def __init__(self, inner: HashingEmbedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.store: MemoryStore | None = None
        self.states: list[str] = []

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        if kind == "passage" and self.store is not None:
            self.states.append(self.store.index.build.state)
        return self.inner.embed(texts, kind=kind)  # type: ignore[arg-type]


def items(n: int, start: int = 0) -> list[dict[str, str]]:
    return [{"text": f"note {i} about topic {i % 7} and place {i % 5}"}
            for i in range(start, start + n)]


def open_store(path: Path, embedder: StateAtEachBatch, clock: ManualClock) -> MemoryStore:
    config = load_config(overrides={"optimize_after": 20})
    store = MemoryStore(path, config=config, embedder=embedder, clock=clock)
    embedder.store = store
    return store


def test_a_bulk_write_starts_the_build_before_it_ends_and_none_is_left_owed(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    spy = StateAtEachBatch(embedder)
    with open_store(tmp_path / "s", spy, clock) as store:
        store.add_many(items(40), enrich=False, batch=20)
        # the first chunk reached the threshold (nothing indexed yet): the build started
        # before the second chunk was written (before: idle until the write ended)
        assert spy.states == ["idle", "running"]
        store.index.build.wait()
        build = store.index.build
        # the chunks written during the first build were owed a build, run by the same
        # thread: nothing is left for brute force
        assert build.state == "done" and build.points_since == 0, build.to_dict()
        assert build.runs >= 2
        assert store.count() == 40
        assert store.search("note 37 about topic 2", limit=1)[0].content == items(40)[37]["text"]


def test_a_bulk_write_onto_an_indexed_store_waits_for_the_growth_share(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    spy = StateAtEachBatch(embedder)
    with open_store(tmp_path / "s", spy, clock) as store:
        store.add_many(items(200), enrich=False, batch=200)  # one chunk, one build
        store.index.build.wait()
        assert store.index.build.points_since == 0
        spy.states.clear()
        # 40 new points on 200 indexed: below GROWTH of them, so no build between the
        # chunks (each would merge 200 points for 20 new ones); one at the end (>= 20)
        assert 40 < GROWTH * 200
        store.add_many(items(40, start=200), enrich=False, batch=20)
        assert spy.states == ["done", "done"]
        store.index.build.wait()
        assert store.index.build.points_since == 0 and store.count() == 240


def test_the_growth_trigger_stays_below_the_segment_limit(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    spy = StateAtEachBatch(embedder)
    # 30 KB of 256-d float vectors: segments of at most 30 points (issue 25: a build's
    # memory follows the segment it writes, so the plain part must not outgrow the limit)
    backend = EdgeBackend(tmp_path / "s", embedder.dim, segment_kb=30)
    assert backend.segment_points == 30
    store = MemoryStore(backend=backend, config=load_config(overrides={"optimize_after": 10}),
                        embedder=spy, clock=clock)
    spy.store = store
    with store:
        store.add_many(items(120), enrich=False, batch=120)
        store.index.build.wait()
        spy.states.clear()
        # GROWTH of 120 indexed is 30, above SEGMENT_SHARE of the limit (15): the build
        # starts after the first chunk of 20 (before: not until 30 waited, at the write's
        # end); no wait for room after it (20 < BACKLOG x 15)
        assert SEGMENT_SHARE * backend.segment_points == 15 < 20 < GROWTH * 120
        assert 20 < BACKLOG * 15
        store.add_many(items(40, start=120), enrich=False, batch=20)
        assert spy.states == ["done", "running"]
        store.index.build.wait()
        assert store.index.build.points_since == 0 and store.count() == 160


class BacklogAtEachBatch(StateAtEachBatch):
    """Notes the points not yet indexed each time a chunk is embedded."""

    def __init__(self, inner: HashingEmbedder) -> None:
        super().__init__(inner)
        self.backlog: list[int] = []

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        if kind == "passage" and self.store is not None:
            self.backlog.append(self.store.index.build.points_since)
        return super().embed(texts, kind)


@pytest.mark.slow  # each chunk past the backlog waits for a real build: ~10 s
def test_a_bulk_write_faster_than_the_builds_waits_for_them(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    spy = BacklogAtEachBatch(embedder)
    with open_store(tmp_path / "s", spy, clock) as store:
        # chunks of 10 take milliseconds, a build seconds: without the wait the backlog
        # would reach ~70 before the first build ends
        store.add_many(items(80), enrich=False, batch=10)
        # the trigger is 20 (optimize_after) at this size: a chunk is written only while
        # fewer than BACKLOG x 20 = 30 points wait, so at most 30 + 10 ever wait
        assert max(spy.backlog) <= 30, spy.backlog
        assert store.index.build.waited_s > 0
        store.index.build.wait()
        assert store.index.build.points_since == 0 and store.count() == 80


_IMPORTER = """
import json, sys, threading, time
from amem import MemoryStore, load_config
from amem.embed.hashing import HashingEmbedder
store = MemoryStore(sys.argv[1], config=load_config(overrides={"optimize_after": 50}),
                    embedder=HashingEmbedder(dim=64))
backend = store.index.backend
""" + WATCH_BUILD_CHILDREN + """
n = 0
while True:  # chunks of 50 until killed; a build starts between them
    batch = [{"text": f"imported note {i} on topic {i % 11}", "id": f"n{i}"}
             for i in range(n, n + 50)]
    store.add_many(batch, enrich=False, batch=25)
    n += 50
    say(f"acked {n}")
"""


@pytest.mark.slow  # a real build in a grandchild while the import goes on: 3-10 s
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL")
def test_a_process_killed_during_a_build_started_by_its_import_keeps_every_acknowledged_note(
        tmp_path: Path) -> None:
    store = tmp_path / "s"
    writer = KilledWriter(_IMPORTER, str(store))
    # killed once the second build's child runs: the first was swapped in mid-import
    printed = writer.kill_when(lambda children: len(children) >= 3, "no build seen")
    acked = max((int(line.split()[1]) for line in printed if line.startswith("acked")),
                default=0)
    assert acked >= 50, "the importer acknowledged nothing before the kill"
    meta = json.loads((store / "meta.json").read_text(encoding="utf-8"))
    assert meta["index_build"]["state"] == "running"  # killed mid-build, as meant
    with MemoryStore(store, config=load_config(overrides={"optimize_after": 0}),
                     embedder=HashingEmbedder(dim=64)) as reopened:
        assert reopened.count() >= acked
        wanted = [point_id(reopened.agent_id, f"n{i}") for i in range(acked)]
        assert len(reopened.index.backend.retrieve(wanted)) == acked
        assert reopened.index.build.state == "failed"  # reported as interrupted
    for leftover in (_edge_build.BUILD_DIR, _edge_build.LOG_FILE, _edge_build.OLD_DIR):
        assert not (store / leftover).exists()
