"""Exact nearest neighbours above a threshold, by blocked matrix products.

Consolidation needs, for every note of a group, its few nearest notes of the same group whose
cosine reaches the duplicate threshold. Asking the engine once per note costs one exact
(brute-force) query per note: O(n) engine round trips of O(n) work each, 28 minutes at 100k
notes. The run already holds every unit vector of the group in memory, so the same exact
answer is a handful of BLAS matrix products over row blocks, each block's score matrix kept
small enough to bound memory.

Pure functions over arrays: no store, no engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

#: upper bound on the cells of one block's score matrix (float32: 4 bytes each, so 128 MB)
MAX_BLOCK_CELLS = 32_000_000


class NeighbourBlock(NamedTuple):
    """The pairs found for one block of query rows (arrays of equal length)."""

    queried: int  # query rows in this block, for progress
    rows: np.ndarray  # query row of each pair
    neighbours: np.ndarray  # its neighbour row
    scores: np.ndarray  # their dot product


def threshold_neighbours(matrix: np.ndarray, rows: np.ndarray, threshold: float,
                         limit: int, *, max_block_cells: int = MAX_BLOCK_CELLS
                         ) -> Iterator[NeighbourBlock]:
    """For each row index in ``rows``, its best ``limit`` other rows with dot >= ``threshold``.

    Args:
        matrix: ``(n, d)`` unit vectors, so a dot product is a cosine.
        rows: indices into ``matrix`` to query (each is never its own neighbour).
        threshold: the least dot product kept.
        limit: neighbours kept per query row, best first (ties: lower column first).
        max_block_cells: bound on ``block_rows * n``, the size of one score matrix.

    Yields:
        One :class:`NeighbourBlock` per block of query rows (also when it found nothing), its
        pairs sorted by query row then score descending. Exact: every pair is scored.
    """
    if matrix.ndim != 2:
        raise ValueError(f"matrix must be 2-d (n, dim), got shape {matrix.shape}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    n = matrix.shape[0]
    rows = np.asarray(rows, dtype=np.int64)
    if n == 0 or rows.size == 0:
        return
    data = np.ascontiguousarray(matrix, dtype=np.float32)
    block = max(1, min(rows.size, max_block_cells // max(n, 1)))
    for start in range(0, rows.size, block):
        query = rows[start:start + block]
        scores = data[query] @ data.T                      # (b, n)
        scores[np.arange(query.size), query] = -np.inf     # never its own neighbour
        local, cols = np.nonzero(scores >= threshold)
        values = scores[local, cols]
        # by query row, then best score first, then lower column (a stable tie order)
        order = np.lexsort((cols, -values, local))
        local, cols, values = local[order], cols[order], values[order]
        rank = np.arange(local.size) - np.searchsorted(local, local, side="left")
        keep = rank < limit
        yield NeighbourBlock(int(query.size), query[local[keep]], cols[keep], values[keep])


__all__ = ["threshold_neighbours", "NeighbourBlock", "MAX_BLOCK_CELLS"]
