"""A search's engine calls: the BM25 leg, then the dense leg and the cosines in one batch;
the lapsed successors kept between writes.

The lapsed successors (successors that expired or were deleted while still listing what they
replaced) were read from the engine at every search, a scan of the tenant's points; now they
are kept until a write or the next successor's expiry can change them. These tests pin the
calls a search makes and that the kept set is never stale: time passing, each kind of write.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock


class CountingBackend:
    """An edge engine that counts the calls made on it."""

    def __init__(self, inner: EdgeBackend) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


def make_store() -> tuple[MemoryStore, CountingBackend, ManualClock]:
    clock = ManualClock("2026-01-10T12:00:00+00:00")
    embedder = HashingEmbedder(dim=64)
    engine = CountingBackend(EdgeBackend.temporary(embedder.dim))
    store = MemoryStore(config=load_config(), embedder=embedder, clock=clock,
                        backend=engine)  # type: ignore[arg-type]
    return store, engine, clock


def ids(store: MemoryStore, query: str) -> set[str]:
    return {r.id for r in store.search(query, limit=10, expand_links=False)}


def supersede(store: MemoryStore, old: str, new: str) -> None:
    store.index.update_payload(old, store.agent_id, {"superseded_by": new})
    store.index.update_payload(new, store.agent_id, {"supersedes": [old]})


def bob_moves(store: MemoryStore, moved: str = "Bob moved to the Hermes team",
              **kwargs: Any) -> None:
    """b1 (Bob's old team) replaced by b2 (``moved``, added with ``kwargs``): search shows b2."""
    store.add("Bob works in the Apollo team", id="b1", enrich=False)
    store.add(moved, id="b2", enrich=False, **kwargs)
    supersede(store, "b1", "b2")
    assert ids(store, "Bob team") == {"b2"}


def test_a_search_makes_one_batch_and_reads_the_lapsed_successors_once_between_writes() -> None:
    store, engine, _ = make_store()
    with store:
        bob_moves(store)
        engine.calls.clear()
        for _ in range(3):
            assert ids(store, "Bob team") == {"b2"}
        # per search: the BM25 leg (read while the query is embedded), one batch of the dense
        # leg and the BM25 hits' cosines, one read of the matches' payloads
        assert engine.calls["sparse_search"] == 3
        assert engine.calls["search_legs"] == 3
        assert engine.calls["retrieve"] == 3
        # no dense leg by itself, no vector read, and the successors not read again (no
        # write); step 4b reads the event times around the best matches from their index
        assert not {"dense_search", "scroll", "iterate"} & set(engine.calls)
        assert engine.calls["times"] == 3


def test_the_kept_successors_follow_the_clock() -> None:
    store, _, clock = make_store()
    with store:
        bob_moves(store, "Bob moved to the Hermes team for a week", ttl=600)
        clock.advance(seconds=599)
        assert ids(store, "Bob team") == {"b2"}
        clock.advance(seconds=1)  # b2 expires now, no write in between: b1 is current again
        assert ids(store, "Bob team") == {"b1"}
        clock.advance(seconds=-1)  # a clock set back before that read: b2 hides b1 again
        assert ids(store, "Bob team") == {"b2"}


def test_the_kept_successors_follow_every_write() -> None:
    store, _, clock = make_store()
    with store:
        bob_moves(store)
        # a successor deactivated while it still lists b1 (an interrupted delete) releases it
        store.index.update_payload("b2", store.agent_id, {"is_active": False})
        assert ids(store, "Bob team") == {"b1"}
        store.index.update_payload("b2", store.agent_id, {"is_active": True})
        assert ids(store, "Bob team") == {"b2"}
        # an expiry set on the successor afterwards, already passed
        store.index.update_payload("b2", store.agent_id, {
            "expires_at": "2026-01-10T11:00:00+00:00", "expires_ts": clock.now().timestamp() - 1})
        assert ids(store, "Bob team") == {"b1"}
        # a new successor of b1 without expiry hides it again
        store.add("Bob leads the Vesta team", id="b3", enrich=False)
        supersede(store, "b1", "b3")
        assert ids(store, "Bob team") == {"b3"}
        # and the proper delete releases it
        store.delete("b3")
        assert "b1" in ids(store, "Bob team")
