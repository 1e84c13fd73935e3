"""A search result lists only links the caller can follow (issue 16: expiry between sweeps)."""

from __future__ import annotations

from amem import MemoryStore
from amem.kernel.clock import ManualClock


def test_search_results_list_only_links_to_live_notes(store: MemoryStore, clock: ManualClock) -> None:
    store.add("Parking spot B7 at the airport", id="park", ttl=60, enrich=False)
    store.add("Hotel near the airport", id="hotel", enrich=False)
    store.add("Taxi rank at the airport", id="taxi", enrich=False)
    store.add("Flight to Lisbon from the airport", id="flight", enrich=False)
    store.add("Bob's locker code", id="locker", agent_id="bob", enrich=False)
    store.index.update_payload("flight", store.agent_id, {"links": ["park", "hotel", "taxi", "locker"]})

    def shown() -> list[str]:
        hits = store.search("flight to Lisbon", limit=1)
        assert hits[0].id == "flight"
        return hits[0].links

    assert shown() == ["park", "hotel", "taxi"]  # another agent's point is never shown
    store.delete("taxi")
    clock.advance(seconds=60)  # park expires; the sweep has not run yet
    assert shown() == ["hotel"]
    stored, _ = store.index.load("flight", store.agent_id)
    assert stored.links == ["park", "hotel", "taxi", "locker"]  # the payload is the sweep's


def test_doctor_counts_links_to_expired_notes_apart_from_dangling_ones(
        store: MemoryStore, clock: ManualClock) -> None:
    from tools.reports import doctor_report

    store.add("Parking spot B7 at the airport", id="park", ttl=60, enrich=False)
    store.add("Taxi rank at the airport", id="taxi", enrich=False)
    store.add("Flight to Lisbon from the airport", id="flight", enrich=False)
    store.index.update_payload("flight", store.agent_id, {"links": ["park", "taxi"]})
    store.delete("taxi")
    clock.advance(seconds=60)  # park expires; the sweep has not run yet

    def no_lcm(name: str) -> dict[str, object]:
        return {"ok": True}

    memory = doctor_report(store, no_lcm, {}, clean=False)["memory"]
    assert (memory["dangling_links"], memory["links_to_expired"]) == (1, 1)
    assert memory["examples"] == [f"{store.agent_id}/flight -> taxi"]


def test_a_fact_whose_successor_expired_is_current_before_the_sweep(
        edge_store: MemoryStore, clock: ManualClock) -> None:
    store = edge_store
    old = store.add("Alice drinks coffee every morning", ["Alice"]).id
    new = store.add("Alice stopped coffee, she drinks tea now", ["Alice"], ttl=60).id
    assert store.get(old).superseded_by == new
    assert old not in [r.id for r in store.search("Alice coffee", limit=3)]
    clock.advance(seconds=60)  # the newer fact expires; the sweep has not run yet
    assert [r.id for r in store.search("Alice coffee", limit=3)] == [old]
    store.sweep_expired()  # and after the sweep, the same answer
    assert [r.id for r in store.search("Alice coffee", limit=3)] == [old]
