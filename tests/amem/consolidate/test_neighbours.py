"""The blocked exact neighbour search against a brute-force reference."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from amem.consolidate.neighbours import NeighbourBlock, threshold_neighbours


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _clustered(seed: int, n: int = 300, dim: int = 16) -> np.ndarray:
    """Unit vectors in tight clusters, so many pairs clear a high threshold."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng, n // 6, dim)
    m = centres[rng.integers(0, len(centres), n)] + 0.08 * rng.normal(size=(n, dim))
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _reference(matrix: np.ndarray, rows: np.ndarray, threshold: float,
               limit: int) -> list[tuple[int, int, float]]:
    out = []
    for r in rows.tolist():
        scored = [(float(matrix[r] @ matrix[c]), c) for c in range(len(matrix)) if c != r]
        kept = sorted((s, c) for s, c in scored if s >= threshold)
        kept.sort(key=lambda sc: (-sc[0], sc[1]))
        out.extend((r, c, s) for s, c in kept[:limit])
    return out


def _flatten(blocks: Iterator[NeighbourBlock]) -> list[tuple[int, int, float]]:
    triples = []
    for block in blocks:
        triples.extend(zip(block.rows.tolist(), block.neighbours.tolist(), block.scores.tolist()))
    return triples


@pytest.mark.parametrize("block_cells", [1, 301, 10_000, 10**9])
@pytest.mark.parametrize("limit", [1, 3, 50])
def test_matches_brute_force_for_any_block_size(block_cells: int, limit: int) -> None:
    matrix = _clustered(seed=limit)
    rows = np.arange(len(matrix))
    got = _flatten(threshold_neighbours(matrix, rows, 0.8, limit, max_block_cells=block_cells))
    want = _reference(matrix, rows, 0.8, limit)
    # the data really has rows with more qualifying pairs than the limit keeps
    assert len(_reference(matrix, rows, 0.8, 10**6)) > len(matrix) * min(limit, 3)
    assert [(q, c) for q, c, _ in got] == [(q, c) for q, c, _ in want]
    assert np.allclose([s for *_, s in got], [s for *_, s in want], atol=1e-5)


def test_only_the_asked_rows_are_queried_and_never_match_themselves() -> None:
    matrix = _clustered(seed=3)
    rows = np.array([5, 17, 250])
    got = _flatten(threshold_neighbours(matrix, rows, -1.0, 1000))
    assert {q for q, _, _ in got} == {5, 17, 250}
    assert all(q != c for q, c, _ in got)
    assert len(got) == 3 * (len(matrix) - 1)  # threshold -1: every other row qualifies


def test_identical_vectors_are_neighbours_at_cosine_one() -> None:
    matrix = np.tile(np.array([[0.6, 0.8]], dtype=np.float32), (3, 1))
    got = _flatten(threshold_neighbours(matrix, np.arange(3), 0.999, 8))
    assert sorted((q, c) for q, c, _ in got) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert all(s == pytest.approx(1.0) for *_, s in got)


def test_empty_inputs_yield_nothing() -> None:
    assert list(threshold_neighbours(np.zeros((0, 4), np.float32), np.arange(0), 0.5, 3)) == []
    assert list(threshold_neighbours(np.eye(3, dtype=np.float32), np.arange(0), 0.5, 3)) == []


def test_every_block_reports_its_query_rows_for_progress() -> None:
    # orthogonal rows: no pairs at all, yet every block says how many rows it queried
    blocks = list(threshold_neighbours(np.eye(10, dtype=np.float32), np.arange(10), 0.5, 3,
                                       max_block_cells=30))
    assert [b.queried for b in blocks] == [3, 3, 3, 1]
    assert all(b.rows.size == 0 for b in blocks)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="limit must be at least 1"):
        list(threshold_neighbours(np.eye(3, dtype=np.float32), np.arange(3), 0.5, 0))
    with pytest.raises(ValueError, match="2-d"):
        list(threshold_neighbours(np.ones(3, np.float32), np.arange(3), 0.5, 2))
