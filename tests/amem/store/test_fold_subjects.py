"""A note about someone else is never folded or merged into another's, however alike the words.

The inspector's tests saw "Carol stopped coffee, she drinks tea now" (subject carol) folded into
"Alice stopped coffee, she drinks tea now" (subject alice): Carol's fact was gone from search
and undoing Alice's change cleared Carol's too. The rule is ``amem.notes.about_the_same``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from amem import MemoryStore
from amem.consolidate.plan import plan_clusters
from amem.embed import make_embedder
from amem.notes import about_the_same

from ..consolidate.conftest import angle_vector


def test_about_the_same_names_one_subject_in_common() -> None:
    assert about_the_same(["alice"], ["alice", "morning"])
    assert about_the_same(["alice"], [])  # a note naming nobody goes with any
    assert about_the_same([], [])
    assert not about_the_same(["alice"], ["carol"])
    assert not about_the_same(["alice"], ["alice", "carol"], ["carol"])


def test_clusters_keep_notes_about_different_people_apart() -> None:
    vectors = {"a": angle_vector(0), "b": angle_vector(5), "c": angle_vector(8)}
    keys = {"a": (3,), "b": (2,), "c": (1,)}
    pairs = [("a", "b", 0.99), ("a", "c", 0.98), ("b", "c", 0.99)]
    together = plan_clusters(pairs, vectors, keys, 0.9)
    assert together == [("a", [("b", pytest.approx(0.996, abs=1e-3)),
                                ("c", pytest.approx(0.990, abs=1e-3))])]
    apart = plan_clusters(pairs, vectors, keys, 0.9,
                          subjects={"a": ("alice",), "b": ("carol",), "c": ("alice",)})
    assert [(s, [m for m, _ in losers]) for s, losers in apart] == [("a", ["c"])]


# hashing: what the inspector's tests saw (names are one token of many, so the two texts are
# near-duplicates); e5-small: the default embedder, where they are further apart already
@pytest.fixture(params=["hashing", "e5-small"])
def store(request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=make_embedder(request.param), agent_id="t") as store:
        yield store


def test_the_same_words_about_another_person_are_stored(store: MemoryStore) -> None:
    alice = store.add("Alice stopped coffee, she drinks tea now", subjects=["alice"])
    carol = store.add("Carol stopped coffee, she drinks tea now", subjects=["carol"])
    assert carol.status != "folded" and carol.id != alice.id
    found = store.search("what does Carol drink?", limit=3, subject="carol")
    assert carol.id in [hit.id for hit in found]
    # the same words about the same person still fold
    again = store.add("Alice stopped coffee, she drinks tea now!", subjects=["alice"])
    assert again.status == "folded" and again.id == alice.id


def test_consolidation_does_not_merge_them(store: MemoryStore) -> None:
    dave = store.add("Dave moved to Berlin last spring with his family", subjects=["dave"],
                     enrich=False)
    erin = store.add("Erin moved to Berlin last spring with his family", subjects=["erin"],
                     enrich=False)
    store.consolidate()
    assert store.get(dave.id).is_active and store.get(erin.id).is_active


def test_the_same_text_about_another_person_is_no_duplicate(store: MemoryStore) -> None:
    # exact dedup ignored subjects: bob's fact went into alice's note, and a search about
    # bob did not find it (exploratory test, 2026-12-05)
    alice = store.add("Prefers window seats on flights.", subjects=["alice"])
    bob = store.add("Prefers window seats on flights.", subjects=["bob"])
    assert bob.status == "created" and bob.id != alice.id and not bob.warnings
    assert store.get(bob.id).subjects == ["bob"]
    again = store.add("Prefers window seats on flights.", subjects=["bob"])
    assert (again.status, again.id) == ("deduplicated", bob.id)
    found = store.search("does bob prefer window or aisle seats?", limit=3, subject="bob")
    assert bob.id in [hit.id for hit in found] and alice.id not in [hit.id for hit in found]
    # in one batch too: a repeat about another person is its own note
    batch = store.add_many([{"text": "Walks the dog at 7am.", "subjects": ["carol"]},
                            {"text": "Walks the dog at 7am.", "subjects": ["dave"]},
                            {"text": "Walks the dog at 7am.", "subjects": ["carol"]}])
    assert [r.status for r in batch] == ["created", "created", "deduplicated"]
    assert batch[2].id == batch[0].id != batch[1].id


def test_a_duplicate_says_which_subjects_were_not_added(store: MemoryStore) -> None:
    plain = store.add("Likes green tea.")
    named = store.add("Likes green tea.", subjects=["erin"])  # a note about nobody goes with any
    assert (named.status, named.id) == ("deduplicated", plain.id)
    assert len(named.warnings) == 1 and "not added: erin" in named.warnings[0]
    assert store.get(plain.id).subjects == []  # nothing written
