"""A store that keeps its ranking table (``MemoryStore.keep_ranking_fields``, as ``amem
serve`` does) returns exactly what the same store without it returns, through writes,
heat and an index build; ``status`` shows the table."""

from __future__ import annotations

from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder

from .conftest import make_store

FACTS = [
    "Alice moved to Berlin in March for the new office",
    "Bob signed the database contract on Friday",
    "Carol leads the Apollo launch review",
    "Alice now lives in Paris, she left Berlin",
    "The Hermes release plan slipped to June",
    "Team lunch is on Friday at the Italian place",
    "Bob prefers tea over coffee in the morning",
    "Carol hired two engineers for the staging team",
]
QUERIES = ["where does Alice live", "who signed the contract", "Apollo launch",
           "what does Bob drink", "release plan", "who did Carol hire"]


def answers(store: object) -> list[list[tuple[str, float]]]:
    return [[(r.content, round(r.score, 9)) for r in store.search(q, limit=4)]  # type: ignore[attr-defined]
            for q in QUERIES]


def test_search_gives_the_same_results_with_the_ranking_table(
        embedder: HashingEmbedder) -> None:
    stores = [make_store("edge", embedder, ManualClock("2026-01-10T12:00:00+00:00"), heat=True)
              for _ in range(2)]
    plain, kept = stores
    try:
        for s in stores:
            for i, fact in enumerate(FACTS):
                s.add(fact, event_time=f"2026-01-0{i + 1}T09:00:00+00:00")
        assert kept.keep_ranking_fields(wait=30)
        assert not plain.info().rank_table  # only the process that asked keeps one
        table = kept.info().rank_table
        assert table is not None and table["state"] == "filled"
        assert table["points"] == kept.info().points
        assert answers(kept) == answers(plain)
        for s in stores:  # writes between searches: an edit, a delete, a new note, heat
            first = s.search("Bob contract", limit=1)[0].id
            s.update(first, content="Bob signed the database contract on Thursday")
            s.delete(s.search("Team lunch", limit=1)[0].id)
            s.add("Alice moved back to Berlin in May")
            s.get(s.search("where does Alice live", limit=1)[0].id)
        assert answers(kept) == answers(plain)
        for s in stores:
            s.optimize()
        assert kept.info().rank_table is not None
        assert kept.index.backend.field_table(wait=30)["passes"] == 2  # type: ignore[index]
        assert answers(kept) == answers(plain)
    finally:
        for s in stores:
            s.close()


def test_rank_table_zero_keeps_nothing(embedder: HashingEmbedder) -> None:
    with make_store("edge", embedder, ManualClock("2026-01-10T12:00:00+00:00"),
                    rank_table=0) as s:
        s.add("Alice moved to Berlin")
        assert s.keep_ranking_fields(wait=5) is False
        assert s.info().rank_table is None


def test_the_table_holds_every_agent_and_search_still_shows_only_the_callers(
        embedder: HashingEmbedder) -> None:
    """The table keeps the fields of every tenant's notes (one table a store); a search reads
    it only for the ids its own filtered query returned, so no agent sees another's notes."""
    with make_store("edge", embedder, ManualClock("2026-01-10T12:00:00+00:00")) as s:
        for fact in FACTS:
            s.add(fact, agent_id="alice")
            s.add(fact + " (bob's copy)", agent_id="bob")
        assert s.keep_ranking_fields(wait=30)
        assert s.info().rank_table["points"] == 2 * len(FACTS)  # type: ignore[index]
        for q in QUERIES:
            seen = s.search(q, limit=8, agent_id="alice")
            assert seen and all("bob's copy" not in r.content for r in seen)
            assert all("bob's copy" in r.content for r in s.search(q, limit=8, agent_id="bob"))
