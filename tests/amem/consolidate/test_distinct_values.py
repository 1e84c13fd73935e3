"""Facts that differ only by a value are never folded nor merged, with the default embedder.

Measured on a note set of an agent's notes (2026-12-06, e5-small): "Server B has 16 GB of
RAM." folded into server A's note at note similarity 0.91, the October water bill into
November's (0.88), "Dad takes 5 mg ..." into Mum's (0.88), as close as real paraphrases
(0.85-0.93); the nightly consolidation merged three more such pairs (flight LH400/LH402, an
upload limit of 10 MB per file / 10 GB per account, 16 GB of RAM / 16 TB of disk) and no
paraphrase. The fold has no undo, so two facts became one note that one delete removes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from amem import MemoryStore
from amem.embed import make_embedder
from amem.kernel.clock import ManualClock
from amem.write.values import state_different_values

#: each pair: two distinct true facts, alike enough to fold or merge before
DISTINCT = [
    ("Server A has 16 GB of RAM.", "Server B has 16 GB of RAM."),                 # folded 0.91
    ("Paid the water bill of 42 EUR on 2026-10-03.",
     "Paid the water bill of 45 EUR on 2026-11-03."),                             # folded 0.88
    ("Mum takes 5 mg of amlodipine every morning.",
     "Dad takes 5 mg of amlodipine every morning."),                              # folded 0.88
    ("Server A has 16 GB of RAM.", "Server A has 16 TB of disk."),                # merged
    ("Flight LH400 to New York departs at 10:40 from gate B12.",
     "Flight LH402 to New York departs at 13:15 from gate B14."),                 # merged
    ("The upload limit is 10 MB per file.", "The upload limit is 10 GB per account."),  # merged
]

#: paraphrases of one fact: still folded
SAME = [
    ("The team standup is at 9:30 every weekday.", "Team standup happens every weekday at 9:30."),
    ("User's daughter Emma is 7 years old.", "Emma, the user's daughter, is seven years old."),
    ("The analytics database runs PostgreSQL 15.", "The analytics DB is on PostgreSQL 15."),
    ("User's cat is called Miso.", "The user has a cat named Miso."),
]


@pytest.fixture(scope="module")
def embedder() -> Any:
    return make_embedder("e5-small")


def _store(embedder: Any) -> MemoryStore:
    return MemoryStore(":memory:", embedder=embedder, agent_id="u",
                       clock=ManualClock("2026-11-03T09:00:00+00:00"))


def test_the_rule_tells_values_apart_and_lets_rewordings_be() -> None:
    for a, b in DISTINCT:
        assert state_different_values(a, b), (a, b)
    for a, b in SAME:
        assert not state_different_values(a, b), (a, b)
    # one side adding a value is a rewording with more detail, not another fact
    assert not state_different_values("Alice is allergic to peanuts.",
                                      "Alice is allergic to peanuts since 2019.")
    # a capital that only opens a sentence is no name
    assert not state_different_values("User drinks black coffee every morning.",
                                      "Every morning the user has a black coffee.")


@pytest.mark.parametrize("pair", DISTINCT, ids=[p[1][:20] for p in DISTINCT])
def test_a_fact_differing_by_a_value_is_stored_and_never_merged(
        embedder: Any, pair: tuple[str, str]) -> None:
    with _store(embedder) as store:
        first = store.add(pair[0])
        second = store.add(pair[1])
        assert second.status == "created" and second.id != first.id
        report = store.consolidate()
        assert report.merges == 0
        for text in pair:
            hits = store.search(text, limit=2)
            assert hits[0].content == text


def test_paraphrases_are_still_folded(embedder: Any) -> None:
    with _store(embedder) as store:
        for a, b in SAME:
            first = store.add(a)
            second = store.add(b)
            assert second.status == "folded" and second.id == first.id, (b, second.similarity)
