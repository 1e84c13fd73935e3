"""What a separated text gets as its own note, and what a separated merge gives back.

A folded text made its own note again (``MemoryStore.separate``) is a note nobody linked or
judged: the fold stored no note, so no links were chosen and no older fact was put to the
judge. Separated, it gets what an ``add`` gives a new note (its links, written both ways, and
the supersession judgement), and the result says so. A merge summed the two notes' retrieval
counts and pointed every link to the merged note at the survivor; separated, the merged note
gets its own count back and the links that pointed at it point at it again.

Offline (no LLM: the rule links and judges), with the hashing embedder and a lower fold
threshold, as the kill test of ``separate`` (the pairs below fold at 0.86 and merge at night).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from amem import MemoryStore, load_config
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock

FOLDING = {"fold_threshold": 0.8, "pending_threshold": 0.6}
COFFEE = "Alice drinks coffee every morning"
CAFE = "Alice has breakfast at the cafe on Main Street with her sister every Sunday before the market opens."
CHANGE = CAFE + " She stopped coffee, she drinks tea now."


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-01-10T12:00:00+00:00")


@pytest.fixture
def store(clock: ManualClock) -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", config=load_config(overrides=FOLDING),
                     embedder=HashingEmbedder(dim=256), clock=clock, agent_id="u") as s:
        yield s


def _folded(store: MemoryStore, clock: ManualClock) -> tuple[str, str, str]:
    """The older fact, the note the change was folded into, and the fold's part id."""
    coffee = store.add(COFFEE, ["Alice"]).id
    clock.advance(4 * 86400)
    cafe = store.add(CAFE, ["Alice"]).id
    folded = store.add(CHANGE, ["Alice"])
    assert (folded.status, folded.id) == ("folded", cafe)
    (entry,) = [e for e in store.get(cafe).evolution_history if e["action"] == "fold"]
    # folded, the change was neither linked nor judged: the older fact still shows
    older = store.get(coffee, record_usage=False)
    assert older.superseded_by is None and entry["triggered_by"] not in older.links
    return coffee, cafe, entry["triggered_by"]


def test_a_folded_text_separated_is_linked_and_judged_as_an_add(store: MemoryStore,
                                                                clock: ManualClock) -> None:
    coffee, cafe, part = _folded(store, clock)
    result = store.separate(cafe, part)
    own = store.get(part, record_usage=False)
    # linked as an add links (the offline rule over the notes sharing its terms), both ways
    assert coffee in own.links
    for other in own.links:
        assert part in store.get(other, record_usage=False).links
    assert result.links == own.links
    # judged as an add is: the change it states hides the older fact
    assert store.get(coffee, record_usage=False).superseded_by == part
    assert result.supersedes == [coffee] and own.supersedes == [coffee]
    # the note it left holds no change: it hides nothing
    assert store.get(cafe, record_usage=False).supersedes == []
    assert store.superseder.audit() == []
    shown = [h.id for h in store.search("what does Alice drink", limit=5, expand_links=False)]
    assert coffee not in shown and part in shown


def test_a_fresh_add_of_the_text_gets_the_same(store: MemoryStore, clock: ManualClock,
                                               tmp_path: object) -> None:
    """The separated note's links and judgement are those an add of its text gets where it
    was never folded (the same store but for the fold)."""
    coffee, cafe, part = _folded(store, clock)
    result = store.separate(cafe, part)
    with MemoryStore(":memory:", config=load_config(overrides={**FOLDING, "fold_threshold": 1.0,
                                                               "pending_threshold": 1.0}),
                     embedder=HashingEmbedder(dim=256),
                     clock=ManualClock("2026-01-10T12:00:00+00:00"), agent_id="u") as other:
        c = other.add(COFFEE, ["Alice"], id=coffee).id
        other.clock.advance(4 * 86400)  # type: ignore[attr-defined]
        other.add(CAFE, ["Alice"], id=cafe)
        added = other.add(CHANGE, ["Alice"], id=part)
        assert added.status == "created"
        assert sorted(added.links) == sorted(result.links)
        assert added.supersedes == result.supersedes == [c]


# ------------------------------------------------------------------ a merge's heat and links

LOSER = "Bob parks a blue car in the street near work."
SURVIVOR = "Bob parks a blue car in the street near work. It is an old estate."
GARAGE = "The garage on Elm Road closes at six."
TYRES = "Winter tyres are cheaper in October."


def _merged(store: MemoryStore, clock: ManualClock) -> tuple[str, str, str, str]:
    """(survivor, loser, a note that linked the loser alone, one that linked both), merged
    at night; the loser had been retrieved 3 times, the survivor 5."""
    loser = store.add(LOSER).id
    garage = store.add(GARAGE, enrich=False).id
    tyres = store.add(TYRES, enrich=False).id
    clock.advance(3 * 86400)
    survivor = store.add(SURVIVOR).id
    agent = store.agent_id
    # the links as the write path leaves them, both ways: the garage note linked the loser,
    # the tyres note both notes
    for note, links in ((loser, [garage, tyres]), (garage, [loser]), (tyres, [survivor, loser]),
                        (survivor, [tyres])):
        store.index.update_payload(note, agent, {"links": links})
    store.index.update_payload(loser, agent, {"retrieval_count": 3,
                                              "last_accessed": "2026-01-11T08:00:00+00:00"})
    store.index.update_payload(survivor, agent, {"retrieval_count": 5})
    report = store.consolidate()
    assert report.agents[agent].merged == [(loser, survivor)]
    merged = store.get(survivor, record_usage=False)
    assert merged.retrieval_count == 8 and loser in merged.evolution_history[-1]["merged"]
    assert store.get(garage, record_usage=False).links == [survivor]  # redirected
    assert store.get(tyres, record_usage=False).links == [survivor]
    assert sorted(merged.links) == sorted([tyres, garage])
    return survivor, loser, garage, tyres


