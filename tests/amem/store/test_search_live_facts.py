"""A search leaves out the live conditions no note fails, and never shows a note that one
written during it excludes.

On a plain segment the engine checks every condition against every point it scans
(``amem.backends._edge_live``): ``is_active``, the expiry range and ``IsEmpty("superseded_by")``
cost a third more than no filter at 100k points, and the tenant beside any of them doubles
the scan. While every note is active, none expires and none is replaced, those conditions
exclude nothing; a write that changes that moves the backend's epoch before the engine takes
it, and a search that left the condition out runs again with it said.
"""

from __future__ import annotations

import math
from datetime import timedelta
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pytest

from amem import MemoryStore
from amem.backends import EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.notefields import iso
from amem.notes import point_id

from amem.backends.base import LIVE_KEY

from .test_read_path_indexed import FILTER_KINDS, fields_of
from .test_search_sole_tenant import NOTES, TenantSwitch, filled

LIVE = {"is_active", "expires_ts", "superseded_by"}


def test_a_fresh_store_is_searched_without_its_live_conditions_and_finds_the_same() -> None:
    embedder = HashingEmbedder(dim=64)
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder) as store:  # type: ignore[arg-type]
        facts = engine.inner.store_facts()
        assert facts.all_active and facts.expiry_from == math.inf and facts.none_superseded
        for kind, options in FILTER_KINDS.items():
            shown = {}
            for said in (False, True):
                engine.named = engine.live = said
                engine.legs.clear()
                found = store.search("Apollo launch budget", limit=4, heat=False, **options)
                assert len(engine.legs) == 1, kind
                named = fields_of(engine.legs[0]) if engine.legs[0] is not None else set()
                # every live condition said, or none (include_superseded never names one)
                expected = LIVE - ({"superseded_by"} if options.get("include_superseded")
                                   else set())
                assert (named & LIVE) == (expected if said else set()), (kind, said, named)
                shown[said] = [(r.id, round(r.score, 9)) for r in found]
            assert shown[False] == shown[True], kind


def test_a_store_of_two_agents_with_deleted_and_replaced_notes_names_one_key_and_finds_the_same(
) -> None:
    embedder = HashingEmbedder(dim=64)
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder) as store:  # type: ignore[arg-type]
        bobs = store.add("Apollo launch budget of another agent", agent_id="bob", enrich=False)
        store.delete("n3")
        supersede(store, "n1")
        facts = engine.inner.store_facts()
        assert facts.keyed and facts.sole_agent is None
        assert not facts.all_active and not facts.none_superseded
        assert store.info().filters_keyed
        for kind, options in FILTER_KINDS.items():
            shown = {}
            for said in (False, True):
                engine.named = engine.live = said  # said: the last tree's four conditions
                engine.legs.clear()
                found = store.search("Apollo launch budget", limit=6, heat=False, **options)
                named = fields_of(engine.legs[0])
                if said:
                    assert {"agent_id", "is_active"} <= named and LIVE_KEY not in named, kind
                else:  # the tenant, the state and the successor in one condition
                    assert LIVE_KEY in named, kind
                    assert not named & {"agent_id", "is_active", "superseded_by"}, (kind, named)
                ids = [r.id for r in found]
                assert "n3" not in ids and bobs.id not in ids, kind
                if not options.get("include_superseded"):
                    assert "n1" not in ids, kind
                shown[said] = [(r.id, round(r.score, 9)) for r in found]
            assert shown[False] == shown[True], kind


