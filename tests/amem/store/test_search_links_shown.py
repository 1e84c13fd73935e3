"""A search result lists only links the caller can follow (issue 16: expiry between sweeps)."""

from __future__ import annotations

from amem import MemoryStore
from amem.clock import FixedClock


def test_search_results_list_only_links_to_live_notes(store: MemoryStore, clock: FixedClock) -> None:
    store.add("Parking spot B7 at the airport", id="park", ttl=60, enrich=False)
    store.add("Hotel near the airport", id="hotel", enrich=False)
    store.add("Taxi rank at the airport", id="taxi", enrich=False)
    store.add("Flight to Lisbon from the airport", id="flight", enrich=False)
    store.add("Bob's locker code", id="locker", agent_id="bob", enrich=False)
    store.update_payload("flight", store.agent_id, {"links": ["park", "hotel", "taxi", "locker"]})

    def shown() -> list[str]:
        hits = store.search("flight to Lisbon", limit=1)
        assert hits[0].id == "flight"
        return hits[0].links

    assert shown() == ["park", "hotel", "taxi"]  # another agent's point is never shown
    store.delete("taxi")
    clock.advance(seconds=60)  # park expires; the sweep has not run yet
    assert shown() == ["hotel"]
    stored, _ = store.load("flight", store.agent_id)
    assert stored.links == ["park", "hotel", "taxi", "locker"]  # the payload is the sweep's
