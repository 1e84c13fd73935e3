"""The LLM enricher with a scripted model: prompts, normalisation, id mapping, warnings."""

from __future__ import annotations

from typing import Any

import pytest

from amem.enrich import LLMEnricher, NoteView
from amem.enrich.prompts import ENRICH_SCHEMA
from amem.errors import LLMResponseError, ValidationError
from tests.amem.enrich.scripted import ScriptedLLM

GOOD: dict[str, Any] = {
    "keywords": ["Qdrant", " qdrant ", "vector size", "e5"],
    "tags": ["Vector DB", "migration", "vector-db"],
    "context": "A note about\nmigrating the store to the e5 embedder.",
    "category": "Technical",
    "note_type": "knowledge",
    "topics": ["Databases"],
}


def test_enrich_normalises_the_reply() -> None:
    llm = ScriptedLLM([GOOD])
    r = LLMEnricher(llm).enrich("Migrating Qdrant to e5 changes the vector size.")
    assert r.keywords == ("Qdrant", "vector size", "e5")
    assert r.tags == ("vector-db", "migration")
    assert r.context == "A note about migrating the store to the e5 embedder."
    assert (r.category, r.note_type, r.topics) == ("Technical", "knowledge", ("databases",))
    assert r.enriched_by == "llm:scripted" and r.warnings == ()
    call = llm.calls[0]
    assert call["name"] == "note_enrichment"
    assert "<note>\nMigrating Qdrant to e5 changes the vector size.\n</note>" in call["user"]


@pytest.mark.parametrize("change, message", [
    ({"category": "Cooking"}, r"\$\.category should be one of"),
    ({"keywords": []}, "at least 1 item"),
    ({"context": "   "}, "at least 1 character"),
    ({"note_type": "episode"}, r"\$\.note_type"),
])
def test_enrich_rejects_wrong_shapes(change: dict[str, Any], message: str) -> None:
    with pytest.raises(LLMResponseError, match=message):
        LLMEnricher(ScriptedLLM([{**GOOD, **change}])).enrich("some text")


def test_enrich_rejects_blank_after_cleaning() -> None:
    with pytest.raises(LLMResponseError, match="blank keywords"):
        LLMEnricher(ScriptedLLM([{**GOOD, "tags": ["!!!"]}])).enrich("some text")


def test_schema_lists_every_category() -> None:
    assert ENRICH_SCHEMA["properties"]["category"]["enum"] == [
        "Technical", "Business", "Personal", "Project", "Research", "System", "General"]


CANDS = [("id-a", "Qdrant snapshot notes", 0.8), ("id-b", "Lunch with Anna", 0.4), ("id-c", "e5 embedder", 0.6)]


def test_verify_links_maps_numbers_back_to_ids() -> None:
    llm = ScriptedLLM([{"links": [{"candidate": 1, "link": True}, {"candidate": 2, "link": False},
                                  {"candidate": 3, "link": True}]}])
    decision = LLMEnricher(llm).verify_links("Migrating Qdrant to e5", CANDS)
    assert decision == ["id-a", "id-c"] and decision.decided_by == "llm:scripted"
    user = llm.calls[0]["user"]
    assert '<candidate n="1">\nQdrant snapshot notes\n</candidate>' in user
    assert "id-a" not in user  # the model sees numbers, not ids


def test_verify_links_warns_about_invented_and_missing_verdicts(caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM([{"links": [{"candidate": 7, "link": True}, {"candidate": 1, "link": True}]}])
    decision = LLMEnricher(llm).verify_links("note", CANDS)
    assert decision == ["id-a"]
    assert any("candidate 7" in w for w in decision.warnings)
    assert any("candidate(s) 2, 3" in w for w in decision.warnings)
    assert "does not exist" in caplog.text


def test_verify_links_without_candidates_makes_no_call() -> None:
    llm = ScriptedLLM([])
    assert LLMEnricher(llm).verify_links("note", []) == [] and llm.calls == []


def test_evolve_returns_only_changed_neighbours() -> None:
    n1 = NoteView("n1", "Qdrant runs embedded.", "Qdrant in embedded mode.", ("qdrant",), ("qdrant",))
    n2 = NoteView("n2", "Lunch with Anna.", "A lunch.", (), ("lunch",))
    n3 = NoteView("n3", "e5 is the default embedder.", "", (), ())
    n4 = NoteView("n4", "never sent", "", (), ())
    llm = ScriptedLLM([{"updates": [
        {"neighbour": 1, "context": "Qdrant in embedded mode; being migrated to e5.", "tags": ["qdrant", "Migration"]},
        {"neighbour": 2, "context": "A lunch.", "tags": ["lunch"]},  # unchanged: dropped
        {"neighbour": 9, "context": "x", "tags": ["x"]},  # invented: warned
    ]}])
    new = NoteView("new", "Migrating Qdrant to e5", keywords=("Qdrant",))
    decision = LLMEnricher(llm).evolve(new, [n1, n2, n3, n4])
    assert [u.id for u in decision] == ["n1"]
    assert decision[0].tags == ("qdrant", "migration") and decision[0].decided_by == "llm:scripted"
    assert any("neighbour 9" in w for w in decision.warnings)
    assert "never sent" not in llm.calls[0]["user"]  # at most 3 neighbours go to the model
    assert "[current context] (none)" in llm.calls[0]["user"]


def test_evolve_without_neighbours_makes_no_call_and_checks_types() -> None:
    llm = ScriptedLLM([])
    note = NoteView("n", "text")
    assert LLMEnricher(llm).evolve(note, []) == [] and llm.calls == []
    with pytest.raises(ValidationError):
        LLMEnricher(llm).evolve("n", [])  # type: ignore[arg-type]
