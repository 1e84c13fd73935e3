"""readpath_cpu --cold: the store's files leave the page cache, the payload may come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.readpath_cpu import COLD, evict, measure


def store_like(root: Path) -> dict[str, int]:
    files = {"shard/segments/s1/payload_storage/page_0.dat": 3000,
             "shard/segments/s1/vector_storage-dense/matrix.dat": 5000,
             "shard/segments/s2/payload_storage/page_0.dat": 700, "meta.json": 10}
    for name, size in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    return files


def test_every_file_is_dropped_and_only_the_payload_is_read_back(tmp_path: Path) -> None:
    files = store_like(tmp_path)
    assert evict(tmp_path, "all") == {"dropped_bytes": sum(files.values()),
                                      "read_back_bytes": 0}
    assert evict(tmp_path, "payload") == {"dropped_bytes": sum(files.values()),
                                          "read_back_bytes": 3700}
    assert all((tmp_path / name).stat().st_size == size for name, size in files.items())


def test_an_unknown_cold_mode_is_refused_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cold must be one of"):
        measure(tmp_path, 1, 1, cold="warm")
    assert "payload" in COLD and "all" in COLD
