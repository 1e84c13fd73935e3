"""What only the embedded engine has: process ownership, the store directory, the shard config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from amem.backends import EdgeBackend
from amem.backends.base import BOOL_INDEXES, KEYWORD_INDEXES, Where
from amem.errors import BackendError, ConfigError, StoreLockedError, ValidationError

from ._data import DIM, pid, point, random_points, sparse, unit

REPO = Path(__file__).resolve().parents[3]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with the repo importable."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_second_handle_in_this_process_is_refused(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, DIM) as owner:
        owner.upsert([point(0, np.eye(DIM)[0], {1: 1.0})])
        with pytest.raises(StoreLockedError) as err:
            EdgeBackend(tmp_path, DIM)
        assert err.value.holder_pid == os.getpid()
        assert err.value.path == str(tmp_path.resolve())
        assert "already has it open" in str(err.value)
        assert owner.count() == 1  # the refused open changed nothing


def test_a_second_process_gets_a_clear_error_and_the_store_is_unharmed(tmp_path: Path) -> None:
    owner = EdgeBackend(tmp_path, DIM)
    owner.upsert(random_points(20, seed=1))
    result = run_python(f"""
        import json, sys
        from amem.backends import EdgeBackend
        from amem.errors import StoreLockedError
        try:
            EdgeBackend({str(tmp_path)!r}, {DIM})
        except StoreLockedError as exc:
            print(json.dumps({{"message": str(exc), "path": exc.path, "pid": exc.holder_pid}}))
            sys.exit(3)
    """)
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    seen = json.loads(result.stdout)
    assert seen["pid"] == os.getpid() and seen["path"] == str(tmp_path.resolve())
    for needle in (str(tmp_path.resolve()), f"process {os.getpid()} (", "amem serve", "AMEM_QDRANT_URL"):
        assert needle in seen["message"]
    # the owner carries on as if nothing happened
    owner.upsert([point(30, np.eye(DIM)[0], {1: 1.0})])
    assert owner.count() == 21
    owner.close()


def test_the_engine_itself_also_locks_its_wal(tmp_path: Path) -> None:
    # Found while building this backend: EdgeShard.load on a shard that is open elsewhere fails
    # with an opaque "Can't init WAL: Kind(WouldBlock)"; our lock turns that into a clear error.
    with EdgeBackend(tmp_path, DIM):
        with pytest.raises(Exception, match="WouldBlock"):
            qe.EdgeShard.load(str(tmp_path / "shard"))


def test_after_close_or_a_crash_the_next_process_owns_the_store(tmp_path: Path) -> None:
    first = EdgeBackend(tmp_path, DIM)
    first.upsert(random_points(10, seed=2))
    first.close()
    # A second process opens it, writes without flushing, and dies without closing.
    result = run_python(f"""
        import os, signal
        import numpy as np
        from amem.backends import EdgeBackend
        from amem.backends.base import Point, SparseVector
        import uuid
        b = EdgeBackend({str(tmp_path)!r}, None)
        print(b.count(), flush=True)
        b.upsert([Point(str(uuid.UUID(int=1000 + i)), np.ones({DIM}), SparseVector((i,), (1.0,)), {{"i": i}})
                  for i in range(5)])
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert result.returncode == -9, result.stderr
    assert result.stdout.strip() == "10"
    # The kernel dropped the dead owner's lock; the WAL kept its acknowledged writes.
    with EdgeBackend(tmp_path, DIM) as again:
        assert again.count() == 15
        assert again.retrieve([pid(999)])[0].payload == {"i": 0}


