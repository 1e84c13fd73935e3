"""An index build on a copy copies the writes made meanwhile before its swap, not in it.

The swap holds the engine gate, so every point it replays stops the store's writes: 15k
points written during a build once stopped them for 16 s. Changed points are copied onto the
built shard in rounds outside the gate first, and the copy still ends with every write.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
from amem.backends import EdgeBackend
from amem.backends import _edge_build
from amem.backends.edge import SHARD_DIR

from ._data import pid, random_points


def test_writes_made_during_a_build_are_copied_before_the_swap(tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, 16)
    try:
        backend.upsert(random_points(300, seed=1, dim=16))
        outcome: list[str] = []
        build = threading.Thread(target=lambda: outcome.append(_edge_build.build_on_copy(
            backend, SHARD_DIR, swap_max=0)))
        build.start()
        deadline = time.monotonic() + 60
        while backend.build_child is None and build.is_alive():
            assert time.monotonic() < deadline, "the build's child never started"
            time.sleep(0.005)
        written = random_points(40, seed=2, dim=16)
        for p in written:  # new points, numbered as the first 40: they replace those
            backend.upsert([p])
        backend.delete([pid(299)])
        build.join()
        assert outcome, "the build failed"
        copied = int(outcome[0].split(", ")[1].split()[0])
        assert copied == 41, outcome[0]  # every change went over outside the gate
        assert outcome[0].endswith(", 0 replayed")
        assert backend.count() == 299
        stored = {h.id: h for h in backend.retrieve([p.id for p in written], with_vectors=True)}
        for p in written:  # the vectors written during the build, not the first ones
            got = stored[p.id].dense
            assert got is not None and np.allclose(got, p.dense, atol=1e-6)
        assert not backend.retrieve([pid(299)])
        assert not (tmp_path / _edge_build.BUILD_DIR).exists()
    finally:
        backend.close()
    reopened = EdgeBackend(tmp_path, 16)  # the swapped-in shard is the store from now on
    try:
        assert reopened.count() == 299
    finally:
        reopened.close()
