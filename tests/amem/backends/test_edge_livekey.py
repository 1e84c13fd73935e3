"""Every point of an edge store carries its live key (``amem.backends.base.LIVE_KEY``): its agent
and state as one indexed keyword, written with the point and with every write that changes the
state, and given at open to points written before it."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe

from amem.backends import EdgeBackend
from amem.backends.base import (LIVE_KEY, NO_AGENT_KEY, Match, MatchAny, Point, SparseVector,
                                Where, key_agent, lapsed_key, live_key, live_keys)
from amem.kernel.files import FixedFreeSpace, allocates_on_read


def room_to_open_only(store_dir: Path) -> FixedFreeSpace:
    """Room for an open and for nothing it would write: on tmpfs an open claims the holes it
    reads (``EdgeBackend._open``), elsewhere it takes none, and every write asks for
    ``DISK_MARGIN_BYTES`` beyond them. On tmpfs the holes are counted again as the store
    opens, a few pages more than here at times (CI: 4,849,664 needed, 4,825,088 counted), so
    the open gets half the margin beside them: still short of any write's."""
    from amem.backends._edge_space import read_claimed_holes
    from amem.backends.edge import DISK_MARGIN_BYTES, SHARD_DIR

    return FixedFreeSpace(read_claimed_holes(store_dir / SHARD_DIR) + DISK_MARGIN_BYTES // 2
                          if allocates_on_read(store_dir) else 0)


def point(agent: Any = "alice", **payload: Any) -> Point:
    return Point(str(uuid.uuid4()), np.ones(4, dtype=np.float32), SparseVector((1,), (1.0,)),
                 {"agent_id": agent, "is_active": True, **payload})


def key_of(backend: EdgeBackend, pid: str) -> str:
    """The key as stored (reads through the backend leave it out of the payload)."""
    records = backend.shard.retrieve([pid], with_payload=True, with_vector=False)
    payload = records[0].payload
    assert payload is not None
    return str(payload[LIVE_KEY])


def found(backend: EdgeBackend, agent: str, *, current: bool) -> set[str]:
    keys = live_keys(agent, current=current)
    where = Where(must=(MatchAny(LIVE_KEY, keys),))
    return {h.id for h in backend.iterate(where)}


def write_unkeyed(backend: EdgeBackend, points: list[Point]) -> None:
    """Write ``points`` as a store from before the key held them (straight into the engine,
    no key), then close the backend."""
    try:
        backend.shard.update(qe.UpdateOperation.upsert_points(
            [qe.Point(p.id, {"dense": [1.0] * 4, "bm25": qe.SparseVector([1], [1.0])},
                      p.payload) for p in points]))
    finally:
        backend.close()


def test_the_key_says_the_agent_and_the_state() -> None:
    assert live_key({"agent_id": "a", "is_active": True}) == "a"
    assert live_key({"agent_id": "a", "is_active": np.bool_(True), "superseded_by": []}) == "a"
    assert live_key({"agent_id": "a", "is_active": True, "superseded_by": None}) == "a"
    superseded = live_key({"agent_id": "a", "is_active": True, "superseded_by": "n2"})
    inactive = live_key({"agent_id": "a", "is_active": False, "superseded_by": "n2"})
    assert len({"a", superseded, inactive}) == 3
    assert live_keys("a", current=True) == ("a",)
    assert live_keys("a", current=False) == ("a", superseded)
    assert [key_agent(k) for k in ("a", superseded, inactive, NO_AGENT_KEY)] == \
        ["a", "a", "a", None]
    # not active as Match("is_active", True) reads it: a string, a missing field
    assert live_key({"agent_id": "a", "is_active": "true"}) == inactive.replace("n2", "")
    assert live_key({"agent_id": "a"}) == live_key({"agent_id": "a", "is_active": None})
    # no usable agent: a key no agent's read names
    for bad in (None, 7, "", superseded, "x\x1fy"):
        assert live_key({"agent_id": bad, "is_active": True}) == NO_AGENT_KEY


