"""The nightly merge keeps another event day and other metadata apart, as the fold does.

A fold keeps the target's event time and metadata, so the write path stores a note of
another event day apart (``same_event_day``), flagged ``pending_merge``; the nightly merge
then merged it all the same (2026-12-06, e5-small, note similarity 0.93): the survivor
kept one day, and a search filtered by the other day's time found neither note. Metadata
went the same way: a fold or merge dropped the caller's label of the other note
(``project=beta``), so a metadata-filtered search lost it.
"""

from __future__ import annotations

from typing import Any

from amem import MemoryStore
from amem.kernel.clock import ManualClock

from .e5_store import clock, embedder, store  # noqa: F401 - fixtures

A = "User's cat is called Miso."
B = "The user has a cat named Miso."


def test_another_event_day_is_not_merged_at_night(store: MemoryStore) -> None:
    a = store.add(A, event_time="2026-10-01T10:00:00Z")
    b = store.add(B, event_time="2026-10-20T10:00:00Z")
    assert b.status == "pending_merge"  # not folded: another day (amem.write.placer)
    assert store.consolidate().merges == 0
    assert store.get(a.id).event_time.startswith("2026-10-01")
    assert store.get(b.id).event_time.startswith("2026-10-20")


def test_other_metadata_is_neither_folded_nor_merged(store: MemoryStore) -> None:
    a = store.add(A, metadata={"project": "alpha"})
    b = store.add(B, metadata={"project": "beta"})
    assert b.status != "folded" and b.id != a.id
    assert store.consolidate().merges == 0
    assert store.get(b.id).metadata == {"project": "beta"}
    # the same labels (or none) still fold
    c = store.add("User's cat is named Miso.", metadata={"project": "alpha"})
    assert c.status == "folded" and c.id == a.id


def test_a_repeat_on_another_day_still_merges_and_keeps_its_labels(embedder: Any) -> None:
    clock = ManualClock("2026-11-03T09:00:00+00:00")
    with MemoryStore(":memory:", embedder=embedder, agent_id="u", clock=clock) as store:
        store.add(B)  # the survivor: more words
        clock.advance(3 * 86400)  # written on another day, no event time of its own
        store.add(A, metadata={"project": "alpha"})
        report = store.consolidate()
        assert report.merges == 1
        (kept,) = store.list()[0]
        assert kept.metadata == {"project": "alpha"}


def test_a_merge_keeps_one_spelling_of_a_tag_and_its_keys(embedder: Any) -> None:
    """Tags that are one by key (``amem.notefields.tag_key``) are kept once by the nightly
    merge, and the survivor's keys follow its tags: the tags filter finds it in any case."""
    from amem.notefields import TAG_KEYS, tag_keys

    clock = ManualClock("2026-11-03T09:00:00+00:00")
    with MemoryStore(":memory:", embedder=embedder, agent_id="u", clock=clock) as store:
        store.add(B, tags=["Pets"])  # the survivor: more words
        clock.advance(3 * 86400)  # another day: not folded at write, merged at night
        store.add(A, tags=["pets", "Miso"])
        assert store.consolidate().merges == 1
        (kept,) = store.list()[0]
        # the survivor's spelling first ("miso" came to it by the add's offline evolution);
        # was: ["Pets", "miso", "user", "cat", "pets", "Miso"]
        assert kept.tags[0] == "Pets" and "miso" in kept.tags
        assert "pets" not in kept.tags and "Miso" not in kept.tags
        assert [r.id for r in store.search("cat", tags=["MISO"])] == [kept.id]
        payloads = [h.payload for h in store.index.backend.iterate(None)]
        assert all(p.get(TAG_KEYS) == tag_keys(p["tags"]) for p in payloads)
