"""The edge backend knows which live conditions exclude no point (``amem.backends._edge_live``):
counted at open, kept by every write before the engine takes it."""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from amem.backends import EdgeBackend
from amem.backends._edge_live import ACTIVE, EXPIRY, STATES, SUCCESSOR, Known, LiveFacts
from amem.backends.base import Point, SparseVector, StoreFacts, Where
from amem.errors import NotFoundError
from amem.notefields import not_expired


def point(**payload: Any) -> Point:
    return Point(str(uuid.uuid4()), np.ones(4, dtype=np.float32), SparseVector((1,), (1.0,)),
                 {"agent_id": "alice", "is_active": True, **payload})


#: "now" for the expiry (epoch seconds): 1.0e9 has lapsed, 2.0e9 has not
NOW = 1.5e9
FIELDS = STATES | {EXPIRY}


def vacuous(facts: StoreFacts, now: float = NOW) -> set[str]:
    return {name for name, holds in ((ACTIVE, facts.all_active),
                                     (SUCCESSOR, facts.none_superseded),
                                     (EXPIRY, facts.expiry_vacuous(now))) if holds}


def unlapsed(vacuous: frozenset[str], expiry_from: float, epoch: int) -> Known:
    """A reading before any key was lapsed: the key reads the expiry as the range does."""
    return Known(vacuous, expiry_from, -math.inf, expiry_from, epoch)


def test_the_tracker_knows_nothing_until_loaded_and_moves_its_epoch_only_when_a_condition_bites(
) -> None:
    live = LiveFacts()
    assert live.get() == unlapsed(frozenset(), -math.inf, 0)  # not counted yet: all said
    live.load(inactive=0, superseded=0, earliest_expiry=None)
    assert live.get() == unlapsed(STATES, math.inf, 1)
    live.written([{"is_active": True, "superseded_by": None, "supersedes": ["x"]}])
    live.changed({"superseded_by": [], "expires_ts": None, "is_active": np.bool_(True)})
    assert live.get() == unlapsed(STATES, math.inf, 1)  # nothing that could exclude a point
    live.changed({"superseded_by": "n2"})
    assert live.get() == unlapsed(STATES - {SUCCESSOR}, math.inf, 2)
    live.changed({"superseded_by": None})  # cleared: still said until the next open counts
    assert live.get() == unlapsed(STATES - {SUCCESSOR}, math.inf, 2)
    live.written([{"is_active": True, "expires_ts": 2.0e9}, {"is_active": False}])
    assert live.get() == unlapsed(frozenset(), 2.0e9, 3)  # one batch, two conditions: one move
    # a later expiry changes nothing; an earlier one moves the time (and the epoch)
    live.written([{"is_active": False}, {"expires_ts": 3.0e9}])
    assert live.get() == unlapsed(frozenset(), 2.0e9, 3)
    live.changed({"expires_ts": 1.0e9})
    assert live.get() == unlapsed(frozenset(), 1.0e9, 4)
    live.changed({"expires_ts": "soon"})  # not a number: said at once, whatever the time
    assert live.get() == unlapsed(frozenset(), -math.inf, 5)

    live.load(inactive=1, superseded=0, earliest_expiry=None)
    assert live.get().vacuous == {SUCCESSOR} and live.get().expiry_from == math.inf
    live.load(inactive=0, superseded=1, earliest_expiry=7.0)
    assert live.get().vacuous == {ACTIVE} and live.get().expiry_from == 7.0
    # a point written without ``is_active`` (or with a non-boolean) fails Match(True): bites
    live.written([{"agent_id": "alice"}])
    assert live.get().vacuous == set()
    live.load(inactive=0, superseded=0, earliest_expiry=None)
    live.written([{"is_active": "yes"}])
    assert ACTIVE not in live.get().vacuous


