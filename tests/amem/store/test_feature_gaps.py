"""Gaps of the note features (issue 16): what ``get`` and status show of expired notes."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.consolidate import plan_clusters
from amem.consolidate.lineage import Chains
from amem.embed import make_embedder
from amem.embed.base import Embedder
from amem.embed.hashing import HashingEmbedder
from tools.facade import ToolFacade

from .conftest import make_store


@lru_cache(maxsize=1)
def _e5() -> Embedder:
    """The default embedder, loaded once for the module's similarity-dependent tests."""
    return make_embedder("e5-small")


def test_get_lists_only_links_to_live_notes(store: MemoryStore, clock: ManualClock) -> None:
    store.add("Parking spot B7 at the airport", id="park", ttl=60, enrich=False)
    store.add("Hotel near the airport", id="hotel", enrich=False)
    store.add("Taxi rank at the airport", id="taxi", enrich=False)
    store.add("Flight to Lisbon from the airport", id="flight", enrich=False)
    store.index.update_payload("flight", store.agent_id, {"links": ["park", "hotel", "taxi"]})
    assert store.get("flight").links == ["park", "hotel", "taxi"]
    store.delete("taxi")
    clock.advance(seconds=60)  # park expires; the sweep has not run
    assert store.get("flight").links == ["hotel"]
    # the stored links are untouched: the sweep owns them
    assert store.get("flight", include_inactive=True).links == ["hotel"]
    stored, _ = store.index.load("flight", store.agent_id)
    assert stored.links == ["park", "hotel", "taxi"]


def test_get_never_shows_a_link_to_another_agents_point(store: MemoryStore) -> None:
    store.add("Bob's locker code", id="locker", agent_id="bob", enrich=False)
    store.add("Alice's gym schedule", id="gym", enrich=False)
    store.index.update_payload("gym", store.agent_id, {"links": ["locker"]})
    assert store.get("gym").links == []