class HostileEmbedder(HashingEmbedder):
    """Embeds as the hashing embedder; at the first query embedding armed, ``act`` runs first
    (what another thread's delete, supersession or expiry could do at that moment)."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.act: Callable[[], Any] | None = None

    def embed(self, texts: Sequence[str], kind: Any = "passage") -> np.ndarray:
        if self.act is not None and kind == "query":
            act, self.act = self.act, None
            act()
        return super().embed(texts, kind)


def deactivate(store: MemoryStore, note_id: str) -> None:
    store.delete(note_id)


def supersede(store: MemoryStore, note_id: str) -> None:
    store.index.update_payload(note_id, store.agent_id, {"superseded_by": "n0"})


def expire(store: MemoryStore, note_id: str) -> None:
    past = store.index.clock.now() - timedelta(minutes=1)
    store.index.update_payload(note_id, store.agent_id,
                               {"expires_at": iso(past), "expires_ts": past.timestamp()})


ACTS: dict[str, tuple[str, Callable[[MemoryStore, str], None]]] = {
    "deleted": ("is_active", deactivate),
    "superseded": ("superseded_by", supersede),
    "expired": ("expires_ts", expire),
}


@pytest.mark.parametrize("kind", list(ACTS))
def test_a_note_excluded_during_a_search_is_never_shown(kind: str) -> None:
    field, act = ACTS[kind]
    embedder = HostileEmbedder()
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder) as store:  # type: ignore[arg-type]
        query = "The launch budget for Apollo was approved by finance"
        best = store.search(query, limit=1, heat=False)[0]
        assert best.content == query
        embedder.act = lambda: act(store, best.id)
        engine.legs.clear()
        found = store.search(query, limit=10, heat=False)
        assert embedder.act is None  # the write came during the search
        assert found and best.id not in {r.id for r in found}
        assert all(r.content in NOTES for r in found)
        # the first pass left the condition out, and its legs could see the note; the second
        # said it
        assert [field in fields_of(w) for w in engine.legs] == [False, True]
        # from now on the condition is said from the start; a lapsed note instead gets the
        # lapsed key before the search reads (one condition: the key alone leaves it out)
        engine.legs.clear()
        assert best.id not in {r.id for r in store.search(query, limit=10, heat=False)}
        said = LIVE_KEY if kind == "expired" else field
        assert [said in fields_of(w) for w in engine.legs] == [True]
        assert not any(field in fields_of(w) for w in engine.legs) or kind != "expired"


@pytest.mark.parametrize("kind", ["deleted", "superseded"])
def test_in_a_keyed_store_a_write_during_a_search_changes_the_key_the_dense_leg_reads(
        kind: str) -> None:
    act = ACTS[kind][1]
    embedder = HostileEmbedder()
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder) as store:  # type: ignore[arg-type]
        store.add("A note of another agent", agent_id="bob", enrich=False)
        store.delete("n5")
        supersede(store, "n4")  # both states bite already: the write below moves no epoch
        query = "The launch budget for Apollo was approved by finance"
        best = store.search(query, limit=1, heat=False)[0]
        assert best.content == query
        embedder.act = lambda: act(store, best.id)
        engine.legs.clear()
        engine.dense_ids.clear()
        store.search(query, limit=10, heat=False)
        assert embedder.act is None  # the write came during the search
        # one pass: the write changed the note's key with its state, so the dense leg, which
        # ran after it, did not see the note under its one condition (the BM25 leg ran beside
        # the embedding, before the write: what it read is shown as read, as with every
        # condition said)
        assert [LIVE_KEY in fields_of(w) for w in engine.legs] == [True]
        assert best.id not in engine.dense_ids[0]
        # the next search does not find it at all
        assert best.id not in {r.id for r in store.search(query, limit=10, heat=False)}


def test_the_write_paths_reads_leave_the_live_conditions_out_and_read_again_after_a_delete(
) -> None:
    embedder = HashingEmbedder(dim=64)
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder, agent_id="owner") as store:  # type: ignore[arg-type]
        index = store.index
        asked: list[set[str]] = []
        pending = ["n1"]

        def read(where: Any) -> list[str]:
            asked.append(fields_of(where))
            while pending:  # a note is deleted during the first read
                store.delete(pending.pop())
            return [str(h.payload["id"]) for h in index.backend.scroll(where, limit=100)[0]]

        ids = index.read_tenant("owner", read, current=True)
        # nothing said, then (the epoch moved) every condition
        assert asked == [set(), {"agent_id", *LIVE}]
        assert sorted(ids) == sorted(f"n{i}" for i in range(len(NOTES)) if i != 1)
        # the next read says only what now excludes a note: the tenant is still the only
        # agent, nothing expires and nothing was replaced
        asked.clear()
        assert sorted(index.read_tenant("owner", read, current=True)) == sorted(ids)
        assert asked == [{"is_active"}]


@contextmanager
def reminders(*ttls: int) -> Iterator[tuple[MemoryStore, TenantSwitch, Any, list[Any]]]:
    """A store of two agents: the owner's notes, another agent's reminder, and the owner's
    reminders lapsing after ``ttls`` seconds (the store, its engine, bob's note, the owner's)."""
    embedder = HashingEmbedder(dim=64)
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder) as store:  # type: ignore[arg-type]
        bobs = store.add("A reminder of another agent", agent_id="bob", enrich=False)
        yield store, engine, bobs, [
            store.add(f"A reminder that lapses in {ttl} seconds", enrich=False, ttl=ttl)
            for ttl in ttls]


def test_a_lapsed_note_gets_the_lapsed_key_and_the_key_alone_leaves_it_out_until_the_sweep(
) -> None:
    with reminders(60, 3600) as (store, engine, bobs, (added, later)):
        # until its time comes, the expiry hides nothing: left out, and the note is found
        assert "expiry" in store.info().filters_left_out
        engine.legs.clear()
        found = store.search("reminder", limit=3, heat=False)
        assert fields_of(engine.legs[0]) == {"agent_id"}  # the tenant alone: no key needed
        assert added.id in [r.id for r in found]
        store.index.clock.advance(120)  # type: ignore[attr-defined]
        # lapsed and not yet swept: the search first gives it the lapsed key, then names the
        # key alone (the tenant beside the range doubled a plain segment's scan)
        engine.legs.clear()
        found = store.search("reminder", limit=3, heat=False)
        assert fields_of(engine.legs[0]) == {LIVE_KEY}
        ids = [r.id for r in found]
        assert added.id not in ids and later.id in ids and bobs.id not in ids
        facts = engine.inner.store_facts()
        assert facts.lapsed_upto == store.index.clock.now().timestamp()
        assert facts.key_expiry_from == pytest.approx(
            (store.index.clock.now() + timedelta(seconds=3600 - 120)).timestamp())
        assert "expiry" in store.info().filters_left_out  # the key leaves it out
        # the note itself is unchanged: still there for the sweep, and for include_inactive
        kept = store.get(added.id, include_inactive=True)
        assert kept.is_active and kept.expires_at and kept.content.endswith("in 60 seconds")
        # the second note lapses too: keyed at the next search, which finds neither
        store.index.clock.advance(3600)  # type: ignore[attr-defined]
        engine.legs.clear()
        ids = [r.id for r in store.search("reminder", limit=3, heat=False)]
        assert fields_of(engine.legs[0]) == {LIVE_KEY}
        assert added.id not in ids and later.id not in ids
        assert store.sweep_expired().expired_deleted == 2  # a hard delete
        # the facts are counted afresh at the next read: nothing expires any more
        assert "expiry" in store.info().filters_left_out
        engine.legs.clear()
        store.search("reminder", limit=3, heat=False)
        assert fields_of(engine.legs[0]) == {"agent_id"}


def test_a_search_at_a_time_before_the_lapsed_keys_says_every_condition() -> None:
    """A clock set back (a test clock, a host's time corrected): the lapsed keys would hide a
    note whose expiry is still to come at that time, so the key is not named."""
    with reminders(60, 100) as (store, engine, _, (soon, later)):
        store.index.clock.advance(120)  # type: ignore[attr-defined]
        ids = [r.id for r in store.search("reminder", limit=3, heat=False)]
        assert soon.id not in ids and later.id not in ids  # both keyed lapsed up to +120
        store.index.clock.advance(-40)  # type: ignore[attr-defined]  # +80: only one lapsed
        engine.legs.clear()
        ids = [r.id for r in store.search("reminder", limit=3, heat=False)]
        assert later.id in ids and soon.id not in ids
        assert fields_of(engine.legs[0]) == {"agent_id", "expires_ts"}


def test_a_write_keeps_the_lapsed_key_of_a_note_whose_expiry_came() -> None:
    """A note restored, replaced or written with an expiry already lapsed carries the
    lapsed key the backend's time makes; one whose expiry moves later loses it."""
    with reminders(60, 61) as (store, engine, _, (a, b)):
        store.index.clock.advance(120)  # type: ignore[attr-defined]
        store.search("reminder", limit=3, heat=False)  # keys a and b as lapsed
        inner = engine.inner

        def key(note_id: str) -> str:
            pid = point_id(store.agent_id, note_id)
            record = inner.shard.retrieve([pid], with_payload=True, with_vector=False)[0]
            return str((record.payload or {})[LIVE_KEY])

        assert key(a.id) == key(b.id) == "\x1flapsed\x1fdefault"
        inner.set_payload(point_id(store.agent_id, a.id), {"is_active": False})  # deleted
        assert key(a.id) == "\x1finactive\x1fdefault"
        inner.set_payload(point_id(store.agent_id, a.id), {"is_active": True})  # brought back
        assert key(a.id) == "\x1flapsed\x1fdefault"  # restored, and still expired
        later = store.index.clock.now() + timedelta(hours=1)
        inner.set_payload(point_id(store.agent_id, b.id), {"expires_at": iso(later),
                                                           "expires_ts": later.timestamp()})
        assert key(b.id) == "default"
        engine.legs.clear()
        ids = [r.id for r in store.search("reminder", limit=5, heat=False)]
        assert fields_of(engine.legs[0]) == {LIVE_KEY}
        assert b.id in ids and a.id not in ids