def test_every_write_keeps_the_key_and_reads_never_show_it(tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, 4)
    try:
        live, gone, old, bob = point(), point(is_active=False), point(superseded_by="n9"), \
            point("bob")
        # a key given by the caller is replaced by the one the fields make
        forged = point(**{LIVE_KEY: "bob"})
        backend.upsert([live, gone, old, bob, forged])
        assert backend.store_facts().keyed
        assert found(backend, "alice", current=True) == {live.id, forged.id}
        assert found(backend, "alice", current=False) == {live.id, old.id, forged.id}
        assert found(backend, "bob", current=True) == {bob.id}
        assert all(LIVE_KEY not in h.payload for h in backend.iterate(None))
        assert all(LIVE_KEY not in h.payload for h in backend.retrieve([live.id, old.id]))

        backend.set_payload(live.id, {"is_active": False})  # a delete
        assert live.id not in found(backend, "alice", current=False)
        backend.set_payload(live.id, {"is_active": True})  # brought back
        assert live.id in found(backend, "alice", current=True)
        assert backend.update_point(live.id, {"superseded_by": "n7"})
        assert key_of(backend, live.id) == live_key({"agent_id": "alice", "is_active": True,
                                                     "superseded_by": "n7"})
        assert backend.update_point(old.id, {"superseded_by": None})  # released
        assert found(backend, "alice", current=True) == {old.id, forged.id}
        backend.set_payload(bob.id, {LIVE_KEY: "alice"})  # a forged key alone: computed again
        assert key_of(backend, bob.id) == "bob"
        # a payload write of other fields leaves the key as it was
        backend.set_payload(old.id, {"content": "x"})
        assert key_of(backend, old.id) == "alice"
        # a refused update changes nothing
        assert not backend.update_point(gone.id, {"is_active": True},
                                        where=Where(must=(Match("is_active", True),)))
        assert gone.id not in found(backend, "alice", current=False)
    finally:
        backend.close()


def test_an_older_stores_points_get_their_key_at_open(tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, 4)
    points = [point(), point(is_active=False), point(superseded_by="n1"), point("bob"),
              point(7), point("x\x1fy")]
    write_unkeyed(backend, points)
    backend = EdgeBackend(tmp_path, 4)
    try:
        facts = backend.store_facts()
        assert facts.keyed
        for p in points:
            assert key_of(backend, p.id) == live_key(p.payload)
        assert found(backend, "alice", current=True) == {points[0].id}
        assert found(backend, "alice", current=False) == {points[0].id, points[2].id}
        # each keyed point moved out of the index, counted for the next build
        assert backend.moved_points() == len(points)
    finally:
        backend.close()
    backend = EdgeBackend(tmp_path, 4)  # once: nothing left to key at the next open
    try:
        assert backend.store_facts().keyed and backend.moved_points() == 0
    finally:
        backend.close()


@pytest.mark.parametrize("agent", ["\x1fsuperseded\x1falice", "\x1finactive\x1falice"])
def test_a_raw_agent_id_shaped_like_a_key_never_joins_another_agents_reads(
        tmp_path: Path, agent: str) -> None:
    backend = EdgeBackend(tmp_path, 4)
    try:
        mine, odd = point(), point(agent)
        backend.upsert([mine, odd])
        assert found(backend, "alice", current=False) == {mine.id}
        assert key_of(backend, odd.id) == NO_AGENT_KEY
    finally:
        backend.close()


def test_an_older_store_on_a_full_disk_opens_unkeyed_and_is_keyed_by_the_next_open_with_room(
        tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, 4)
    points = [point(), point(is_active=False), point("bob")]
    write_unkeyed(backend, points)
    # no room for the keys: the store opens all the same, says it is not keyed (searches say
    # every condition, ``amem status`` shows ``filters_keyed`` false), and writes nothing
    backend = EdgeBackend(tmp_path, 4, free_space=room_to_open_only(tmp_path))
    try:
        assert not backend.store_facts().keyed
        assert backend.moved_points() == 0
        assert len(backend.retrieve([p.id for p in points])) == 3
    finally:
        backend.close()
    backend = EdgeBackend(tmp_path, 4)
    try:
        assert backend.store_facts().keyed
        assert found(backend, "alice", current=False) == {points[0].id}
    finally:
        backend.close()


