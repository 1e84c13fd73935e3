"""The change log of an index build on a copy: every write kind goes through it whole, a
build whose log lost a write is dropped, and a kill during the child's catch-up loses nothing.

The build's child applies the writes made meanwhile from the log (the serving process no
longer copies points onto the build, which cost a writer going flat out half its rate).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe
from amem.backends import EdgeBackend
from amem.backends import _edge_build
from amem.backends.base import DENSE, SPARSE
from amem.backends.edge import SHARD_DIR
from amem.errors import BackendError

from ._data import pid, random_points, sparse, unit
from ...buildkill import WATCH_BUILD_CHILDREN, KilledWriter

DIM = 16


def _points(shard: qe.EdgeShard) -> dict[str, tuple[Any, Any]]:
    """Every point of ``shard``: id -> (payload, vectors)."""
    out: dict[str, tuple[Any, Any]] = {}
    offset = None
    while True:
        page, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=500, with_payload=True,
                                                     with_vector=True))
        for r in page:
            out[str(r.id)] = (r.payload, r.vector)
        if offset is None:
            return out


def _same(a: dict[str, tuple[Any, Any]], b: dict[str, tuple[Any, Any]]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        (pa, va), (pb, vb) = a[key], b[key]
        assert pa == pb, key
        assert np.allclose(va[DENSE], vb[DENSE], atol=1e-7), key
        assert list(va[SPARSE].indices) == list(vb[SPARSE].indices), key
        assert np.allclose(va[SPARSE].values, vb[SPARSE].values, atol=1e-7), key


def test_every_write_kind_applied_from_the_log_gives_the_same_points(tmp_path: Path) -> None:
    first = random_points(60, seed=1, dim=DIM)
    live, copy = EdgeBackend(tmp_path / "live", DIM), EdgeBackend(tmp_path / "copy", DIM)
    try:
        live.upsert(first)
        copy.upsert(first)
        live.changes = _edge_build.ChangeLog(tmp_path / "changes.log")
        live.upsert(random_points(10, seed=2, dim=DIM))  # replaces the first ten
        live.upsert([p for p in random_points(80, seed=3, dim=DIM)[60:]])  # new ones
        live.set_payload(pid(11), {"agent_id": "moved", "tags": ["a", "b"], "x": 1.5})
        assert live.update_point(pid(12), {"n": -1}, dense=unit(np.ones(DIM)),
                                 sparse=sparse({3: 0.25, 9: 2.0}))
        assert not live.update_point(pid(999), {"n": 1})  # no such point: nothing logged
        live.delete([pid(13), pid(70)])
        live.set_payload(pid(14), {"retrieval_count": 9})  # heat: held in memory ...
        assert live.write_heat() == 1  # ... and written with the others
        live.upsert([random_points(71, seed=4, dim=DIM)[70]])  # deleted, then written again
        changes = live.changes
        live.changes = None
        changes.close()
        assert changes.broken is None and changes.lines == 8
        reader = _edge_build.LogReader(changes.path)
        records = reader.read()
        reader.close()
        assert len(records) == 8
        _edge_build.apply(copy.shard, records)
        _same(_points(live.shard), _points(copy.shard))
    finally:
        live.close()
        copy.close()


def test_a_half_written_last_line_is_read_once_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "changes.log"
    path.write_bytes(b'{"op":"delete","ids":["a"]}\n{"op":"del')
    reader = _edge_build.LogReader(path)
    try:
        assert reader.read() == [{"op": "delete", "ids": ["a"]}]
        with path.open("ab") as f:
            f.write(b'ete","ids":["b"]}\n')
        assert reader.read() == [{"op": "delete", "ids": ["b"]}]
        assert reader.offset == path.stat().st_size
    finally:
        reader.close()
    path.write_bytes(b"not json\n")
    bad = _edge_build.LogReader(path)
    try:
        with pytest.raises(BackendError, match="bad line at byte 0"):
            bad.read()
    finally:
        bad.close()


def _start_build(backend: EdgeBackend, **kwargs: Any) -> tuple[threading.Thread, list[Any]]:
    """A build on a copy in a thread; returns once its child runs. The list gets the
    outcome or the exception."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(_edge_build.build_on_copy(backend, SHARD_DIR, **kwargs))
        except BackendError as exc:
            result.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while backend.build_child is None and thread.is_alive():
        assert time.monotonic() < deadline, "the build's child never started"
        time.sleep(0.005)
    return thread, result


