"""A note that expires and one that does not are never folded nor merged (default embedder).

A fold or a merge keeps one note's expiry. Measured 2026-12-06 (e5-small, note similarity
0.92): "The staging cluster is reachable only over the VPN ..." told again without a ttl
folded into the same fact told with ``ttl=3600``, with no warning, and an hour later no
search found it; told with a ttl into a note without one, its text stayed in search past its
expiry (a warning said so, but the text was kept).
"""

from __future__ import annotations

from amem import MemoryStore
from amem.kernel.clock import ManualClock

from .e5_store import clock, embedder, store  # noqa: F401 - fixtures

OLD = "The staging cluster is only reachable over the VPN from the Berlin office."
NEW = "The staging cluster is reachable only over the VPN from the Berlin office network."


def _found(store: MemoryStore, text: str) -> bool:
    return any(text in hit.content for hit in store.search(text, limit=3))


def test_a_fact_told_again_without_expiry_outlives_the_one_that_expires(
        store: MemoryStore, clock: ManualClock) -> None:
    first = store.add(OLD, ttl=3600)
    again = store.add(NEW)
    assert again.status == "created" and again.id != first.id
    assert store.add(OLD + " Really.").status != "folded"  # same: no fold into an expiring note
    clock.advance(7200)
    store.consolidate()
    assert _found(store, NEW)


def test_a_fact_told_with_expiry_is_not_kept_past_it_by_a_fold(
        store: MemoryStore, clock: ManualClock) -> None:
    store.add(OLD)
    told = store.add(NEW, ttl=3600)
    assert told.status == "created"
    clock.advance(7200)
    store.consolidate()
    assert _found(store, OLD)
    assert not any("network" in hit.content for hit in store.search(NEW, limit=5))


def test_the_nightly_merge_keeps_notes_of_other_expiries_apart(
        store: MemoryStore, clock: ManualClock) -> None:
    # another event day: never folded; the nightly pair finder sees every alike pair. It
    # merged OLD into NEW (the more informative), which then expired with OLD's fact in it
    store.add(OLD, event_time="2026-11-01T10:00:00Z")
    store.add(NEW, event_time="2026-11-02T10:00:00Z", ttl=86400)
    assert store.consolidate().merges == 0
    clock.advance(2 * 86400)
    store.consolidate()
    assert _found(store, OLD)
    assert not any("network" in hit.content for hit in store.search(NEW, limit=5))