def test_doctor_warns_of_a_store_opened_without_room_for_its_keys(tmp_path: Path) -> None:
    from amem import MemoryStore
    from amem.config import load_config
    from amem.embed.hashing import HashingEmbedder
    from tools.reports import doctor_report

    embedder = HashingEmbedder(dim=16)
    with MemoryStore(tmp_path / "s", config=load_config(), embedder=embedder) as store:
        store.add("A note of alice", agent_id="alice", enrich=False)
        store.add("A note of bob", agent_id="bob", enrich=False)
        clean = doctor_report(store, lambda _: {"ok": True}, {}, clean=False)
        assert not any("live key" in w for w in clean["warnings"])
    backend = EdgeBackend(tmp_path / "s", 16)
    try:  # as a store from before the key: the keys taken off, straight in the engine
        backend.shard.update(qe.UpdateOperation.delete_payload_by_filter(
            qe.Filter(), [LIVE_KEY]))
    finally:
        backend.close()
    unkeyed = EdgeBackend(tmp_path / "s", 16, free_space=room_to_open_only(tmp_path / "s"))
    with MemoryStore(config=load_config(), embedder=embedder, backend=unkeyed) as store:
        assert not store.info().filters_keyed
        report = doctor_report(store, lambda _: {"ok": True}, {}, clean=False)
        assert any("live key" in w for w in report["warnings"]), report["warnings"]
        # the notes are all there and found: every condition is said
        assert [r.content for r in store.search("note", agent_id="bob", limit=5)] == \
            ["A note of bob"]


