"""Deterministic points for the backend tests: seeded random vectors, no ties in any ranking."""

from __future__ import annotations

import uuid

import numpy as np

from amem.backends.base import Point, SparseVector

DIM = 16


def pid(n: int) -> str:
    """A stable UUID for the n-th test point (sorts in n order)."""
    return str(uuid.UUID(int=n + 1))


def unit(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to length 1 as float32."""
    arr = np.asarray(v, dtype=np.float32)
    out: np.ndarray = arr / np.linalg.norm(arr)
    return out


def sparse(terms: dict[int, float]) -> SparseVector:
    """A SparseVector from ``{index: value}``."""
    keys = sorted(terms)
    return SparseVector(tuple(keys), tuple(float(terms[k]) for k in keys))


def point(num: int, dense: np.ndarray, terms: dict[int, float], /, **payload: object) -> Point:
    """A point with id ``pid(num)``."""
    return Point(pid(num), unit(dense), sparse(terms), dict(payload))


def random_points(count: int, seed: int, vocab: int = 400, dim: int = DIM) -> list[Point]:
    """``count`` points with Gaussian dense vectors and 3-12 Zipf-ish terms with real weights."""
    rng = np.random.default_rng(seed)
    points = []
    for n in range(count):
        k = int(rng.integers(3, 13))
        # Zipf-like term choice gives common and rare terms, so IDF matters.
        terms = np.unique(np.minimum(rng.zipf(1.3, size=k), vocab) - 1)
        weights = rng.uniform(0.5, 2.0, size=len(terms))
        payload = {"agent_id": f"agent-{n % 3}", "n": n, "is_active": n % 5 != 0}
        points.append(Point(pid(n), unit(rng.normal(size=dim)), sparse(dict(zip(terms.tolist(), weights.tolist()))),
                            payload))
    return points


def random_query(seed: int, vocab: int = 400, dim: int = DIM) -> tuple[np.ndarray, SparseVector]:
    """A dense query and a 2-4 term sparse query (term weights 1, like a BM25 query)."""
    rng = np.random.default_rng(seed)
    terms = np.unique(np.minimum(rng.zipf(1.3, size=int(rng.integers(2, 5))), vocab) - 1)
    return unit(rng.normal(size=dim)), sparse({int(t): 1.0 for t in terms})
