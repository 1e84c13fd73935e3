"""A fold or a merge shows in ``amem history``: the texts joined into a note, and when.

Before (2026-12-06), ``amem history`` of a note that had absorbed a near-duplicate showed one
current note with the combined text and nothing else: the fold was recorded only in the
note's raw ``evolution_history``, so a user could not see that two adds became one note.
"""

from __future__ import annotations



from amem import MemoryStore
from amem.kernel.clock import ManualClock

from tools.cli.notes import _chain_text

from .e5_store import clock, embedder, store  # noqa: F401 - fixtures

A = "User's cat is called Miso."
B = "The user has a cat named Miso."


def test_a_fold_shows_in_the_history(store: MemoryStore) -> None:
    first = store.add(A)
    assert store.add(B).status == "folded"
    (entry,) = store.history(first.id)
    (event,) = [e for e in entry["events"] if e["action"] == "fold"]
    assert event["folded_text"] == B
    text = _chain_text({"id": first.id, "chain": store.history(first.id)})
    assert f"folded in: {B}" in text


def test_a_nightly_merge_shows_in_the_survivors_history(
        store: MemoryStore, clock: ManualClock) -> None:
    kept = store.add(B)
    clock.advance(3 * 86400)  # another day: not folded, merged at night
    gone = store.add(A)
    assert store.consolidate().merges == 1
    text = _chain_text({"id": kept.id, "chain": store.history(kept.id)})
    assert f"merged {gone.id}: {A}" in text
