"""The edge store's segment limit: a build merges segments only up to ``segment_kb`` of float
vectors, so its memory follows that limit, not the store's size (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import qdrant_edge as qe

from amem.backends import EdgeBackend
from amem.backends.base import Where
from amem.backends.edge import SEGMENT_KB
from amem.errors import ConfigError

from ._data import random_points, unit

#: wide vectors, so a few hundred points pass the engine's indexing threshold (10 MB of
#: vectors) and ``optimize`` builds an HNSW segment (16 KB of vectors a point)
WIDE = 4096
BATCH = 700
#: room for one batch's segment, not for two merged
LIMIT_KB = 16 * 1000


def _segment_points(path: Path) -> list[int]:
    """The points of each indexed (HNSW) segment of a closed store, from its float vector
    file's length (the engine removes the directories of replaced segments at close)."""
    sizes = []
    for index in (path / "shard" / "segments").glob("*/vector_index-dense"):
        matrix = index.parent / "vector_storage-dense" / "matrix.dat"
        sizes.append(matrix.stat().st_size // (4 * WIDE))
    return sorted(sizes)


def test_a_build_does_not_merge_segments_past_the_limit(tmp_path: Path) -> None:
    points = random_points(2 * BATCH, seed=21, dim=WIDE)
    with EdgeBackend(tmp_path, WIDE, segment_kb=LIMIT_KB) as backend:
        assert backend.segment_points == 1000
        backend.upsert(points[:BATCH])
        backend.optimize(in_process=True)
        backend.upsert(points[BATCH:])
        backend.optimize(in_process=True)
        # two batches merged would pass the limit: the second is a segment of its own, next
        # to the first and the appendable one (without the limit the engine merged them
        # into one segment of 1,400 points: two segments in all)
        assert backend.shard.info().segments_count == 3
        assert backend.count() == 2 * BATCH
        # searches span both segments
        for probe in (points[5], points[BATCH + 5]):
            hits = backend.dense_search(unit(probe.dense), Where(), 3)
            assert hits[0].id == probe.id and abs(hits[0].score - 1.0) < 1e-4
    assert _segment_points(tmp_path) == [BATCH, BATCH]


def test_a_new_store_is_created_with_the_default_limit(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, 384) as backend:
        assert backend.segment_kb == SEGMENT_KB
        assert backend.segment_points == SEGMENT_KB * 1024 // (4 * 384)  # 68,266
    config = json.loads((tmp_path / "shard" / "edge_config.json").read_text())
    assert config["optimizers"]["max_segment_size"] == SEGMENT_KB


def test_a_store_without_a_limit_is_given_one_and_a_store_keeps_its_own(tmp_path: Path) -> None:
    without = qe.EdgeConfig(  # the layout as it was before the limit
        vectors={"dense": qe.EdgeVectorParams(
            size=8, distance=qe.Distance.Cosine, memory=qe.Memory.Cold,
            quantization_config=qe.ScalarQuantizationConfig(
                type=qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Pinned))},
        sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        payload_memory=qe.Memory.Cold, wal_enabled=True,
    )
    qe.EdgeShard.create(str(tmp_path / "shard"), without).close()
    config_file = tmp_path / "shard" / "edge_config.json"
    assert "max_segment_size" not in config_file.read_text()
    with EdgeBackend(tmp_path, 8, segment_kb=5000) as backend:
        backend.upsert(random_points(10, seed=3, dim=8))
        assert backend.segment_kb == 5000
    assert json.loads(config_file.read_text())["optimizers"]["max_segment_size"] == 5000
    # opened again with another limit: the store's own stays (its segments were built so)
    with EdgeBackend(tmp_path, None, segment_kb=9000) as backend:
        assert backend.segment_kb == 5000 and backend.count() == 10
    assert json.loads(config_file.read_text())["optimizers"]["max_segment_size"] == 5000


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "100"])
def test_a_bad_limit_is_refused_naming_it(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError, match="segment_kb") as caught:
        EdgeBackend(tmp_path, 8, segment_kb=bad)  # type: ignore[arg-type]
    assert caught.value.key == "segment_kb"
    assert not (tmp_path / "shard").exists()


def test_segment_points_never_reaches_zero(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, 4096, segment_kb=1) as backend:
        assert backend.segment_points == 1


def test_the_store_setting_reaches_a_new_store_and_an_old_store_keeps_its_own(
        tmp_path: Path) -> None:
    """``segment_mb`` (TOML, ``AMEM_SEGMENT_MB``) sets the limit of a store being created; a
    store opened later keeps the limit it was created with, whatever the setting says then."""
    from amem import MemoryStore, load_config
    from amem.embed.hashing import HashingEmbedder

    with MemoryStore(tmp_path / "s", config=load_config(overrides={"segment_mb": 3}),
                     embedder=HashingEmbedder(64)) as store:
        store.add("the build memory follows the segment it writes")
        backend = store.index.backend
        assert isinstance(backend, EdgeBackend) and backend.segment_kb == 3 * 1024
    with MemoryStore(tmp_path / "s", config=load_config(overrides={"segment_mb": 7}),
                     embedder=HashingEmbedder(64)) as store:
        backend = store.index.backend
        assert isinstance(backend, EdgeBackend) and backend.segment_kb == 3 * 1024
    with pytest.raises(ConfigError, match="segment_mb"):
        load_config(overrides={"segment_mb": 0})