def test_a_dropped_handle_frees_the_store(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    backend = EdgeBackend(tmp_path, DIM)
    backend.upsert([point(0, np.eye(DIM)[0], {1: 1.0})])
    del backend  # no close(): the finalizer flushes, closes and unlocks
    assert "was not closed" in caplog.text
    with EdgeBackend(tmp_path, DIM) as again:
        assert again.count() == 1


def test_temporary_store_is_deleted_on_close() -> None:
    backend = EdgeBackend.temporary(DIM)
    where = backend.path
    backend.upsert([point(0, np.eye(DIM)[0], {1: 1.0})])
    assert (where / "shard").is_dir() and (where / "LOCK").is_file()
    backend.close()
    assert not where.exists()


def test_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="temporary"):
        EdgeBackend(":memory:", DIM)
    with pytest.raises(ConfigError, match="needs dim"):
        EdgeBackend(tmp_path / "new", None)
    with pytest.raises(ConfigError, match="dim"):
        EdgeBackend(tmp_path / "new", 0)
    # a failed open leaves the directory unlocked
    EdgeBackend(tmp_path / "new", DIM).close()


def test_schema_and_payload_indexes(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, DIM) as backend:
        schema = backend.shard.info().payload_schema
        assert set(KEYWORD_INDEXES) | set(BOOL_INDEXES) <= set(schema)
        assert schema["agent_id"].data_type == qe.PayloadSchemaType.Keyword
        params = schema["agent_id"].params
        assert isinstance(params, qe.KeywordIndexParams) and params.is_tenant
        assert schema["is_active"].data_type == qe.PayloadSchemaType.Bool
    config = json.loads((tmp_path / "shard" / "edge_config.json").read_text())
    dense = config["vectors"]["dense"]
    assert (dense["size"], dense["distance"]) == (DIM, "Cosine")  # layout: test_edge_memory
    assert config["sparse_vectors"]["bm25"]["modifier"] == "idf"


def test_a_shard_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    shard = qe.EdgeShard.create(str(tmp_path / "shard"), qe.EdgeConfig(
        vectors={"other": qe.EdgeVectorParams(size=4, distance=qe.Distance.Dot)}))
    shard.close()
    with pytest.raises(BackendError, match="not an amem edge store"):
        EdgeBackend(tmp_path, None)
    EdgeBackend.temporary(DIM).close()


def test_meta_file_is_replaced_atomically(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, DIM) as backend:
        backend.write_meta({"embedder": "a", "名": "值"})
        with pytest.raises(ValidationError):
            backend.write_meta({"bad": object()})
        assert backend.read_meta() == {"embedder": "a", "名": "值"}  # the failed write left it whole
        assert sorted(p.name for p in tmp_path.iterdir()) == ["LOCK", "meta.json", "shard"]
        (tmp_path / "meta.json").write_text("[1, 2]")
        with pytest.raises(BackendError, match="JSON object"):
            backend.read_meta()


def test_optimize_keeps_results_in_a_child_process_or_here(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, DIM) as backend:
        backend.upsert(random_points(300, seed=4))
        q = unit(np.random.default_rng(1).normal(size=DIM))
        sq = sparse({0: 1.0, 3: 1.0})
        where = Where()
        before = [h.id for h in backend.hybrid_rrf(q, sq, where, 10, 50)]
        backend.optimize()  # closed, optimized by a child, reopened under our lock
        assert [h.id for h in backend.hybrid_rrf(q, sq, where, 10, 50)] == before
        backend.upsert([point(500, np.eye(DIM)[0], {1: 1.0})])
        backend.optimize(in_process=True)
        backend.flush()
        assert backend.count() == 301
        assert [h.id for h in backend.hybrid_rrf(q, sq, where, 10, 50)][:5] == before[:5]
        assert (tmp_path / "LOCK").read_text().strip() == str(os.getpid())


def test_other_threads_run_and_wait_for_the_store_during_optimize(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, DIM) as backend:
        backend.upsert(random_points(200, seed=6))
        counted: list[int] = []
        ticks: list[float] = []
        started = threading.Event()

        def reader() -> None:
            started.wait()
            counted.append(backend.count())  # waits on the gate while the shard is swapped

        def ticker() -> None:
            started.wait()
            end = time.perf_counter() + 0.3
            while time.perf_counter() < end:
                ticks.append(time.perf_counter())
                time.sleep(0.01)

        threads = [threading.Thread(target=reader), threading.Thread(target=ticker)]
        for t in threads:
            t.start()
        started.set()
        backend.optimize()
        for t in threads:
            t.join()
        assert counted == [200]
        assert len(ticks) > 5  # the child did the work; this process kept running
