"""``search_legs``: a search's two rankings and the BM25 hits' cosines in one round trip, on
every engine; and ``generation``, which says when a read may be kept."""

from __future__ import annotations

import numpy as np
import pytest

from amem.backends import EdgeBackend
from amem.backends.base import Hit, Match, VectorBackend, Where
from amem.errors import ValidationError

from .conftest import Factory
from ._data import DIM, pid, random_points, sparse, unit

WHERE = Where(must=(Match("agent_id", "agent-1"), Match("is_active", True)))


def test_the_legs_equal_the_two_queries_and_the_cosines_the_stored_vectors(
        backend: VectorBackend) -> None:
    points = random_points(90, seed=3)
    backend.upsert(points)
    rng = np.random.default_rng(11)
    vectors = {p.id: p.dense for p in points}
    for _ in range(5):
        qvec = unit(rng.normal(size=DIM))
        terms = sparse({0: 1.0, 1: 0.7, 4: 0.3})
        legs = backend.search_legs(qvec, terms, WHERE, 10, fields=("n",))
        dense = backend.dense_search(qvec, WHERE, 10, fields=("n",))
        bm25 = backend.sparse_search(terms, WHERE, 10, fields=("n",))
        assert [(h.id, h.payload) for h in legs.dense] == [(h.id, h.payload) for h in dense]
        assert [(h.id, h.payload) for h in legs.sparse] == [(h.id, h.payload) for h in bm25]
        assert np.allclose([h.score for h in legs.dense], [h.score for h in dense], atol=1e-6)
        assert np.allclose([h.score for h in legs.sparse], [h.score for h in bm25], atol=1e-5)
        # every BM25 hit has its cosine, the one its stored vector gives
        assert set(legs.sparse_cosines) == {h.id for h in bm25}
        for hid, cos in legs.sparse_cosines.items():
            assert cos == pytest.approx(float(np.dot(qvec, vectors[hid])), abs=1e-5)


def test_legs_given_the_bm25_hits_equal_the_legs_that_run_the_sparse_query(
        backend: VectorBackend) -> None:
    """A search reads the BM25 leg while its query is embedded (``amem.search.beside``) and
    hands the hits to ``search_legs``: what comes back is what one batch of both gives."""
    points = random_points(90, seed=12)
    backend.upsert(points)
    rng = np.random.default_rng(13)
    for _ in range(5):
        qvec = unit(rng.normal(size=DIM))
        terms = sparse({0: 1.0, 2: 0.5, 5: 0.4})
        both = backend.search_legs(qvec, terms, WHERE, 10, fields=("n",))
        bm25 = backend.sparse_search(terms, WHERE, 10, fields=("n",))
        given = backend.search_legs(qvec, None, WHERE, 10, fields=("n",), sparse_hits=bm25)
        assert given.sparse == bm25
        assert [(h.id, h.payload) for h in given.dense] == [(h.id, h.payload) for h in both.dense]
        assert set(given.sparse_cosines) == set(both.sparse_cosines) == {h.id for h in bm25}
        for hid, cos in given.sparse_cosines.items():
            assert cos == pytest.approx(both.sparse_cosines[hid], abs=1e-6)
    empty = backend.search_legs(qvec, None, WHERE, 10, sparse_hits=[])
    assert empty.sparse == [] and empty.sparse_cosines == {} and len(empty.dense) == 10


def test_bm25_hits_read_with_their_vectors_are_the_same_hits_carrying_the_stored_vectors(
        backend: VectorBackend) -> None:
    """``with_vectors`` (a search reads them beside the embedding) changes nothing else."""
    points = random_points(90, seed=21)
    backend.upsert(points)
    stored = {p.id: p.dense for p in points}
    terms = sparse({0: 1.0, 3: 0.6, 7: 0.2})
    for fields in (("n",), None):
        plain = backend.sparse_search(terms, WHERE, 10, fields=fields)
        carried = backend.sparse_search(terms, WHERE, 10, fields=fields, with_vectors=True)
        assert len(plain) == 10
        assert [(h.id, h.payload) for h in carried] == [(h.id, h.payload) for h in plain]
        assert np.allclose([h.score for h in carried], [h.score for h in plain], atol=1e-6)
        assert all(h.dense is None for h in plain)
        for h in carried:  # the engine keeps them unit length, as the test points are
            assert h.dense is not None and np.allclose(h.dense, stored[h.id], atol=1e-6)
        # read again: the same vectors (the embedded engine answers from its field cache)
        again = backend.sparse_search(terms, WHERE, 10, fields=fields, with_vectors=True)
        assert all(np.array_equal(a.dense, b.dense) for a, b in zip(again, carried))


