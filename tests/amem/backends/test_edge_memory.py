"""The edge store's memory layout: float vectors on disk, int8 copies in RAM, old stores moved over."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import qdrant_edge as qe

from amem.backends import EdgeBackend
from amem.backends.base import Point, Where

from ._data import point, random_points, sparse, unit

#: wide vectors, so a few hundred points pass the engine's indexing threshold (10 MB of
#: vectors) and ``optimize`` builds an HNSW segment, the only kind that holds quantized copies
WIDE = 4096
POINTS = 700


def _quantized_files(path: Path) -> list[Path]:
    return sorted((path / "shard" / "segments").glob("*/vector_storage-dense/quantized.data"))


def _cosine_top(points: list[Point], query: np.ndarray, k: int) -> list[str]:
    matrix = np.stack([p.dense for p in points])
    order = np.argsort(-(matrix @ query))[:k]
    return [points[i].id for i in order]


def test_a_new_store_keeps_float_vectors_on_disk_and_int8_copies_in_ram(tmp_path: Path) -> None:
    with EdgeBackend(tmp_path, 8):
        pass
    config = json.loads((tmp_path / "shard" / "edge_config.json").read_text())
    dense = config["vectors"]["dense"]
    assert dense["memory"] == "cold"
    assert dense["quantization_config"] == {"scalar": {"type": "int8", "quantile": 0.99,
                                                       "memory": "pinned"}}
    assert config["payload_memory"] == "cold"


def _with_neighbours(seed: int) -> tuple[list[Point], list[np.ndarray]]:
    """Random points, and queries each with ten planted neighbours at clearly different
    distances (the rest of a random 4096-d set sits at cosine ~0, where even an exact
    ranking is a coin toss)."""
    rng = np.random.default_rng(seed)
    points = random_points(POINTS, seed=seed, dim=WIDE)
    queries = []
    for q in range(4):
        query = unit(rng.normal(size=WIDE))
        queries.append(query)
        for k in range(10):
            near = unit(query + (0.15 + 0.12 * k) * unit(rng.normal(size=WIDE)))
            points.append(point(10_000 + 10 * q + k, near, {2: 1.0}))
    return points, queries


def test_optimized_search_rescores_the_int8_candidates_with_the_float_vectors(tmp_path: Path) -> None:
    points, queries = _with_neighbours(11)
    with EdgeBackend(tmp_path, WIDE) as backend:
        backend.upsert(points)
        backend.optimize(in_process=True)
        assert len(_quantized_files(tmp_path)) == 1  # the HNSW segment holds the int8 copies
        for query in queries:
            hits = backend.dense_search(query, Where(), 10)
            assert [h.id for h in hits] == _cosine_top(points, query, 10)
            # the scores are the float vectors' (rescored), not the int8 copies' estimates
            exact = {p.id: float(p.dense @ query) for p in points}
            assert all(abs(h.score - exact[h.id]) < 1e-5 for h in hits)
            # search's one batch (both legs and the sparse hits' cosines) rescores too
            legs = backend.search_legs(query, sparse({2: 1.0}), Where(), 10)
            assert [h.id for h in legs.dense] == [h.id for h in hits]
            assert all(abs(h.score - exact[h.id]) < 1e-5 for h in legs.dense)
            assert legs.sparse_cosines
            assert all(abs(cos - exact[pid]) < 1e-5 for pid, cos in legs.sparse_cosines.items())
            # an exact search reads every float vector: the whole ranking is the floats'
            every = backend.dense_search(query, Where(), POINTS + 40, exact=True)
            assert [h.id for h in every][:10] == [h.id for h in hits]
            assert all(abs(h.score - exact[h.id]) < 1e-5 for h in every)


def test_a_store_created_before_is_moved_to_the_layout_at_its_next_optimize(tmp_path: Path) -> None:
    old = qe.EdgeConfig(  # what a store was created with before the layout
        vectors={"dense": qe.EdgeVectorParams(size=WIDE, distance=qe.Distance.Cosine)},
        sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        wal_enabled=True,
    )
    qe.EdgeShard.create(str(tmp_path / "shard"), old).close()
    points = random_points(POINTS, seed=12, dim=WIDE)
    with EdgeBackend(tmp_path, WIDE) as backend:
        backend.upsert(points)
    config_file = tmp_path / "shard" / "edge_config.json"
    # opened once: the layout is in its config; the segments are rebuilt by optimize
    assert json.loads(config_file.read_text())["vectors"]["dense"]["memory"] == "cold"
    query = unit(points[3].dense)
    with EdgeBackend(tmp_path, None) as backend:
        before = [h.id for h in backend.hybrid_rrf(query, sparse({0: 1.0}), Where(), 10, 50)]
        backend.optimize()
        assert len(_quantized_files(tmp_path)) == 1
        assert [h.id for h in backend.hybrid_rrf(query, sparse({0: 1.0}), Where(), 10, 50)] == before
        assert [h.id for h in backend.dense_search(query, Where(), 10)] == _cosine_top(points, query, 10)
        backend.upsert([point(POINTS + 1, np.ones(WIDE), {1: 1.0})])
        assert backend.count() == POINTS + 1
