"""A fold or a merge shows in ``amem history``: the texts joined into a note, and when.

Before (2026-12-06), ``amem history`` of a note that had absorbed a near-duplicate showed one
current note with the combined text and nothing else: the fold was recorded only in the
note's raw ``evolution_history``, so a user could not see that two adds became one note.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from amem import MemoryStore
from amem.embed import make_embedder
from amem.kernel.clock import ManualClock
from tools.cli.notes import _chain_text

A = "User's cat is called Miso."
B = "The user has a cat named Miso."


@pytest.fixture(scope="module")
def embedder() -> Any:
    return make_embedder("e5-small")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-11-03T09:00:00+00:00")


@pytest.fixture
def store(embedder: Any, clock: ManualClock) -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=embedder, agent_id="u", clock=clock) as store:
        yield store


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