def test_a_given_hit_carrying_its_vector_is_scored_from_that_vector(
        backend: VectorBackend) -> None:
    """The legs score a hit that carries its vector from it (no query over its id), one that
    carries none from the engine; both give the engine's cosine when the vector is the
    stored one."""
    points = random_points(90, seed=22)
    backend.upsert(points)
    terms = sparse({1: 1.0, 2: 0.5})
    qvec = unit(np.random.default_rng(23).normal(size=DIM))
    plain = backend.sparse_search(terms, WHERE, 10, fields=("n",))
    carried = backend.sparse_search(terms, WHERE, 10, fields=("n",), with_vectors=True)
    by_engine = backend.search_legs(qvec, None, WHERE, 10, fields=("n",), sparse_hits=plain)
    by_vector = backend.search_legs(qvec, None, WHERE, 10, fields=("n",), sparse_hits=carried)
    assert set(by_vector.sparse_cosines) == set(by_engine.sparse_cosines) == {h.id for h in plain}
    for hid, cos in by_vector.sparse_cosines.items():
        assert cos == pytest.approx(by_engine.sparse_cosines[hid], abs=1e-6)
    # a hit carrying another vector than the stored one is scored from what it carries
    dense_ids = {h.id for h in by_engine.dense}
    alone = next(h for h in carried if h.id not in dense_ids)
    other = unit(np.random.default_rng(24).normal(size=DIM))
    swapped = [Hit(id=h.id, score=h.score, payload=h.payload,
                   dense=other if h.id == alone.id else h.dense) for h in carried]
    legs = backend.search_legs(qvec * 3.0, None, WHERE, 10, fields=("n",), sparse_hits=swapped)
    assert legs.sparse_cosines[alone.id] == pytest.approx(float(np.dot(qvec, other)), abs=1e-6)
    assert legs.sparse_cosines[alone.id] != pytest.approx(by_engine.sparse_cosines[alone.id],
                                                          abs=1e-3)


def test_legs_refuse_a_sparse_vector_and_the_hits_together(backend: VectorBackend) -> None:
    points = random_points(5, seed=14)
    backend.upsert(points)
    with pytest.raises(ValidationError, match="not both"):
        backend.search_legs(points[0].dense, points[0].sparse, None, 3, sparse_hits=[])


def test_legs_without_terms_give_the_dense_ranking_only(backend: VectorBackend) -> None:
    backend.upsert(random_points(30, seed=4))
    qvec = unit(np.arange(1, DIM + 1, dtype=np.float32))
    for terms in (None, sparse({})):
        legs = backend.search_legs(qvec, terms, WHERE, 5)
        assert legs.sparse == [] and legs.sparse_cosines == {}
        assert [h.id for h in legs.dense] == [h.id for h in backend.dense_search(qvec, WHERE, 5)]
        assert "n" in legs.dense[0].payload  # no fields: the whole payload


def test_the_edge_generation_moves_with_every_write_a_filter_sees() -> None:
    backend = EdgeBackend.temporary(DIM)
    try:
        seen = [backend.generation()]

        def moved() -> bool:
            seen.append(backend.generation())
            return seen[-1] != seen[-2]

        points = random_points(5, seed=5)
        backend.upsert(points)
        assert moved()
        backend.search_legs(points[0].dense, points[0].sparse, None, 3)
        backend.scroll(None)
        assert not moved()  # reads change nothing
        backend.set_payload(pid(1), {"retrieval_count": 3, "last_accessed": "2026-01-01"})
        assert not moved()  # held retrieval counts: no filter names them
        backend.set_payload(pid(1), {"is_active": False})
        assert moved()
        assert backend.update_point(pid(2), {"superseded_by": "x"})
        assert moved()
        assert not backend.update_point("00000000-0000-0000-0000-0000000000ff", {"a": 1})
        assert not moved()  # nothing written
        backend.delete([pid(3)])
        assert moved()
        backend.optimize()
        assert moved()
    finally:
        backend.close()


