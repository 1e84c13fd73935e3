"""Supersession on the write path, in search, on edit and delete, nightly (issue 16, item 2)."""

from __future__ import annotations

from typing import Iterator

import pytest

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from amem.embed import make_embedder
from amem.enrich.base import OFFLINE_FALLBACK
from amem.llm import LLMClient, LLMConfig
from amem.supersede import SYSTEM, FactView, LLMJudge, check
from tests.fakes import fake_openai  # noqa: F401  (a pytest fixture, used by name)
from tests.fakes.openai_server import FakeOpenAI, error, json_reply

COFFEE = "Alice drinks coffee every morning"
TEA = "Alice stopped coffee, she drinks tea now"


def _ids(results: list) -> list[str]:  # type: ignore[type-arg]
    return [r.id for r in results]


def test_a_newer_fact_supersedes_the_older_one_and_search_shows_the_current(
        store: MemoryStore) -> None:
    old = store.add(COFFEE, ["Alice"], timestamp="2026-01-01").id
    added = store.add(TEA, ["Alice"], timestamp="2026-01-05")
    assert added.supersedes == [old]
    assert store.get(old).superseded_by == added.id
    assert store.get(added.id).supersedes == [old]
    assert store.get(old).evolution_history[-1]["action"] == "superseded"
    current = store.search("what does Alice drink, coffee?", limit=5)
    assert old not in _ids(current) and added.id in _ids(current)
    history = store.search("what does Alice drink, coffee?", limit=5, include_superseded=True)
    at = _ids(history).index(old)
    assert _ids(history)[at - 1] == added.id and history[at].superseded_by == added.id
    assert [r.id for r in history if r.superseded_by] == [old]


def test_no_supersession_across_agents_subjects_or_back_in_time(edge_store: MemoryStore) -> None:
    store = edge_store
    mine = store.add(COFFEE, ["Alice"], agent_id="a1").id
    store.add(TEA, ["Alice"], agent_id="a2")  # another tenant's Alice
    store.add("Bob stopped coffee, he drinks tea now", ["Bob"], agent_id="a1")
    assert store.get(mine, agent_id="a1").superseded_by is None
    later = store.add(COFFEE.replace("every", "each"), ["Alice"], agent_id="a3",
                      timestamp="2026-03-01").id
    store.add(TEA, ["Alice"], agent_id="a3", timestamp="2026-02-01")  # written late, older
    assert store.get(later, agent_id="a3").superseded_by is None


def test_deleting_the_newer_note_makes_the_older_current_again(edge_store: MemoryStore) -> None:
    store = edge_store
    old = store.add(COFFEE, ["Alice"]).id
    new = store.add(TEA, ["Alice"]).id
    assert store.get(old).superseded_by == new
    deleted = store.delete(new)
    # the caller is told which fact shows again
    assert deleted.id == new and deleted.released == [old] and not deleted.note.is_active
    assert deleted.to_dict() == {"id": new, "deleted": True, "released": [old]}
    assert store.get(old).superseded_by is None
    assert old in _ids(store.search("Alice coffee", limit=3))


def test_an_edit_checks_supersession_again(edge_store: MemoryStore) -> None:
    store = edge_store
    old = store.add(COFFEE, ["Alice"]).id
    new = store.add("Alice likes hiking in the Alps", ["Alice"]).id
    assert store.get(old).superseded_by is None
    made = store.update(new, content=TEA)
    assert made.supersedes == [old] and store.get(old).superseded_by == new
    undone = store.update(new, content="Alice likes hiking in the Alps")
    assert undone.released == [old] and store.get(old).superseded_by is None
    assert store.get(new).supersedes == []


