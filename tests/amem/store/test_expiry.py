"""Expiry: ``ttl``/``expires_at`` on add, invisible the moment it passes, deleted by the sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.errors import NotFoundError, ValidationError
from scheduler.config import SchedulerConfig
from scheduler.job import run_nightly

from .conftest import make_store


def test_ttl_and_expires_at_set_the_expiry_by_the_store_clock(store: MemoryStore) -> None:
    by_ttl = store.add("Parking spot B7 today", ttl=3600, enrich=False)
    by_time = store.add("Hotel wifi code 1234", expires_at="2026-01-12T00:00:00+01:00",
                        enrich=False)
    never = store.add("Alice was born in Lyon", enrich=False)
    assert store.get(by_ttl.id).expires_at == "2026-01-10T13:00:00+00:00"
    assert store.get(by_time.id).expires_at == "2026-01-11T23:00:00+00:00"
    assert store.get(never.id).expires_at == ""


def test_bad_expiries_are_refused_naming_the_field(edge_store: MemoryStore) -> None:
    for options, field in (({"ttl": 0}, "ttl"), ({"ttl": -5}, "ttl"), ({"ttl": "1h"}, "ttl"),
                           ({"ttl": True}, "ttl"), ({"ttl": float("inf")}, "ttl"),
                           ({"ttl": 60, "expires_at": "2027-01-01"}, "ttl"),
                           ({"expires_at": "2026-01-10T12:00:00Z"}, "expires_at"),  # now
                           ({"expires_at": "2020-01-01"}, "expires_at"),
                           ({"expires_at": "never"}, "expires_at")):
        with pytest.raises(ValidationError) as err:
            edge_store.add("Parking spot B7 today", enrich=False, **options)
        assert err.value.field == field, options
    assert edge_store.count() == 0


def test_an_expired_note_is_invisible_at_once(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    with make_store("edge", embedder, clock, link_min_cosine=-1.0) as store:
        store.add("Parking spot B7 at the airport", id="park", ttl=60, enrich=False)
        store.add("Flight to Lisbon from the airport", id="flight", enrich=False)
        store.index.update_payload("flight", store.agent_id, {"links": ["park"]})
        before = store.search("flight airport", limit=1)
        assert [(r.id, r.via) for r in before] == [("flight", "match"), ("park", "link")]
        clock.advance(seconds=60)
        assert [r.id for r in store.search("parking spot airport", limit=5)] == ["flight"]
        assert [(r.id, r.via) for r in store.search("flight airport", limit=1)] == [
            ("flight", "match")]  # no link to it either
        with pytest.raises(NotFoundError, match="expired"):
            store.get("park")
        assert [n.id for n in store.list()[0]] == ["flight"] and store.count() == 1
        assert [n.id for n, _ in store.iter_notes()] == ["flight"]
        # the same text again is a new note, not a duplicate of the invisible one
        again = store.add("Parking spot B7 at the airport", ttl=60, enrich=False)
        assert again.status == "created" and again.id != "park"


def test_the_sweep_deletes_expired_notes_and_their_links(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    with make_store("edge", embedder, clock) as store:
        store.add("Parking spot B7 at the airport", id="park", ttl=60, enrich=False)
        store.add("Flight to Lisbon from the airport", id="flight", enrich=False)
        store.add("Old hotel code", id="hotel", ttl=60, enrich=False, agent_id="other")
        store.index.update_payload("flight", store.agent_id, {"links": ["park"]})
        assert store.consolidate().to_dict()["expired_deleted"] == 0  # not yet
        clock.advance(seconds=61)
        report = store.consolidate()  # this agent only: the other agent's note stays
        assert report.to_dict()["expired_deleted"] == 1
        assert store.get("flight").links == []
        with pytest.raises(NotFoundError):
            store.get("park", include_inactive=True)  # the point itself is gone
        assert store.index.backend.count(None) == 2
        sweep = store.sweep_expired(all_agents=True)
        assert (sweep.expired_deleted, sweep.agents) == (1, 1)
        assert store.index.backend.count(None) == 1 == store.index.stats.docs


def test_the_nightly_job_reports_the_sweep(tmp_path: Path) -> None:
    clock = ManualClock("2026-01-10T12:00:00+00:00")
    with MemoryStore(":memory:", embedder=HashingEmbedder(dim=64), clock=clock,
                     config=load_config(overrides={})) as store:
        store.add("Parking spot B7 at the airport", ttl=60, enrich=False)
        store.add("Hotel wifi code 1234", ttl=60, enrich=False, agent_id="other")
        clock.advance(seconds=61)
        report = run_nightly(store, config=SchedulerConfig(home=tmp_path), clock=clock)
    step = report.steps["consolidate"]
    assert step.status == "ok" and step.summary["expired_deleted"] == 2