def test_keys_a_writer_left_stale_are_mended_at_open(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    backend = EdgeBackend(tmp_path, 4)
    deleted, restored, replaced, released, kept = (point(), point(is_active=False),
                                                   point(), point(superseded_by="n1"), point())
    try:
        backend.upsert([deleted, restored, replaced, released, kept, point("bob")])
        # an older version's writes: the state changed, the key left as it was
        for p, change in ((deleted, {"is_active": False}), (restored, {"is_active": True}),
                          (replaced, {"superseded_by": "n2"}), (released, {"superseded_by": None})):
            backend.shard.update(qe.UpdateOperation.set_payload([p.id], change))
        assert deleted.id in found(backend, "alice", current=True)  # stale: would be shown
        assert restored.id not in found(backend, "alice", current=True)  # stale: hidden
    finally:
        backend.close()
    # no room to mend them: the store reads unkeyed (every condition said), nothing written
    backend = EdgeBackend(tmp_path, 4, free_space=room_to_open_only(tmp_path))
    try:
        assert not backend.store_facts().keyed and backend.moved_points() == 0
    finally:
        backend.close()
    with caplog.at_level(logging.WARNING, logger="amem"):
        backend = EdgeBackend(tmp_path, 4)
    # a writer that does not keep the key is news: said
    assert [r for r in caplog.records if "back the live key" in r.getMessage()]
    try:
        assert backend.store_facts().keyed
        assert found(backend, "alice", current=True) == {restored.id, released.id, kept.id}
        assert found(backend, "alice", current=False) == {restored.id, released.id, kept.id,
                                                          replaced.id}
        assert found(backend, "bob", current=True) != set()
        assert backend.moved_points() == 4
    finally:
        backend.close()
    backend = EdgeBackend(tmp_path, 4)  # nothing left to mend
    try:
        assert backend.moved_points() == 0
    finally:
        backend.close()


def test_the_lapsed_key_is_the_expiry_by_the_handles_time_and_an_open_gives_it_back(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert live_key({"agent_id": "a", "is_active": True, "expires_ts": 10.0}) == "a"
    lapsed = live_key({"agent_id": "a", "is_active": True, "expires_ts": 10.0}, 10.0)
    assert key_agent(lapsed) == "a" and lapsed not in live_keys("a", current=False)
    # inactive comes first; a value the range does not match (text, NaN) never lapses
    assert live_key({"agent_id": "a", "is_active": False, "expires_ts": 1.0}, 10.0) \
        == live_key({"agent_id": "a", "is_active": False})
    for never in ("1.0", float("nan"), True, None):
        assert live_key({"agent_id": "a", "is_active": True, "expires_ts": never}, 10.0) == "a"

    backend = EdgeBackend(tmp_path / "s", dim=4)
    soon, late, text, old = (point(expires_ts=100.0), point(expires_ts=300.0),
                             point(expires_ts="100"), point(is_active=False, expires_ts=50.0))
    backend.upsert([soon, late, text, old])
    facts = backend.store_facts()
    # an expiry not a number is said at once (the tracker errs toward saying it) ...
    assert (facts.lapsed_upto, facts.key_expiry_from, facts.expiry_from) == (
        float("-inf"), float("-inf"), float("-inf"))
    assert backend.lapse(99.0)  # ... until a lapse reads the index: no active note to key
    assert backend.store_facts().key_expiry_from == 100.0
    assert key_of(backend, soon.id) == "alice"
    assert backend.lapse(200.0)
    assert key_of(backend, soon.id) == lapsed_key("alice") == lapsed[:-1] + "alice"
    assert {key_of(backend, p.id) for p in (late, text)} == {"alice"}
    assert key_of(backend, old.id) == live_key(old.payload)  # inactive stays inactive
    facts = backend.store_facts()
    assert (facts.lapsed_upto, facts.key_expiry_from) == (200.0, 300.0)
    assert facts.key_hides_expired(250.0) and not facts.key_hides_expired(300.0)
    assert not facts.key_usable(150.0)  # an earlier time cannot name the key
    assert found(backend, "alice", current=True) == {late.id, text.id}
    assert not backend.lapse(150.0)  # and is never keyed back
    # a point written with an expiry already lapsed is keyed lapsed at once
    again = point(expires_ts=150.0)
    backend.upsert([again])
    assert key_of(backend, again.id) == key_of(backend, soon.id)
    assert backend.store_facts().key_expiry_from == 300.0
    backend.close()
    # a new handle knows no lapsed time: its open gives the lapsed keys back (mended), and
    # says nothing of it: every command after a note's expiry warned of "a writer that does
    # not keep the key" before
    with caplog.at_level(logging.WARNING, logger="amem"):
        backend = EdgeBackend(tmp_path / "s", dim=4)
    assert not [r for r in caplog.records if "live key" in r.getMessage()]
    try:
        assert {key_of(backend, p.id) for p in (soon, again)} == {"alice"}
        facts = backend.store_facts()
        assert facts.keyed and facts.lapsed_upto == float("-inf")
        assert not facts.key_hides_expired(200.0)
        assert backend.lapse(200.0)
        assert found(backend, "alice", current=True) == {late.id, text.id}
    finally:
        backend.close()


def test_a_lapse_without_room_keys_nothing_and_reads_say_the_range_until_one_with_room(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    space = FixedFreeSpace(1 << 40)
    backend = EdgeBackend(tmp_path / "s", dim=4, free_space=space)
    try:
        soon, late = point(expires_ts=100.0), point(expires_ts=300.0)
        backend.upsert([soon, late])
        epoch = backend.store_facts().epoch
        space.free = 0
        assert not backend.lapse(200.0)
        assert "not keyed as such" in caplog.text
        facts = backend.store_facts()
        assert key_of(backend, soon.id) == "alice" and backend.moved_points() == 0
        assert facts.epoch == epoch and facts.lapsed_upto == float("-inf")
        assert not facts.key_hides_expired(200.0)  # the range is said
        space.free = 1 << 40
        assert backend.lapse(200.0)
        assert key_of(backend, soon.id) == lapsed_key("alice")
        facts = backend.store_facts()
        assert facts.epoch > epoch and facts.key_hides_expired(200.0)
        assert found(backend, "alice", current=True) == {late.id}
    finally:
        backend.close()