def test_the_nightly_sweep_finds_what_a_bulk_import_skipped(edge_store: MemoryStore) -> None:
    store = edge_store
    # a batch judges supersession itself (tests/amem/store/test_bulk_writes.py); with the
    # judgement off, the nightly sweep finds what it missed
    store.add_many([{"text": COFFEE, "subjects": ["Alice"], "timestamp": "2026-01-01"},
                    {"text": "Alice lives in Paris", "subjects": ["Alice"],
                     "timestamp": "2026-01-01"},
                    {"text": TEA, "subjects": ["Alice"], "timestamp": "2026-01-05"}],
                   supersede=False)
    assert all(n.superseded_by is None for n, _ in store.iter_notes())
    report = store.consolidate()
    assert report.to_dict()["superseded"] == 1
    marked = {n.content: n.superseded_by for n, _ in store.iter_notes()}
    assert marked[COFFEE] is not None and marked["Alice lives in Paris"] is None
    assert store.consolidate().to_dict()["superseded"] == 0  # a second night finds nothing new


def _client(server: FakeOpenAI) -> LLMClient:
    return LLMClient(LLMConfig(base_url=server.url, model="judge", max_retries=0,
                               connect_timeout=1.0, read_timeout=2.0, deadline=2.0))


def test_the_llm_judge_decides_and_falls_back_visibly(fake_openai: FakeOpenAI) -> None:
    new = FactView("n", "These days Alice prefers tea", ("Alice",))
    # measured as ``candidates`` measures them: the rule hides no pair nobody measured
    older = [FactView("o1", "Alice drinks coffee", ("Alice",), similarity=0.4),
             FactView("o2", "Alice likes jazz", ("Alice",), similarity=0.4)]
    fake_openai.script(json_reply({"verdicts": [{"candidate": 1, "replaces": True},
                                                {"candidate": 2, "replaces": False},
                                                {"candidate": 7, "replaces": True}]}))
    with _client(fake_openai) as client:
        verdict = LLMJudge(client).judge(new, older)
        assert verdict.ids == ["o1"] and verdict.decided_by == "llm:judge"
        assert any("do not exist" in w for w in verdict.warnings)
        asked = fake_openai.requests[-1]
        assert asked.system.startswith(SYSTEM) and "Alice likes jazz" in asked.user
        fake_openai.script(error(500))
        fallback = LLMJudge(client).judge(new, older)
    assert fallback.decided_by == OFFLINE_FALLBACK and fallback.warnings
    assert fallback.ids == ["o1"]  # the rule: "these days", and tea and coffee are drinks


def test_the_store_marks_what_the_llm_judge_says(edge_store: MemoryStore,
                                                 fake_openai: FakeOpenAI) -> None:
    old = edge_store.add("Alice drinks coffee", ["Alice"]).id
    new = edge_store.add("Alice prefers green tea", ["Alice"]).id  # no change phrase: rule says no
    assert edge_store.get(old).superseded_by is None
    note, vector = edge_store.index.load(new, edge_store.agent_id, with_vector=True)
    assert vector is not None
    fake_openai.script(json_reply({"verdicts": [{"candidate": 1, "replaces": True}]}))
    with _client(fake_openai) as client:
        outcome = check(edge_store.index, note, vector, LLMJudge(client))
    assert outcome.superseded == [old] and outcome.decided_by == "llm:judge"
    assert edge_store.get(old).superseded_by == new


@pytest.fixture(scope="module")
def e5_store() -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=make_embedder("e5-small"),
                     clock=ManualClock("2026-01-10T12:00:00+00:00")) as store:
        yield store


def test_the_issue_example_with_the_default_embedder(e5_store: MemoryStore) -> None:
    """Both notes used to come back with similar scores; now the current one answers."""
    coffee = e5_store.add("The user drinks coffee every morning", timestamp="2026-01-01").id
    e5_store.add("The office plant needs water on Mondays", timestamp="2026-01-02")
    tea = e5_store.add("The user stopped coffee and drinks tea instead",
                       timestamp="2026-01-08")
    assert tea.supersedes == [coffee]
    found = e5_store.search("what does the user drink?", limit=2, expand_links=False)
    assert found[0].id == tea.id and coffee not in _ids(found)
    both = e5_store.search("what does the user drink?", limit=3, expand_links=False,
                           include_superseded=True)
    assert _ids(both)[:2] == [tea.id, coffee]