def test_a_merge_separated_splits_its_heat_back(store: MemoryStore, clock: ManualClock) -> None:
    """The merged note gets back the count it brought (recorded at the merge); the
    retrievals since the merge stay with the note they returned (see docs/writes.md)."""
    survivor, loser, _, _ = _merged(store, clock)
    clock.advance(3600)
    for _ in range(2):  # found twice after the merge
        assert store.search("Bob blue car old estate", limit=1, expand_links=False)[0].id == survivor
    accessed = store.get(survivor, record_usage=False).last_accessed
    result = store.separate(survivor, loser)
    back, kept = store.get(loser, record_usage=False), store.get(survivor, record_usage=False)
    assert (back.retrieval_count, back.last_accessed) == (3, "2026-01-11T08:00:00+00:00")
    assert kept.retrieval_count == 5 + 2 and kept.last_accessed == accessed
    assert not [w for w in result.warnings if "retriev" in w]


def test_a_merge_separated_gets_its_links_back(store: MemoryStore, clock: ManualClock) -> None:
    survivor, loser, garage, tyres = _merged(store, clock)
    result = store.separate(survivor, loser)
    assert store.get(garage, record_usage=False).links == [loser]  # pointed at it again
    assert sorted(store.get(tyres, record_usage=False).links) == sorted([survivor, loser])
    assert store.get(survivor, record_usage=False).links == [tyres]  # what it linked itself
    assert sorted(store.get(loser, record_usage=False).links) == sorted([garage, tyres])
    assert sorted(result.relinked) == sorted([garage, tyres])
    # every link two-way, nothing owed: the nightly job finds nothing to mend
    report = store.consolidate()
    assert report.agents[store.agent_id].links_rewritten == 0
    assert report.agents[store.agent_id].links_completed == 0


def test_a_merge_recorded_before_its_heat_and_links_says_what_stays(
        store: MemoryStore, clock: ManualClock) -> None:
    survivor, loser, garage, _ = _merged(store, clock)
    stored = store.get(survivor, record_usage=False)
    legacy = [{k: v for k, v in e.items() if k not in ("heat", "links_moved")}
              for e in stored.evolution_history]
    store.index.update_payload(survivor, store.agent_id, {"evolution_history": legacy})
    result = store.separate(survivor, loser)
    assert store.get(survivor, record_usage=False).retrieval_count == 8  # kept, and said
    assert any("retrieval count" in w for w in result.warnings)
    assert any("links" in w and "point at" in w for w in result.warnings)
    assert store.get(garage, record_usage=False).links == [survivor]


class KeyedLLM:
    """A small LLM for the seam (``complete_json``), answering each step by its name: every
    link candidate linked; a new note that stopped coffee replaces every older note naming
    coffee; the calls kept."""

    model = "keyed"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def complete_json(self, system: str, user: str, *, schema: dict[str, object],
                      name: str) -> dict[str, object]:
        import re

        self.calls.append((name, user))
        if name == "note_enrichment":
            return {"keywords": ["alice"], "tags": ["alice"], "context": "About Alice.",
                    "category": "Personal", "note_type": "memory", "topics": ["alice"]}
        if name == "link_decisions":
            return {"links": [{"candidate": n, "link": True}
                              for n in range(1, user.count("<candidate") + 1)]}
        if name == "supersede_verdicts":
            older = re.findall(r"^(\d+)\. \(.*?\) (.*)$", user, flags=re.M)
            change = "stopped coffee" in user.splitlines()[0]  # the NEW note's line
            return {"verdicts": [{"candidate": int(n), "replaces": change and "coffee" in text}
                                 for n, text in older]}
        return {"updates": []}  # evolution: nothing changes


def test_with_an_llm_the_separated_text_is_linked_and_judged_by_it(clock: ManualClock) -> None:
    llm = KeyedLLM()
    with MemoryStore(":memory:", config=load_config(overrides=FOLDING),
                     embedder=HashingEmbedder(dim=256), clock=clock, agent_id="u",
                     llm=llm) as store:
        coffee, cafe, part = _folded(store, clock)
        llm.calls.clear()
        result = store.separate(cafe, part)
        asked = {name: user for name, user in llm.calls}
        assert CHANGE in asked["link_decisions"]  # the LLM verified its links, as at an add
        assert asked["supersede_verdicts"].startswith("NEW (")
        assert CHANGE in asked["supersede_verdicts"].splitlines()[0]
        assert coffee in result.links and result.supersedes == [coffee]
        assert store.get(coffee, record_usage=False).superseded_by == part
        assert part in store.get(coffee, record_usage=False).links
