"""Congruence: the same scenario on every engine returns the same ids in the same order.

Edge is exact before ``optimize()`` (plain segments are brute force) and qdrant-client's local
mode is exact, so dense, sparse and hybrid rankings must agree id for id. The scenario avoids
exact score ties (random real-valued vectors and weights); RRF can still tie by construction
(rank 3 in one list only scores the same wherever it comes from), so hybrid rankings are
tie groups are put in id order by the backends; only the last group, which the limit may cut
at different members, can hold different ids.
"""

from __future__ import annotations

from collections.abc import Iterator
import uuid
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from amem.backends import EdgeBackend, QdrantServerBackend
from amem.backends.base import Hit, IsEmpty, Match, MatchAny, VectorBackend, Where

from ._data import DIM, random_points, random_query

POINTS = 300
FILTERS = [
    None,
    Where(must=(Match("agent_id", "agent-1"),)),
    Where(must=(Match("is_active", True), MatchAny("agent_id", ("agent-0", "agent-2")))),
    Where(should=(Match("agent_id", "agent-2"), IsEmpty("missing")), must_not=(Match("is_active", False),)),
]


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory, qdrant_test_url: str | None) -> Iterator[list[VectorBackend]]:
    """The same 300 points (minus a few deletes and with payload edits) in edge, local mode and,
    when ``AMEM_TEST_QDRANT_URL`` is set, a server (300 points stay under its full-scan threshold,
    so it is exact too)."""
    points = random_points(POINTS, seed=1234)
    collection = f"amem_congruence_{uuid.uuid4().hex[:12]}"
    built: list[VectorBackend] = [
        EdgeBackend(Path(tmp_path_factory.mktemp("edge")), DIM),
        QdrantServerBackend.local(":memory:", dim=DIM),
    ]
    if qdrant_test_url is not None:
        built.append(QdrantServerBackend.from_url(qdrant_test_url, collection=collection, dim=DIM))
    for backend in built:
        for start in range(0, POINTS, 128):
            backend.upsert(points[start:start + 128])
        backend.delete([points[7].id, points[100].id])
        backend.set_payload(points[11].id, {"agent_id": "agent-1", "is_active": True})
    yield built
    for backend in built:
        backend.close()
    if qdrant_test_url is not None:
        client = QdrantClient(url=qdrant_test_url)
        for name in (collection, collection + "__meta"):
            client.delete_collection(name)
        client.close()


def ranked(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in hits]


def assert_same_ranking(a: list[Hit], b: list[Hit], *, ties: bool = False) -> None:
    """Same ids in the same order with the same scores (within float32 noise)."""
    assert len(a) == len(b)
    assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=2e-5)
    if not ties:
        assert [h.id for h in a] == [h.id for h in b]
        return
    last = next(i for i, h in enumerate(a) if h.score == a[-1].score)
    assert [h.id for h in a[:last]] == [h.id for h in b[:last]]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("where", FILTERS, ids=["all", "agent", "active-any", "nested"])
def test_dense_sparse_and_hybrid_agree(engines: list[VectorBackend], seed: int, where: Where | None) -> None:
    dense, sparse = random_query(seed)
    edge, *others = engines
    for other in others:
        assert_same_ranking(edge.dense_search(dense, where, 25), other.dense_search(dense, where, 25))
        assert_same_ranking(edge.sparse_search(sparse, where, 25), other.sparse_search(sparse, where, 25))
        assert_same_ranking(
            edge.hybrid_rrf(dense, sparse, where, 25, 40), other.hybrid_rrf(dense, sparse, where, 25, 40), ties=True
        )


def test_counts_scrolls_and_payloads_agree(engines: list[VectorBackend]) -> None:
    edge, *others = engines
    for other in others:
        for where in FILTERS:
            assert edge.count(where) == other.count(where)
            assert [(h.id, h.payload) for h in edge.iterate(where, batch=64)] == \
                   [(h.id, h.payload) for h in other.iterate(where, batch=64)]
