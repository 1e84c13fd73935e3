"""The contract of the ``Range`` filter node, on every engine: numeric bounds, indexed or not."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from amem.backends.base import Hit, Match, Range, VectorBackend, Where
from amem.errors import ValidationError

from ._data import DIM, pid, point, sparse

E = np.eye(DIM, dtype=np.float32)

# ``event_ts`` is a float-indexed field (FLOAT_INDEXES); ``x`` is not indexed at all.
RANGE_POINTS: list[tuple[int, dict[str, Any]]] = [
    (0, {"agent_id": "a", "event_ts": 100.0, "x": 1}),
    (1, {"agent_id": "a", "event_ts": 200.5, "x": 2.5}),
    (2, {"agent_id": "b", "event_ts": 300.0, "x": -3}),
    (3, {"agent_id": "b"}),  # neither field: never in a range
    (4, {"agent_id": "c", "event_ts": "300", "x": "2"}),  # strings are not numbers
]


def ids(hits: list[Hit]) -> list[str]:
    return [h.id for h in hits]


@pytest.fixture(scope="module")
def ranged(shared_backend: VectorBackend) -> VectorBackend:
    shared_backend.upsert([point(n, E[n], {n: 1.0, 50: 1.0}, **p) for n, p in RANGE_POINTS])
    return shared_backend


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (Where(must=(Range("event_ts", gte=200.5),)), {1, 2}),
        (Where(must=(Range("event_ts", gt=200.5),)), {2}),
        (Where(must=(Range("event_ts", lt=200.5),)), {0}),
        (Where(must=(Range("event_ts", lte=200.5),)), {0, 1}),
        (Where(must=(Range("event_ts", gte=100, lt=300),)), {0, 1}),
        (Where(must=(Range("event_ts", gt=1e9),)), set()),
        (Where(must=(Range("x", gte=0),)), {0, 1}),  # an unindexed field, ints and floats
        (Where(must=(Range("x", lte=-3),)), {2}),
        # the expiry shape the store uses: no number at or below now (missing passes)
        (Where(must_not=(Range("event_ts", lte=200.5),)), {2, 3, 4}),
        (Where(must=(Match("agent_id", "a"), Where(must_not=(Range("event_ts", lte=100),)))), {1}),
    ],
)
def test_range_nodes(ranged: VectorBackend, where: Where, expected: set[int]) -> None:
    want = sorted(pid(n) for n in expected)
    assert [h.id for h in ranged.iterate(where)] == want
    assert ranged.count(where) == len(expected)
    assert sorted(ids(ranged.dense_search(E[0], where, 10))) == want
    assert sorted(ids(ranged.sparse_search(sparse({50: 1.0}), where, 10))) == want
    assert sorted(ids(ranged.hybrid_rrf(E[0], sparse({50: 1.0}), where, 10, 10))) == want


@pytest.mark.parametrize(
    "node",
    [
        Range("event_ts"),  # no bound at all
        Range("event_ts", gte=float("nan")),
        Range("event_ts", lt=float("inf")),
        Range("event_ts", gte="1"),  # type: ignore[arg-type]
        Range("event_ts", gte=True),
        Range("", gte=1.0),
    ],
)
def test_bad_ranges_are_rejected_naming_where(ranged: VectorBackend, node: Range) -> None:
    with pytest.raises(ValidationError) as err:
        ranged.count(Where(must=(node,)))
    assert err.value.field == "where"