def test_status_counts_expired_notes_apart_from_active_ones(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    with make_store("edge", embedder, clock) as store:
        store.add("Parking spot B7 today", ttl=60, enrich=False)
        store.add("Gate code 4411 this week", ttl=60, agent_id="bob", enrich=False)
        store.add("Alice was born in Lyon", enrich=False)
        info = store.info()
        assert (info.active_notes, info.expired_pending_sweep) == (3, 0)
        clock.advance(seconds=60)
        info = store.info()
        assert (info.points, info.active_notes, info.expired_pending_sweep) == (3, 1, 2)
        status = ToolFacade(store, None, agent_id=store.agent_id).call("memory_status", {})
        assert status["memory"]["notes"] == 1
        assert status["memory"]["expired_pending_sweep"] == 1  # this agent's only
        store.sweep_expired(all_agents=True)
        info = store.info()
        assert (info.points, info.active_notes, info.expired_pending_sweep) == (1, 1, 0)


# ---------------------------------------------------------------- consolidation keeps history

#: (older fact, the note that replaced it): close enough that the new one is stored
#: ``pending_merge`` (e5 similarity ~0.82 and ~0.78), which consolidation used to merge
CHANGES = [
    ("Every morning at the office the user drinks a cup of coffee with milk before the "
     "standup meeting", "Every morning at the office the user now drinks a cup of tea with "
     "milk before the standup meeting"),
    ("Alice works at Google as a software engineer in the Zurich office",
     "Alice now works at Microsoft as a software engineer in the Zurich office"),
]


def test_plan_clusters_never_joins_one_supersession_chain() -> None:
    vec = {k: np.array([1.0, 0.0]) for k in "abc"}
    keys = {"a": (3,), "b": (2,), "c": (1,)}
    pairs = [("a", "b", 1.0), ("a", "c", 1.0), ("b", "c", 1.0)]
    assert plan_clusters(pairs, vec, keys, 0.75) == [("a", [("b", 1.0), ("c", 1.0)])]
    # b replaced a (one chain): a and b stay apart, c joins the better one
    plan = plan_clusters(pairs, vec, keys, 0.75, {"a": "a", "b": "a"})
    assert plan == [("a", [("c", 1.0)])]


@pytest.mark.parametrize("threshold", [None, 0.3])
@pytest.mark.parametrize(("old_text", "new_text"), CHANGES)
def test_consolidation_never_merges_a_fact_with_its_successor(
        old_text: str, new_text: str, threshold: float | None) -> None:
    overrides = {} if threshold is None else {"consolidate_threshold": threshold}
    with MemoryStore(":memory:", config=load_config(overrides=overrides), embedder=_e5(),
                     clock=ManualClock("2026-01-10T12:00:00+00:00")) as store:
        old = store.add(old_text, timestamp="2026-01-01").id
        new = store.add(new_text, timestamp="2026-01-08")
        # marked pending where the two read as one fact in other words; Google and Microsoft
        # are values each holds and the other lacks, so that pair is not even pending
        # (amem.write.values): either way the night must not merge them
        assert new.supersedes == [old] and new.status in ("pending_merge", "created")
        report = store.consolidate()
        assert report.agents[store.agent_id].merged == []
        before, after = store.get(old), store.get(new.id)
        assert before.is_active and after.is_active and not after.pending_merge
        assert before.superseded_by == new.id and after.supersedes == [old]
        history = store.search(new_text, limit=3, include_superseded=True)
        assert [r.id for r in history][:2] == [new.id, old]
        assert store.consolidate().agents[store.agent_id].merged == []  # and stays so


# ---------------------------------------------------------------- marks that outlive a note

SUPERSEDED_COFFEE = "Alice drinks coffee every morning"
SUPERSEDING_TEA = "Alice stopped coffee, she drinks tea now"


def test_sweeping_an_expired_successor_makes_the_older_fact_current_again(
        store: MemoryStore, clock: ManualClock) -> None:
    old = store.add(SUPERSEDED_COFFEE, ["Alice"], timestamp="2026-01-01").id
    new = store.add(SUPERSEDING_TEA, ["Alice"], timestamp="2026-01-05", ttl=60)
    assert new.supersedes == [old] and store.get(old).superseded_by == new.id
    clock.advance(seconds=60)
    assert store.sweep_expired().expired_deleted == 1
    assert store.get(old).superseded_by is None  # not a mark naming a note that is gone
    assert old in [r.id for r in store.search("Alice coffee", limit=3)]


def test_a_merged_away_successor_hands_its_marks_to_the_survivor(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    with make_store("edge", embedder, clock) as store:
        a = store.add("Alice drinks coffee at the office", id="a", enrich=False).id
        b = store.add("Alice now drinks green tea every single morning at home", id="b",
                      enrich=False).id
        c = store.add("Alice now drinks green tea every single morning at home too", id="c",
                      enrich=False).id
        store.index.update_payload(a, store.agent_id, {"superseded_by": b})
        store.index.update_payload(b, store.agent_id, {"supersedes": [a]})
        store.index.update_payload(c, store.agent_id, {"retrieval_count": 50})  # c survives
        merged = store.consolidate().agents[store.agent_id].merged
        assert merged == [(b, c)]
        assert store.get(a).superseded_by == c and store.get(c).supersedes == [a]
        assert [r.id for r in store.search("Alice drinks", limit=5)].count(a) == 0
        history = [r.id for r in store.search("Alice drinks", limit=5, include_superseded=True)]
        assert history.index(a) == history.index(c) + 1
        assert store.consolidate().agents[store.agent_id].merged == []  # a stays apart


def test_chains_join_every_version_of_a_fact() -> None:
    chains = Chains()
    for newer, older in (("b", "a"), ("c", "b"), ("y", "x"), ("d", "z"), ("z", "c")):
        chains.join(newer, older)
    roots = chains.roots()
    assert {k for k, v in roots.items() if v == "a"} == {"a", "b", "c", "d", "z"}
    assert roots["x"] == roots["y"] == "x"
