"""The page cache around an index build: the engine evicts the segments it builds, the store
reads them back, so the first searches after ``optimize()`` do not wait for the disk."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from pathlib import Path

import pytest

from amem.backends import EdgeBackend, _edge_build

from ._data import random_points

#: wide vectors, so a few hundred points pass the engine's indexing threshold and
#: ``optimize`` writes a new (HNSW) segment
WIDE = 4096
POINTS = 700

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="page-cache residency is read with Linux's mincore")


def _resident_bytes(path: Path) -> int:
    """Bytes of ``path`` in the page cache (mincore over a read-only shared map of it)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap of {path}")
        try:
            flags = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, flags) != 0:
                raise OSError(ctypes.get_errno(), f"mincore of {path}")
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(f & 1 for f in flags) * page


def _segment_files(store: Path) -> dict[Path, str]:
    """The files searches read (every segment's payloads and float vectors), each with the
    segment it belongs to."""
    segments = store / "shard" / "segments"
    files = [*segments.glob("*/payload_storage/*.dat"),
             *segments.glob("*/vector_storage-dense/**/*.mmap"),
             *segments.glob("*/vector_storage-dense/matrix.dat")]
    return {p: p.relative_to(segments).parts[0] for p in sorted(files)}


def _allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def _cached_share(files: list[Path]) -> float:
    """The share of the files' data in the page cache (a partly used last page counts whole)."""
    allocated = sum(_allocated(p) for p in files)
    assert allocated > 0, "the files hold no data"
    return sum(min(_resident_bytes(p), _allocated(p)) for p in files) / allocated


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "child"])
def test_optimize_leaves_the_segments_it_built_in_the_page_cache(tmp_path: Path,
                                                                  in_process: bool) -> None:
    with EdgeBackend(tmp_path, WIDE) as backend:
        backend.upsert(random_points(POINTS, seed=5, dim=WIDE))
        backend.flush()
        before = set(_segment_files(tmp_path).values())
        backend.optimize(in_process=in_process)
        built = [p for p, seg in _segment_files(tmp_path).items() if seg not in before]
        assert built, "optimize wrote no new segment: the test store is too small"
        assert _cached_share(built) >= 0.99
        assert backend.count() == POINTS


def test_read_ahead_reads_each_files_data_once_and_skips_holes_and_links(tmp_path: Path) -> None:
    root = tmp_path / "shard"
    (root / "a" / "b").mkdir(parents=True)
    (root / "one.dat").write_bytes(b"x" * 5000)
    (root / "a" / "b" / "two.dat").write_bytes(b"y" * 7000)
    (tmp_path / "outside").write_bytes(b"z" * 9000)
    (root / "link").symlink_to(tmp_path / "outside")  # not part of the shard: not followed
    sparse = root / "a" / "sparse.dat"
    with open(sparse, "wb") as f:  # 8 KB of data, a hole, 4 KB of data, a hole to 8 MB
        f.write(b"d" * 8192)
        f.seek(4 << 20)
        f.write(b"e" * 4096)
        f.truncate(8 << 20)
    if _allocated(sparse) >= sparse.stat().st_size:
        pytest.skip("this file system stores no holes")
    assert _edge_build.read_ahead(root, chunk=4096) == 5000 + 7000 + 8192 + 4096
    # a budget stops the read where it is spent, mid-file
    assert _edge_build.read_ahead(root, chunk=4096, budget=10_000) == 10_000


def test_read_ahead_puts_a_closed_stores_files_back_in_the_page_cache(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, WIDE) as backend:
        backend.upsert(random_points(POINTS, seed=6, dim=WIDE))
    files = list(_segment_files(tmp_path))
    assert files
    _edge_build.read_ahead(tmp_path / "shard" / "segments")
    assert _cached_share(files) >= 0.99


def test_keeping_the_ranking_fields_reads_a_reopened_store_back_into_the_page_cache(
        disk_tmp_path: Path) -> None:
    """What ``amem serve`` does on open: a restarted server's store was evicted by the previous
    process's close; the table's fill reads the segments back before its first pass."""
    tmp_path = disk_tmp_path  # a tmpfs keeps its pages: nothing would be evicted
    with EdgeBackend(tmp_path, WIDE) as backend:
        backend.upsert(random_points(POINTS, seed=7, dim=WIDE))
    files = list(_segment_files(tmp_path))
    # the mechanism this guards against: the engine dropped the files as it closed the shard
    if _cached_share(files) >= 0.5:
        pytest.skip("the store's files stayed in the page cache at close (a tmpfs cannot drop "
                    "them, or the engine no longer evicts): there is nothing to read back")
    with EdgeBackend(tmp_path, WIDE) as backend:
        assert backend.keep_fields(["n"], 10_000)
        table = backend.field_table(wait=30)
        assert table is not None and table["state"] == "filled"
        assert _cached_share(list(_segment_files(tmp_path))) >= 0.99  # as the engine has them now
        assert table["read_back_mb"] >= 10  # 700 vectors of 4,096 floats: 11 MB


def test_read_ahead_ends_when_cancelled(tmp_path: Path) -> None:
    (tmp_path / "a.dat").write_bytes(b"x" * 50_000)
    checks: list[int] = []

    def cancelled() -> bool:
        checks.append(1)
        return len(checks) > 3

    assert _edge_build.read_ahead(tmp_path, chunk=4096, cancelled=cancelled) == 3 * 4096
