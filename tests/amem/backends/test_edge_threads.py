"""The embedded engine's search threads: given at every open, reaching the engine's own pool,
kept across its index builds, and refused when they make no sense (issue 25)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from amem import load_config
from amem.backends import EdgeBackend, open_backend
from amem.backends.base import Where
from amem.backends.edge import auto_search_threads
from amem.errors import ConfigError

from ._data import random_points, unit

ROOT = Path(__file__).resolve().parents[3]


def _stored(path: Path) -> dict:
    return json.loads((path / "shard" / "edge_config.json").read_text())


def _engine_threads(store: Path, search_threads: int, cpus: set[int] | None = None) -> int:
    """The search threads the engine runs, counted in a fresh process (this one holds other
    tests' stores) that opens ``store`` with ``search_threads``, optionally on ``cpus``.

    A thread of the engine's pool shows under its name only once it has started and named
    itself, which on a loaded machine can come after the search that asked for it (a CI run
    counted 2 of 3): the process searches and counts again, up to 100 times, until it sees
    the threads asked for. More than asked for is seen at once and fails."""
    code = textwrap.dedent(f"""
        import os, sys, time
        if {cpus!r} is not None:
            os.sched_setaffinity(0, {cpus!r})
        from amem.backends import EdgeBackend
        from amem.backends.base import Where
        from amem.backends.edge import auto_search_threads
        import numpy as np
        asked = {search_threads} or auto_search_threads()
        with EdgeBackend({str(store)!r}, 8, search_threads={search_threads}) as backend:
            for _ in range(100):
                backend.dense_search(np.ones(8, dtype=np.float32) / 8 ** 0.5, Where(), 3)
                names = [open(f"/proc/self/task/{{t}}/comm").read().strip()
                         for t in os.listdir("/proc/self/task")]
                seen = sum(name.startswith("edge-search") for name in names)
                if seen >= asked:
                    break
                time.sleep(0.02)
            print(seen)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_the_engine_searches_on_the_threads_it_is_given(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, 8, search_threads=3) as backend:
        backend.upsert(random_points(20, seed=1, dim=8))
    assert _engine_threads(tmp_path, 3) == 3
    # given again at the next open: the stored count is replaced, not kept
    assert _engine_threads(tmp_path, 2) == 2
    assert _stored(tmp_path)["max_search_threads"] == 2


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not Path("/proc/self/task").is_dir(),
                    reason="needs CPU affinity and /proc")
def test_the_default_is_one_fewer_than_the_cpus_and_never_none(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, 8) as backend:
        backend.upsert(random_points(5, seed=2, dim=8))
    # on one CPU the engine still gets a thread
    assert _engine_threads(tmp_path, 0, cpus={0}) == 1
    usable = os.sched_getaffinity(0)
    assert auto_search_threads() == max(1, len(usable) - 1)
    assert _engine_threads(tmp_path, 0, cpus=usable) == max(1, len(usable) - 1)


def test_the_count_survives_an_index_build_and_the_layout_is_untouched(tmp_path: Path) -> None:
    points = random_points(300, seed=5, dim=8)
    with EdgeBackend(tmp_path, 8, search_threads=2, segment_kb=4096) as backend:
        backend.upsert(points)
    before = _stored(tmp_path)
    with EdgeBackend(tmp_path, 8, search_threads=3) as backend:
        after_open = _stored(tmp_path)
        backend.optimize()  # a child process builds; the engine is reopened after it
        assert _stored(tmp_path)["max_search_threads"] == 3
        hit = backend.dense_search(unit(points[7].dense), Where(), 1)[0]
        assert hit.id == points[7].id
        assert backend.count() == 300
    # only the thread count changed: vectors, quantization, payload placement, segment limit
    assert {k: v for k, v in after_open.items() if k != "max_search_threads"} == \
        {k: v for k, v in before.items() if k != "max_search_threads"}
    assert after_open["optimizers"]["max_segment_size"] == 4096


def test_a_temporary_store_takes_the_count_too() -> None:
    backend = open_backend("edge", path=":memory:", dim=8, search_threads=2)
    try:
        assert backend.search_threads == 2
        assert _stored(backend.path)["max_search_threads"] == 2
    finally:
        backend.close()


@pytest.mark.parametrize("bad", [-1, True, "2", 1.5, None, 257, 100_000])
def test_a_bad_count_is_refused_naming_the_setting(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError, match="search_threads"):
        EdgeBackend(tmp_path, 8, search_threads=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "shard").exists()  # nothing was created


def test_the_setting_is_refused_for_a_qdrant_backend(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="search_threads"):
        open_backend("qdrant", path=tmp_path, dim=8, search_threads=2)


def test_the_setting_comes_from_the_config_and_the_environment() -> None:
    assert load_config().search_threads == 0
    assert load_config(env={"AMEM_SEARCH_THREADS": "4"}).search_threads == 4
    for bad in ("-2", "257", "many"):
        with pytest.raises(ConfigError, match="search_threads"):
            load_config(env={"AMEM_SEARCH_THREADS": bad})


def test_status_reports_the_count(tmp_path: Path) -> None:
    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder

    config = load_config(overrides={"search_threads": 2})
    with MemoryStore(tmp_path / "s", config=config, embedder=HashingEmbedder()) as store:
        assert store.info().search_threads == 2


def test_the_config_bound_is_the_backends() -> None:
    from amem.backends.edge import MAX_SEARCH_THREADS

    assert load_config(env={"AMEM_SEARCH_THREADS": str(MAX_SEARCH_THREADS)}).search_threads \
        == MAX_SEARCH_THREADS
    with pytest.raises(ConfigError, match="search_threads"):
        load_config(env={"AMEM_SEARCH_THREADS": str(MAX_SEARCH_THREADS + 1)})
