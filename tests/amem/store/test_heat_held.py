"""A search's retrieval counts are held in memory by the edge backend until the store persists
its writes (``amem.backends._edge_heat``): every read shows them at once, the engine gets them
in one batch, and a write that carries the counts itself wins over what is held."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from amem import MemoryStore
from amem.backends import _edge_heat
from amem.backends.base import Point, SparseVector
from amem.backends.edge import EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.notes import point_id

NOTES = [("tea", "Alice prefers green tea over coffee"),
         ("bike", "Bob rides a blue bicycle to work"),
         ("db", "The staging database runs PostgreSQL 16")]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(str(tmp_path / "store"), embedder=HashingEmbedder(), agent_id="a") as s:
        for nid, text in NOTES:
            s.add(text, id=nid, enrich=False)
        yield s


def _engine_payload(store: MemoryStore, note_id: str) -> dict[str, Any]:
    """The payload as the engine holds it, past the backend's reads."""
    backend = store.index.backend
    assert isinstance(backend, EdgeBackend)
    (record,) = backend.shard.retrieve([point_id("a", note_id)], with_payload=True,
                                       with_vector=False)
    return dict(record.payload or {})


def _searched(store: MemoryStore, query: str, note_id: str) -> None:
    assert note_id in [r.id for r in store.search(query, limit=1)]


def test_a_search_count_is_read_at_once_and_written_at_flush(store: MemoryStore) -> None:
    before = store.get("bike")
    _searched(store, "blue bicycle", "bike")
    _searched(store, "bicycle to work", "bike")
    # on the code before, each search wrote the engine's payload (and moved the point out of
    # an optimized segment): here the engine has not been written yet
    assert _engine_payload(store, "bike")["retrieval_count"] == before.retrieval_count
    after = store.get("bike")
    assert after.retrieval_count == before.retrieval_count + 2
    assert after.last_accessed >= before.last_accessed
    assert store.get("tea").retrieval_count == before.retrieval_count  # not returned
    backend = store.index.backend
    page, _ = backend.scroll(None, limit=10)  # export and consolidation read whole pages
    assert {h.payload["id"]: h.payload["retrieval_count"] for h in page}["bike"] == 2
    only_ids, _ = backend.scroll(None, limit=10, fields=["id"])
    assert all(set(h.payload) == {"id"} for h in only_ids)  # nothing added to a narrow read
    store.flush()
    assert _engine_payload(store, "bike")["retrieval_count"] == 2
    assert _engine_payload(store, "bike")["last_accessed"] == after.last_accessed


def test_counts_survive_close_and_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    with MemoryStore(path, embedder=HashingEmbedder(), agent_id="a") as s:
        s.add(NOTES[1][1], id="bike", enrich=False)
        _searched(s, "blue bicycle", "bike")
    with MemoryStore(path, embedder=HashingEmbedder(), agent_id="a") as s:
        assert s.get("bike").retrieval_count == 1


def test_a_write_carrying_the_counts_wins_and_a_delete_drops_them(store: MemoryStore) -> None:
    backend = store.index.backend
    pid = point_id("a", "bike")
    _searched(store, "blue bicycle", "bike")
    backend.set_payload(pid, {"retrieval_count": 7, "category": "Transport"})  # a merge's sum
    assert store.get("bike").retrieval_count == 7
    _searched(store, "blue bicycle", "bike")
    assert store.get("bike").retrieval_count == 8
    (hit,) = backend.retrieve([pid])
    hit.payload["retrieval_count"] = 3  # a whole point written again (an import, an update)
    (full,) = backend.retrieve([pid], with_vectors=True)
    assert full.dense is not None
    backend.upsert([Point(pid, full.dense, SparseVector((1,), (1.0,)), hit.payload)])
    assert store.get("bike").retrieval_count == 3
    _searched(store, "staging database", "db")
    store.delete("db")
    backend.delete([point_id("a", "db")])
    store.flush()  # the held count of a point gone meanwhile is skipped, not an error
    assert store.get("bike").retrieval_count == 3


def test_held_counts_are_written_past_the_cap(store: MemoryStore,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_edge_heat, "MAX_PENDING", 2)
    _searched(store, "blue bicycle", "bike")
    assert _engine_payload(store, "bike")["retrieval_count"] == 0
    _searched(store, "green tea", "tea")  # the second held point: both written
    assert _engine_payload(store, "bike")["retrieval_count"] == 1
    assert _engine_payload(store, "tea")["retrieval_count"] == 1
    backend = store.index.backend
    assert isinstance(backend, EdgeBackend) and len(backend._heat) == 0


def test_held_counts_are_written_once_the_oldest_has_waited() -> None:
    """A long-lived server killed without closing loses at most ``MAX_AGE_S`` of heat: the
    first search after the oldest held count has waited that long writes them all."""
    from amem.backends._edge_heat import PendingHeat

    now = [0.0]
    held = PendingHeat(max_age_s=300.0, clock=lambda: now[0])
    assert held.record("p1", {"retrieval_count": 1}) is False
    now[0] = 299.0
    assert held.record("p2", {"retrieval_count": 1}) is False
    now[0] = 300.0
    assert held.record("p1", {"retrieval_count": 2}) is True
    assert sorted(pid for pids, _ in held.take() for pid in pids) == ["p1", "p2"]
    now[0] = 301.0  # the clock of a new batch starts at its first count
    assert held.record("p3", {"retrieval_count": 1}) is False