def test_what_status_names_as_left_out() -> None:
    assert StoreFacts().left_out(NOW) == []  # nothing known (a Qdrant server): every one said
    assert StoreFacts(sole_agent="a", all_active=True, none_superseded=True,
                      expiry_from=math.inf).left_out(NOW) == ["tenant", "is_active", "expiry",
                                                              "supersession"]
    assert StoreFacts(none_superseded=True).left_out(NOW) == ["supersession"]
    # the expiry until the earliest one comes (the condition hides what lapsed at ``now``)
    assert StoreFacts(expiry_from=2.0e9).left_out(NOW) == ["expiry"]
    assert StoreFacts(expiry_from=2.0e9).left_out(2.0e9) == []


def test_the_backend_counts_them_at_open(tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, 4)
    try:
        assert vacuous(backend.store_facts()) == FIELDS  # empty
        backend.upsert([point(), point(), point()])
        assert vacuous(backend.store_facts()) == FIELDS
        kept = point()
        backend.upsert([kept, point(is_active=False), point(superseded_by="n1"),
                        point(expires_ts=1.0e9), point(expires_ts=2.0e9)])
        assert vacuous(backend.store_facts()) == set()
    finally:
        backend.close()
    backend = EdgeBackend(tmp_path, 4)  # each counted from the engine's indexes
    try:
        assert vacuous(backend.store_facts()) == set()
        assert backend.store_facts().expiry_from == 1.0e9  # the earliest
        stored = backend.scroll(None, limit=100)[0]
        inactive, superseded, expiring = (
            next(h.id for h in stored if holds(h.payload))
            for holds in (lambda p: p.get("is_active") is False,
                          lambda p: bool(p.get("superseded_by")),
                          lambda p: p.get("expires_ts") == 1.0e9))
        epoch = backend.store_facts().epoch
        backend.delete([inactive])
        # a hard delete has the facts counted afresh at the next read (the epoch moves: a
        # reader that began before the count reads again, never wrongly)
        after = backend.store_facts()
        assert vacuous(after) == {ACTIVE} and after.epoch > epoch
        backend.delete([superseded])
        backend.delete([expiring])  # a run of deletes: one count at the next read
        assert vacuous(backend.store_facts()) == FIELDS
        assert backend.store_facts().expiry_from == 2.0e9  # the one left has not come
    finally:
        backend.close()
    backend = EdgeBackend(tmp_path, 4)
    try:
        assert vacuous(backend.store_facts()) == FIELDS  # the next open counts afresh too
        backend.set_payload(kept.id, {"superseded_by": None, "expires_ts": None})
        assert vacuous(backend.store_facts()) == FIELDS  # clearing writes change nothing
        backend.set_payload(kept.id, {"superseded_by": "n1"})
        backend.set_payload(kept.id, {"superseded_by": None})
        # cleared, but said until the facts are counted again (a delete, or the next open)
        assert vacuous(backend.store_facts()) == FIELDS - {SUCCESSOR}
        other = point()
        backend.upsert([other])
        backend.delete([other.id])
        assert vacuous(backend.store_facts()) == FIELDS
    finally:
        backend.close()


WRITES: dict[str, tuple[str, Callable[[EdgeBackend, str], Any]]] = {
    "set_payload is_active": (ACTIVE, lambda b, pid: b.set_payload(pid, {"is_active": False})),
    "update_point is_active": (ACTIVE, lambda b, pid: b.update_point(pid, {"is_active": False})),
    "set_payload superseded_by": (SUCCESSOR,
                                  lambda b, pid: b.set_payload(pid, {"superseded_by": "n9"})),
    "update_point superseded_by": (SUCCESSOR,
                                   lambda b, pid: b.update_point(pid, {"superseded_by": "n9"})),
    "set_payload expires_ts": (EXPIRY, lambda b, pid: b.set_payload(pid, {"expires_ts": 5.0})),
    "update_point expires_ts": (EXPIRY, lambda b, pid: b.update_point(pid, {"expires_ts": 5.0})),
    "upsert over the point": (ACTIVE, lambda b, pid: b.upsert(
        [Point(pid, np.ones(4, dtype=np.float32), SparseVector((1,), (1.0,)),
               {"agent_id": "alice", "is_active": False})])),
}