# the server kinds only: the edge engine has a single writer, its generation is a number
@pytest.mark.parametrize("kind", ["qdrant-local", "qdrant-server"], indirect=True)
def test_a_server_backend_keeps_nothing(make_backend: Factory, kind: str) -> None:
    backend = make_backend()
    assert backend.generation() is None


@pytest.mark.parametrize("reader", ["legs", "dense search", "sparse search"])
def test_the_edge_reads_keep_the_ranking_fields_and_never_show_them_stale(reader: str) -> None:
    """The reads that take named fields from the field cache: the legs, a dense search (step
    4b's neighbours) and a sparse search (the BM25 leg read beside the embedding)."""
    backend = EdgeBackend.temporary(DIM)
    try:
        points = random_points(30, seed=6)
        for p in points:
            p.payload["agent_id"] = "agent-1"
            p.payload["is_active"] = True
        backend.upsert(points)
        qvec, terms = points[4].dense, points[4].sparse
        fields = ("n", "tag")

        def read(keys: tuple[str, ...]) -> list[Hit]:
            if reader == "dense search":
                return backend.dense_search(qvec, WHERE, 30, exact=True, fields=keys)
            if reader == "sparse search":
                return backend.sparse_search(terms, WHERE, 30, fields=keys)
            legs = backend.search_legs(qvec, terms, WHERE, 30, fields=keys)
            return [*legs.dense, *legs.sparse]

        def shown(pid_: str) -> dict[str, object]:
            return {h.id: h.payload for h in read(fields)}.get(pid_, {"gone": True})

        first = shown(pid(4))
        assert first == {"n": 4}
        misses = backend.field_cache.misses
        assert shown(pid(4)) == {"n": 4}
        assert backend.field_cache.misses == misses  # the second time no payload is read
        backend.set_payload(pid(4), {"tag": "a"})
        assert shown(pid(4)) == {"n": 4, "tag": "a"}
        assert backend.update_point(pid(4), {"tag": "b"})
        assert shown(pid(4)) == {"n": 4, "tag": "b"}
        backend.upsert([points[4]])  # the whole point again: its payload has no tag
        assert shown(pid(4)) == {"n": 4}
        # held retrieval counts show through a kept payload, and after they are written
        counts = ("n", "retrieval_count")
        assert {h.payload.get("retrieval_count") for h in read(counts) if h.id == pid(4)} == {None}
        backend.set_payload(pid(4), {"retrieval_count": 7, "last_accessed": "2026-01-01"})
        for _ in range(2):  # held, then written by flush
            seen = [h.payload for h in read(counts) if h.id == pid(4)]
            assert seen and all(p == {"n": 4, "retrieval_count": 7} for p in seen)
            backend.flush()
        backend.delete([pid(4)])
        assert shown(pid(4)) == {"gone": True}
        assert len(backend.field_cache) > 0
        backend.optimize()
        assert len(backend.field_cache) == 0  # a rebuilt shard keeps nothing
    finally:
        backend.close()


def test_the_field_cache_stays_within_its_capacity() -> None:
    from amem.backends._edge_fields import FieldCache

    cache = FieldCache(capacity=3)
    for n in range(5):
        cache.put(("a",), f"p{n}", {"a": n})
    cache.put(("b",), "p9", {"b": 1})
    assert len(cache) == 3  # the oldest of the largest table went first: p0, p1, p2
    found, missing = cache.get(("a",), ["p0", "p2", "p3", "p4"])
    assert missing == ["p0", "p2"] and found == {"p3": {"a": 3}, "p4": {"a": 4}}
    cache.forget(["p4", "p9"])
    assert len(cache) == 1 and cache.get(("b",), ["p9"])[1] == ["p9"]


