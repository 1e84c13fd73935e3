"""Usage heat: a note the agent opened after a search rises for the same question, only.

The similarity-dependent tests use the default embedder (e5-small, one load per module).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed import make_embedder
from amem.embed.base import Embedder
from amem.errors import ConfigError, NotFoundError
from amem.ranking import usage_boost
from amem.search.usage import FIELD, PER_NOTE, RecentSearches, best_cosine, decode, encode, with_query

NOTES = [
    ("tea", "Alice prefers green tea over coffee"),
    ("matcha", "Alice ordered a matcha latte at the cafe on Monday"),
    ("pot", "Alice's teapot is from the Kyoto trip"),
    ("bob", "Bob drinks espresso every morning"),
    ("db", "The staging database runs PostgreSQL 16"),
    ("lunch", "Team lunch is on Friday at the Thai place"),
]
QUESTION = "what does Alice like to drink?"


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return make_embedder("e5-small")


@pytest.fixture
def e5_store(e5: Embedder) -> Iterator[MemoryStore]:
    # retrieval-count heat off (factor 0): it reorders near ties and would hide what usage does
    config = load_config(overrides={"link_expansion": False, "heat_factor": 0.0})
    with MemoryStore(":memory:", config=config, embedder=e5,
                     clock=ManualClock("2026-01-10T12:00:00+00:00"), agent_id="alice") as store:
        for nid, text in NOTES:
            store.add(text, id=nid, enrich=False)
        yield store


def _payload(store: MemoryStore, note_id: str, agent: str) -> dict[str, object]:
    from amem.notes import point_id

    hits = store.index.backend.retrieve([point_id(agent, note_id)])
    assert hits
    return hits[0].payload


def _opened_second(store: MemoryStore) -> tuple[str, str]:
    """Search QUESTION, open its second match; (first id, opened id)."""
    ids = [r.id for r in store.search(QUESTION, limit=5)]
    store.get(ids[1])
    return ids[0], ids[1]


# ------------------------------------------------------------------ pure parts


def test_usage_boost_is_zero_below_the_threshold_and_doubles_for_the_same_question() -> None:
    assert usage_boost(0.5, None) == 0.5
    assert usage_boost(0.5, 0.96) == 0.5
    assert usage_boost(0.5, 0.97) == 0.5
    assert usage_boost(0.5, 1.0) == pytest.approx(1.0)
    assert usage_boost(0.5, 0.985) == pytest.approx(0.75)
    assert usage_boost(0.5, 1.0, factor=0.0) == 0.5
    with pytest.raises(ValueError, match="threshold"):
        usage_boost(0.5, 1.0, threshold=1.0)
    with pytest.raises(ValueError, match="factor"):
        usage_boost(0.5, 1.0, factor=float("nan"))


def test_stored_queries_stay_bounded_distinct_and_of_one_embedder() -> None:
    rng = np.random.default_rng(7)
    vecs = [v / np.linalg.norm(v) for v in rng.normal(size=(PER_NOTE + 3, 16)).astype(np.float32)]
    value: object = None
    for v in vecs:
        nxt = with_query(value, "m", v)
        assert nxt is not None
        value = nxt
    assert isinstance(value, dict) and len(value["queries"]) == PER_NOTE
    # the oldest went first: the newest is kept, the first is not
    assert best_cosine(value, "m", vecs[-1]) == pytest.approx(1.0, abs=1e-3)
    oldest = best_cosine(value, "m", vecs[0])
    assert oldest is not None and oldest < 0.9
    assert with_query(value, "m", vecs[-1]) is None  # the same question is not stored twice
    assert best_cosine(value, "other-model", vecs[-1]) is None
    assert best_cosine({"embedder": "m", "queries": ["not base64!", 3]}, "m", vecs[0]) is None
    assert decode(encode(vecs[0]), 15) is None  # a vector of another dimension is ignored


def test_recent_searches_are_bounded_per_agent_and_in_agents() -> None:
    recent = RecentSearches(per_agent=2, max_agents=2)
    v = np.ones(4, dtype=np.float32)
    for i in range(3):
        recent.searched("a", v * (i + 1), [f"n{i}"])
    assert len(recent) == 2
    assert recent.opened("a", "n0") is None  # pushed out
    opened = recent.opened("a", "n2")
    assert opened is not None and opened[0] == 3.0
    assert recent.opened("a", "n2") is None  # recorded once per search
    recent.searched("b", v, ["x"])
    recent.searched("c", v, ["x"])
    assert recent.opened("a", "n1") is None  # agent "a" was forgotten first
    assert recent.opened("b", "x") is not None


def test_config_checks_the_usage_keys() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(overrides={"usage_threshold": 1.0})
    assert err.value.key == "usage_threshold"
    with pytest.raises(ConfigError) as err:
        load_config(overrides={"usage_factor": -1.0})
    assert err.value.key == "usage_factor"


# ------------------------------------------------------------------ the store, with e5


def test_the_same_question_again_finds_the_note_the_agent_opened_first(
        e5_store: MemoryStore) -> None:
    first, opened = _opened_second(e5_store)
    stored = _payload(e5_store, opened, "alice")[FIELD]
    assert isinstance(stored, dict) and len(stored["queries"]) == 1
    again = e5_store.search(QUESTION, limit=5)
    assert again[0].id == opened and again[0].boosted_by == "usage"
    assert all(r.boosted_by is None for r in again[1:])
    # a rephrasing a hair away still counts; heat off switches it off
    assert e5_store.search("What does Alice like to drink", limit=5)[0].id == opened
    assert e5_store.search(QUESTION, limit=5, heat=False)[0].id == first


def test_an_unrelated_or_merely_close_question_does_not_move(e5_store: MemoryStore) -> None:
    # e5 query cosines to QUESTION: 0.77 (database), 0.95 ("eat" for "drink": another question)
    others = ["which database does staging run?", "what does Alice like to eat?"]
    before = {q: [r.id for r in e5_store.search(q, limit=5)] for q in others}
    for _ in range(2):
        _opened_second(e5_store)
    for q in others:
        after = e5_store.search(q, limit=5)
        assert [r.id for r in after] == before[q]
        assert all(r.boosted_by is None for r in after)
        assert all(r.score == r.rrf for r in after)  # nothing lifted the fused score


def test_another_agent_never_marks_or_reads_these_notes(e5_store: MemoryStore) -> None:
    e5_store.add("Bob's notes: Alice likes drinking green tea", id="tea", agent_id="bob",
                 enrich=False)
    # alice opening a note only bob's searches named records nothing on hers
    e5_store.usage.recent.searched("bob", np.ones(e5_store.embedder.dim), ["pot"])
    e5_store.get("pot")
    assert FIELD not in _payload(e5_store, "pot", "alice")
    ids = [r.id for r in e5_store.search(QUESTION, limit=5, agent_id="bob")]
    assert ids == ["tea"]
    # bob opens "tea": bob's own note records bob's query, alice's note is untouched
    e5_store.get("tea", agent_id="bob")
    assert FIELD not in _payload(e5_store, "tea", "alice")
    assert FIELD in _payload(e5_store, "tea", "bob")
    # alice searched; bob asks for a note of alice's results he does not have
    alice_ids = [r.id for r in e5_store.search(QUESTION, limit=5)]
    assert "matcha" in alice_ids
    with pytest.raises(NotFoundError):
        e5_store.get("matcha", agent_id="bob")
    assert FIELD not in _payload(e5_store, "matcha", "alice")


def test_opens_stay_bounded_and_old_notes_without_the_field_load(e5_store: MemoryStore) -> None:
    questions = ["what does Alice like to drink?", "Alice's favourite drink",
                 "tea or coffee for Alice?", "what is in Alice's cup?",
                 "which beverage does Alice choose?", "Alice drinks what?"]
    for q in questions:
        ids = [r.id for r in e5_store.search(q, limit=6)]
        e5_store.get("lunch") if "lunch" in ids else None
        e5_store.get("lunch")  # twice: the second open of one search adds nothing
    stored = _payload(e5_store, "lunch", "alice")[FIELD]
    assert isinstance(stored, dict) and len(stored["queries"]) == PER_NOTE
    # a note written before the field: no key at all, loads and searches as before
    assert FIELD not in _payload(e5_store, "db", "alice")
    assert e5_store.get("db").id == "db"
    assert e5_store.search("staging database", limit=1)[0].id == "db"


def test_a_get_does_not_wait_behind_a_long_change_and_records_nothing_then(
        e5_store: MemoryStore) -> None:
    import threading
    import time

    ids = [r.id for r in e5_store.search(QUESTION, limit=3)]
    held, done = threading.Event(), threading.Event()

    def hold() -> None:  # what a consolidation does: the write lock, for a long time
        with e5_store.index.lock:
            held.set()
            done.wait(10)

    worker = threading.Thread(target=hold)
    worker.start()
    try:
        held.wait(5)
        started = time.monotonic()
        assert e5_store.get(ids[1]).id == ids[1]
        assert time.monotonic() - started < 5
    finally:
        done.set()
        worker.join()
    assert FIELD not in _payload(e5_store, ids[1], "alice")


def test_a_get_that_records_no_usage_leaves_the_note_as_it_was() -> None:
    # a read-only key's get (tools.memory_tools) and a person looking: opening is no use
    from amem.embed.hashing import HashingEmbedder
    from amem.errors import ValidationError

    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="alice") as store:
        for nid, text in NOTES:
            store.add(text, id=nid, enrich=False)
        ids = [r.id for r in store.search(QUESTION, limit=3)]
        assert store.get(ids[0], record_usage=False).id == ids[0]
        assert FIELD not in _payload(store, ids[0], "alice")
        store.get(ids[0])  # the same search still leads to it: an agent's open records it now
        assert FIELD in _payload(store, ids[0], "alice")
        with pytest.raises(ValidationError):
            store.get(ids[0], record_usage="no")  # type: ignore[arg-type]
