"""Reads that return only some payload keys (the read path's candidates), on every engine."""

from __future__ import annotations

import numpy as np
import pytest

from amem.backends.base import Match, VectorBackend, Where
from amem.errors import ValidationError

from ._data import DIM, pid, point

E = np.eye(DIM, dtype=np.float32)


def fill(backend: VectorBackend) -> None:
    backend.upsert([point(n, E[n], {n: 1.0, 9: 0.5}, n=n, name=f"p{n}", big="x" * 50)
                    for n in range(3)])


def test_queries_and_scroll_return_only_the_named_keys(backend: VectorBackend) -> None:
    fill(backend)
    dense = backend.dense_search(E[1], None, 3, fields=["n", "absent"])
    assert dense[0].id == pid(1) and dense[0].payload == {"n": 1}
    assert all(set(h.payload) == {"n"} for h in dense)
    sparse = backend.sparse_search(point(9, E[0], {1: 1.0}).sparse, None, 3, fields=("name",))
    assert [h.payload for h in sparse] == [{"name": "p1"}]
    page, _ = backend.scroll(Where(must=(Match("n", 2),)), limit=5, fields=("n", "name"))
    assert [h.payload for h in page] == [{"n": 2, "name": "p2"}]
    # None still means the whole payload
    assert backend.dense_search(E[0], None, 1)[0].payload == {"n": 0, "name": "p0", "big": "x" * 50}


def test_retrieve_without_payload_gives_the_vectors_only(backend: VectorBackend) -> None:
    fill(backend)
    (hit,) = backend.retrieve([pid(2)], with_vectors=True, with_payload=False)
    assert hit.payload == {}
    assert hit.dense is not None and np.allclose(hit.dense, E[2])
    # several at once: in the order asked, a missing id left out, each its own vector
    hits = backend.retrieve([pid(2), pid(7), pid(0), pid(1)], with_vectors=True,
                            with_payload=False)
    assert [h.id for h in hits] == [pid(2), pid(0), pid(1)]
    for h, n in zip(hits, (2, 0, 1)):
        assert h.payload == {} and h.dense is not None and np.allclose(h.dense, E[n])


@pytest.mark.parametrize("fields", [[], "n", [""], [1]])
def test_bad_field_lists_are_rejected(backend: VectorBackend, fields: object) -> None:
    fill(backend)
    with pytest.raises(ValidationError) as err:
        backend.dense_search(E[0], None, 1, fields=fields)  # type: ignore[arg-type]
    assert err.value.field == "fields"
    with pytest.raises(ValidationError):
        backend.sparse_search(point(9, E[0], {1: 1.0}).sparse, None, 1,
                              fields=fields)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        backend.scroll(None, fields=fields)  # type: ignore[arg-type]