def test_the_edge_backend_keeps_read_vectors_and_never_shows_them_stale() -> None:
    """Vectors read without payloads (step 4c's head) are kept; a write of the point's vector
    (an upsert, a vector update) or its deletion is never hidden by what was kept."""
    backend = EdgeBackend.temporary(DIM)
    try:
        points = random_points(6, seed=8)
        backend.upsert(points)

        def vector(n: int) -> np.ndarray | None:
            hits = backend.retrieve([pid(n)], with_vectors=True, with_payload=False)
            return hits[0].dense if hits else None

        first = vector(1)
        assert first is not None and np.allclose(first, points[1].dense)
        assert backend.field_cache.kept_vectors() == 1
        misses = backend.field_cache.misses
        assert np.allclose(vector(1), points[1].dense)
        assert backend.field_cache.misses == misses  # kept: the engine was not asked
        with pytest.raises(ValueError):  # a kept vector is shared: nobody may change it
            first[0] = 9.0
        new = unit(np.arange(1, DIM + 1, dtype=np.float32))
        assert backend.update_point(pid(1), {}, dense=new)
        assert np.allclose(vector(1), new)
        again = random_points(6, seed=9)[1]
        backend.upsert([again])
        assert np.allclose(vector(1), again.dense)
        backend.delete([pid(1)])
        assert vector(1) is None
        # several at once keep the asked order, kept and read ones mixed
        assert vector(2) is not None
        hits = backend.retrieve([pid(3), pid(1), pid(2)], with_vectors=True, with_payload=False)
        assert [h.id for h in hits] == [pid(3), pid(2)]
        assert np.allclose(hits[1].dense, points[2].dense)
        backend.optimize()
        assert backend.field_cache.kept_vectors() == 0  # a rebuilt shard keeps nothing
    finally:
        backend.close()


def test_the_kept_vectors_stay_within_their_capacity() -> None:
    from amem.backends._edge_fields import FieldCache

    cache = FieldCache(capacity=3, vector_capacity=2)
    for n in range(3):
        cache.put_vector(f"p{n}", np.full(4, float(n), dtype=np.float32))
    assert cache.kept_vectors() == 2
    found, missing = cache.get_vectors(["p0", "p1", "p2"])
    assert missing == ["p0"] and sorted(found) == ["p1", "p2"]  # the oldest went first
    cache.forget(["p1"])
    assert cache.get_vectors(["p1"])[1] == ["p1"]
    cache.clear()
    assert cache.kept_vectors() == 0


def test_ids_cut_from_the_engine_points_equal_their_uuids_as_text() -> None:
    """``_text_ids`` reads a bare point's id from its repr; anything else falls back."""
    import uuid

    import qdrant_edge as qe

    from amem.backends import edge

    backend = EdgeBackend.temporary(DIM)
    try:
        points = random_points(12, seed=10)
        for p in points:
            p.payload["event_ts"] = float(p.payload["n"])  # type: ignore[arg-type]
        backend.upsert(points)
        scored = backend.shard.query(qe.QueryRequest(
            limit=12, query=qe.Query.Nearest(points[0].dense.tolist(), using=edge.DENSE),
            with_payload=False))
        records = backend.shard.retrieve([p.id for p in points], with_payload=False,
                                         with_vector=False)
        for bare in (scored, records):
            assert len(bare) == 12
            assert edge._text_ids(bare) == [str(p.id) for p in bare]
        assert [t for _, t in backend.times(None, "event_ts", 20)] == [float(n) for n in range(12)]
    finally:
        backend.close()

    class Other:  # a repr of another shape: the id is read the slow way
        def __init__(self, n: int) -> None:
            self.id = uuid.UUID(int=n)

        def __repr__(self) -> str:
            return f"Point(id={self.id.int})"

    assert edge._text_ids([Other(3)]) == [str(uuid.UUID(int=3))]