@pytest.mark.parametrize("kind", list(WRITES))
def test_each_write_that_can_make_a_condition_bite_moves_the_epoch_first(
        tmp_path: Path, kind: str) -> None:
    field, write = WRITES[kind]
    backend = EdgeBackend(tmp_path, 4)
    try:
        target = point()
        backend.upsert([target, point()])
        before = backend.store_facts()
        assert vacuous(before) == FIELDS
        write(backend, target.id)
        after = backend.store_facts()
        assert vacuous(after) == FIELDS - {field}
        assert after.epoch == before.epoch + 1
        # the same kind of write again moves nothing: the condition is said already
        write(backend, target.id)
        assert backend.store_facts().epoch == after.epoch
    finally:
        backend.close()


def test_a_write_the_engine_refuses_still_errs_toward_saying_the_condition(tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, 4)
    try:
        backend.upsert([point()])
        # no such point: nothing was written, and the condition is said from now on anyway
        assert backend.update_point(str(uuid.uuid4()), {"is_active": False}) is False
        assert vacuous(backend.store_facts()) == FIELDS  # update_point checks before the write
        with pytest.raises(NotFoundError):
            backend.set_payload(str(uuid.uuid4()), {"is_active": False})
        assert ACTIVE not in vacuous(backend.store_facts())
    finally:
        backend.close()


def test_at_open_a_point_without_is_active_bites_and_an_expiry_no_range_reads_does_not(
        tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, 4)
    try:
        bare, odd = point(), point(expires_ts="soon")
        del bare.payload["is_active"]
        backend.upsert([bare, odd, point()])
        assert vacuous(backend.store_facts()) == {SUCCESSOR}  # the writes erred toward saying
    finally:
        backend.close()
    backend = EdgeBackend(tmp_path, 4)
    try:
        # a point lacking ``is_active`` fails Match(True): said; an expiry no range matches
        # never hides a point (the expiry condition is a range), so it is left out
        assert vacuous(backend.store_facts()) == {SUCCESSOR, EXPIRY}
        live = Where(must=(not_expired(datetime.now(timezone.utc)),))
        assert backend.count(live) == backend.count(None) == 3
    finally:
        backend.close()


def test_the_tracker_keeps_the_time_keys_are_lapsed_up_to_and_the_next_expiry_after_it() -> None:
    live = LiveFacts()
    live.load(inactive=0, superseded=0, earliest_expiry=100.0)
    assert live.get() == Known(STATES, 100.0, -math.inf, 100.0, 1)
    live.lapsed(150.0, 300.0)  # the notes of 100 now carry the lapsed key; the next is 300
    assert live.get() == Known(STATES, 100.0, 150.0, 300.0, 2)
    # a note written with an expiry already lapsed is keyed lapsed: only the range's time moves
    live.written([{"is_active": True, "expires_ts": 50.0}])
    assert live.get() == Known(STATES, 50.0, 150.0, 300.0, 3)
    live.written([{"is_active": True, "expires_ts": 150.0}])  # at the time itself: lapsed too
    assert live.get() == Known(STATES, 50.0, 150.0, 300.0, 3)
    # one after it, before the next: the key no longer hides every expired note from then on
    live.changed({"expires_ts": 200.0})
    assert live.get() == Known(STATES, 50.0, 150.0, 200.0, 4)
    live.changed({"expires_ts": "soon"})  # not a number: the key's expiry is said at once
    assert live.get().key_expiry_from == -math.inf
    # a recount after deletes knows the time keys are lapsed up to, and is told the next
    live.load(inactive=0, superseded=0, earliest_expiry=120.0, earliest_after_lapsed=None)
    assert live.get() == Known(STATES, 120.0, 150.0, math.inf, 6)
    live.lapsed(100.0, None)  # an earlier time never lowers it
    assert live.get().lapsed_upto == 150.0
