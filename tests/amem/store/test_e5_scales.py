"""The two similarity scales with the default embedder (e5-small): search means what it says.

Few and small on purpose: the model is real (one load per module, a handful of notes).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from amem.embed import make_embedder

NOTES = [
    ("tea", "Alice prefers green tea over coffee"),
    ("pot", "Alice's teapot is from the Kyoto trip"),
    ("bob", "Bob drinks espresso every morning"),
    ("db", "The staging database runs PostgreSQL 16"),
    ("lunch", "Team lunch is on Friday at the Thai place"),
]


@pytest.fixture(scope="module")
def e5_store() -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=make_embedder("e5-small"),
                     clock=ManualClock("2026-01-10T12:00:00+00:00")) as store:
        for nid, text in NOTES:
            store.add(text, id=nid, enrich=False)
        store.index.update_payload("tea", store.agent_id, {"links": ["db", "pot"]})
        yield store


def test_the_best_answer_reads_as_similar_and_every_similarity_is_bounded(
        e5_store: MemoryStore) -> None:
    results = e5_store.search("what does Alice drink?", limit=5, expand_links=False, heat=False)
    sim = {r.id: r.similarity for r in results}
    assert max(sim, key=lambda nid: sim[nid]) == "tea"
    # on the note-to-note scale this hit read -0.06: below "unrelated"
    assert sim["tea"] > 0.25
    assert all(-1.0 <= s <= 1.0 for s in sim.values())
    assert sim["db"] < 0.1 and sim["lunch"] < 0.1


def test_link_expansion_admits_a_related_linked_note_with_e5(e5_store: MemoryStore) -> None:
    # "tea" links to "db" (unrelated) and "pot" (about Alice): the gate on the query scale
    # admits "pot" only. On the note scale it admitted nothing: no query ever passed it.
    results = e5_store.search("which tea does Alice prefer?", limit=1, heat=False)
    assert results[0].id == "tea" and results[0].via == "match"
    linked = [r for r in results if r.via == "link"]
    assert [r.id for r in linked] == ["pot"]
    assert linked[0].found_by == "link"
    assert linked[0].similarity >= e5_store.config.link_min_cosine


def test_min_similarity_lets_search_say_nothing_relevant(e5_store: MemoryStore) -> None:
    assert e5_store.search("kubernetes cluster upgrade", limit=5, min_similarity=0.4,
                           heat=False) == []
    kept = e5_store.search("what does Alice drink?", limit=5, min_similarity=0.4, heat=False)
    assert [r.id for r in kept][:1] == ["tea"]
    assert all(r.similarity >= 0.4 for r in kept)