def test_a_build_whose_log_missed_a_write_is_dropped_and_the_store_keeps_it(tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, DIM)
    try:
        backend.upsert(random_points(200, seed=1, dim=DIM))
        thread, result = _start_build(backend)
        backend.upsert(random_points(201, seed=5, dim=DIM)[200:])
        assert backend.changes is not None
        backend.changes.fail("a write the log could not take")  # what a full disk does
        thread.join()
        assert isinstance(result[0], BackendError)
        assert "dropped: a write the log could not take" in str(result[0])
        assert backend.count() == 201 and backend.changes is None
        assert not (tmp_path / _edge_build.BUILD_DIR).exists()
        assert not (tmp_path / _edge_build.LOG_FILE).exists()
    finally:
        backend.close()


def _catch_up_child(children: list[int], log_file: Path) -> int | None:
    """The one of the build's children (pids) that has the change log open: the catch-up,
    applying it (the optimising child never opens it)."""
    for child_pid in children:
        try:
            if any(os.readlink(f"/proc/{child_pid}/fd/{fd}") == str(log_file)
                   for fd in os.listdir(f"/proc/{child_pid}/fd")):
                return child_pid
        except OSError:  # gone, or between its start and its open
            continue
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_child_killed_while_it_applies_the_log_fails_the_build_not_the_store(
        tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, DIM)
    try:
        backend.upsert(random_points(200, seed=1, dim=DIM))
        thread, result = _start_build(backend)
        written = random_points(4000, seed=6, dim=DIM)[200:]
        stop = threading.Event()

        def write() -> None:  # batches until the kill: the child always has lines to apply
            while not stop.is_set():
                for start in range(0, len(written), 200):
                    backend.upsert(written[start:start + 200])

        writer = threading.Thread(target=write)
        writer.start()
        try:
            deadline = time.monotonic() + 300  # the niced optimiser starves on a busy machine
            while True:
                child = backend.build_child
                if child is not None and _catch_up_child([child.pid],
                                                         tmp_path / _edge_build.LOG_FILE):
                    break
                assert thread.is_alive(), f"the build ended before the test could kill it: {result}"
                assert time.monotonic() < deadline, "no child ever opened the change log"
                time.sleep(0.002)
            child.kill()
            thread.join()
        finally:
            stop.set()
            writer.join()
        assert isinstance(result[0], BackendError), result
        assert "(catch-up)" in str(result[0])
        assert backend.count() == 4000
        assert not (tmp_path / _edge_build.LOG_FILE).exists()
    finally:
        backend.close()
    reopened = EdgeBackend(tmp_path, DIM)
    try:
        assert reopened.count() == 4000
    finally:
        reopened.close()


_WRITER = """
import itertools, sys, threading, time
from amem.backends import EdgeBackend, _edge_build
from amem.backends.edge import SHARD_DIR
sys.path.insert(0, sys.argv[2])
from _data import random_points
backend = EdgeBackend(sys.argv[1], 16)
backend.upsert(random_points(200, seed=1, dim=16))
points = random_points(3000, seed=7, dim=16)[200:]
""" + WATCH_BUILD_CHILDREN + """
threading.Thread(target=_edge_build.build_on_copy, args=(backend, SHARD_DIR), daemon=True).start()
# batches of 200 until killed: the log grows faster than the child can apply it, so the
# catch-up lasts until its budget whatever the machine's speed
for start in itertools.cycle(range(0, len(points), 200)):
    batch = points[start:start + 200]
    backend.upsert(batch)
    say(*(p.id for p in batch))
"""


@pytest.mark.slow  # a real build in a grandchild: 5-10 s on a quiet machine, more under load
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_process_killed_while_the_child_applies_the_log_keeps_every_acknowledged_write(
        tmp_path: Path) -> None:
    store = tmp_path / "s"
    writer = KilledWriter(_WRITER, str(store), str(Path(__file__).parent))
    printed = writer.kill_when(  # a few batches applied after the catch-up child started
        lambda children: _catch_up_child(children, store / _edge_build.LOG_FILE) is not None,
        "no catch-up seen")
    # a line the kill cut short was not acknowledged
    acknowledged = [line for line in printed if line.count("-") == 4]
    assert acknowledged, "the writer acknowledged nothing before the kill"
    reopened = EdgeBackend(store, DIM)
    try:
        assert {h.id for h in reopened.retrieve(acknowledged)} == set(acknowledged)
        assert reopened.count() >= 200 + len(set(acknowledged))
        assert not (store / _edge_build.BUILD_DIR).exists()
        assert not (store / _edge_build.LOG_FILE).exists()
    finally:
        reopened.close()