def test_a_fact_named_in_the_possessive_is_replaced_with_the_default_embedder(
        e5_store: MemoryStore) -> None:
    """An agent's note about someone else, without subjects: "Mia's phone number is ..." is
    replaced by "Mia has a new phone number ...", and a search shows the new number."""
    agent = "possessive"
    old = e5_store.add("Mia's phone number is 555-0101", agent_id=agent,
                       timestamp="2026-01-02").id
    sister = e5_store.add("Mia's sister lives in Rome", agent_id=agent,
                          timestamp="2026-01-03").id
    new = e5_store.add("Mia has a new phone number: 555-0199", agent_id=agent,
                       timestamp="2026-01-09")
    assert new.supersedes == [old]
    assert e5_store.get(old, agent_id=agent).superseded_by == new.id
    assert not e5_store.get(sister, agent_id=agent).superseded_by
    found = e5_store.search("what is Mia's phone number?", agent_id=agent, limit=2,
                            expand_links=False)
    assert found[0].id == new.id and old not in _ids(found)


def test_notes_of_an_older_store_without_the_fields_stay_current(store: MemoryStore) -> None:
    from amem.notes import Note

    note = Note(id="old-1", content="Frank keeps bees on the roof", agent_id=store.agent_id)
    point = store.index.make_point(note, store.index.embed_passages([note.content])[0])
    for name in ("superseded_by", "supersedes"):  # written before these fields existed
        point.payload.pop(name)
    store.index.write_points([point])
    assert "old-1" in _ids(store.search("Frank bees", limit=3))
    assert store.get("old-1").superseded_by is None and store.get("old-1").supersedes == []


def test_the_readme_step_two_example_ranks_the_new_fact_first(e5_store: MemoryStore) -> None:
    """README "First five minutes", step 2, over the quickstart's notes (examples/notes.jsonl):
    the staging database moved. The new fact answers first; no unrelated note is hidden."""
    import json
    from pathlib import Path

    from amem.importer import import_file

    agent = "readme-step-2"
    notes = Path(__file__).resolve().parents[3] / "examples" / "notes.jsonl"
    import_file(e5_store, notes, agent_id=agent)
    before = {n.id for n, _ in e5_store.iter_notes(agent_id=agent)}
    added = e5_store.add("The staging database moved to db-2.internal on Monday", ["infra"],
                         agent_id=agent)
    found = e5_store.search("where is the staging database?", agent_id=agent, limit=3)
    assert found[0].id == added.id, [r.content for r in found]
    old = [json.loads(line)["text"] for line in notes.read_text().splitlines() if "staging" in line]
    hidden = {i for i in before if e5_store.get(i, agent_id=agent).superseded_by}
    # the only note it may hide is the older staging-database fact it replaces
    assert {e5_store.get(i, agent_id=agent).content for i in hidden} <= set(old)
    # ... and that note also tells when backups run, which the move does not change: it is
    # changed in part, so it stays shown, after the new fact (it was hidden whole, and the
    # backup time with it: exploratory test, 2026-12-05)
    (db,) = [i for i in before if "backups happen nightly" in e5_store.get(i, agent_id=agent).content]
    assert not hidden and e5_store.get(db, agent_id=agent).partly_superseded_by == added.id
    assert any("changes part of" in w and db in w and "03:00 UTC" in w for w in added.warnings), added.warnings
    ids = [r.id for r in found]
    assert db in ids and ids.index(db) > ids.index(added.id)
    assert [r.partly_superseded_by for r in found if r.id == db] == [added.id]
    backups = e5_store.search("what time do backups happen?", agent_id=agent, limit=5)
    assert db in [r.id for r in backups]
