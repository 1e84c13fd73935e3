"""A hostile or broken LLM: every field capped with a warning, every failure an offline fallback."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from amem.enrich import FallbackEnricher, LLMEnricher, NoteView, OfflineEnricher
from tests.amem.enrich.scripted import ScriptedLLM

TEXT = "The Qdrant collection uses 384-dimensional vectors from the e5 embedder."
GOOD: dict[str, Any] = {"keywords": ["Qdrant", "e5"], "tags": ["vector-db"], "context": "Vector settings.",
                        "category": "Technical", "note_type": "knowledge", "topics": ["databases"]}


@dataclass
class UncheckedLLM:
    """An LLM that hands back whatever it is given, unchecked (a third-party implementation of
    the seam that does not validate replies), or raises what it is given."""

    steps: list[Any]
    model: str = "unchecked"
    calls: list[str] = field(default_factory=list)

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        raise AssertionError("enrichment asks for JSON only (complete_json)")

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any], name: str) -> dict[str, Any]:
        self.calls.append(name)
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step  # type: ignore[no-any-return]


def fallback(llm: Any) -> FallbackEnricher:
    return FallbackEnricher(LLMEnricher(llm), OfflineEnricher())


# ---------------------------------------------------------------- any failure falls back


@pytest.mark.parametrize("step", [
    TypeError("sequence item 0: expected str instance, int found"),
    KeyError("choices"),
    RuntimeError("a bug"),
    {"keywords": ["x"]},  # missing keys: KeyError inside the enricher
    {**GOOD, "keywords": 5},  # not iterable: TypeError inside the enricher
    {**GOOD, "category": "Cooking"},
    {**GOOD, "category": ["Technical"]},  # unhashable where a string belongs
], ids=["TypeError", "KeyError", "RuntimeError", "missing-keys", "keywords-number", "bad-category",
        "category-list"])
def test_any_failure_of_the_llm_path_falls_back_visibly(step: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="amem.enrich.fallback"):
        r = fallback(UncheckedLLM([step])).enrich(TEXT)
    assert r.enriched_by == "offline-fallback"
    assert r.keywords and r.warnings[0].startswith("LLM enrichment failed (")
    assert "LLM enrichment failed" in caplog.text


def test_a_non_llm_error_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="amem.enrich.fallback"):
        fallback(UncheckedLLM([TypeError("boom")])).enrich(TEXT)
    assert caplog.records[-1].exc_info is not None  # a bug: the traceback is kept for whoever fixes it


def test_links_and_evolution_fall_back_on_any_failure() -> None:
    cands = [("a", "Qdrant snapshots are slow.", 0.5)]
    links = fallback(UncheckedLLM([{"links": [{"candidate": "1"}]}])).verify_links(TEXT, cands)
    assert links.decided_by == "offline-fallback" and "link verification failed" in links.warnings[0]
    nb = NoteView("n1", "Qdrant collection settings.", "Settings.", (), ("settings",))
    evolved = fallback(UncheckedLLM([{"updates": [{"neighbour": 1, "context": "c"}]}])).evolve(
        NoteView("new", TEXT, keywords=("Qdrant",)), [nb])
    assert evolved.decided_by == "offline-fallback" and "memory evolution failed" in evolved.warnings[0]


def test_a_huge_error_message_is_cut_in_the_warning() -> None:
    r = fallback(UncheckedLLM([RuntimeError("x" * 100_000)])).enrich(TEXT)
    assert len(r.warnings[0]) < 700


# ---------------------------------------------------------------- fields are capped


def test_an_overlong_keyword_tag_or_topic_is_dropped_with_a_warning() -> None:
    reply = {**GOOD, "keywords": ["k" * 5000, "Qdrant"], "tags": ["t" * 5000, "vector-db"], "topics": ["p" * 500]}
    r = LLMEnricher(ScriptedLLM([reply])).enrich(TEXT)
    assert r.keywords == ("Qdrant",) and r.tags == ("vector-db",) and r.topics == ()
    assert r.enriched_by == "llm:scripted"
    assert "dropped 1 of the LLM's keywords longer than 60 characters" in r.warnings
    assert "dropped 1 of the LLM's tags longer than 60 characters" in r.warnings
    assert "dropped 1 of the LLM's topics longer than 60 characters" in r.warnings


def test_too_many_terms_are_cut_with_a_warning() -> None:
    reply = {**GOOD, "keywords": [f"kw{i}" for i in range(1000)], "tags": [f"t{i}" for i in range(50)]}
    r = LLMEnricher(ScriptedLLM([reply])).enrich(TEXT)
    assert len(r.keywords) == 10 and len(r.tags) == 10
    assert "kept the first 10 of the LLM's 1000 keywords" in r.warnings


def test_a_long_context_is_trimmed_with_a_warning() -> None:
    r = LLMEnricher(ScriptedLLM([{**GOOD, "context": "word " * 2000}])).enrich(TEXT)
    assert len(r.context) <= 300
    assert any(w.startswith("trimmed the LLM's context from 9999 to 300") for w in r.warnings)


def test_fields_the_schema_lacks_are_ignored_with_a_warning() -> None:
    reply = {**GOOD, "agent_id": "victim", "links": ["other-agent/note-1"], "id": "x" * 1000}
    r = LLMEnricher(ScriptedLLM([reply])).enrich(TEXT)
    assert r.enriched_by == "llm:scripted"
    warning = next(w for w in r.warnings if w.startswith("ignored field(s)"))
    assert "'agent_id'" in warning and "'links'" in warning and len(warning) < 200


def test_thousands_of_invented_candidates_make_one_warning() -> None:
    cands = [("a", "Qdrant snapshots.", 0.5)]
    reply = {"links": [{"candidate": n, "link": True} for n in range(2, 5000)] + [{"candidate": 1, "link": True}]}
    decision = LLMEnricher(ScriptedLLM([reply])).verify_links(TEXT, cands)
    assert decision == ["a"]
    assert len(decision.warnings) == 1 and "and 4993 more" in decision.warnings[0]


def test_evolution_caps_context_and_tags_of_neighbours() -> None:
    nb = NoteView("n1", "Qdrant collection settings.", "Settings.", (), ("settings",))
    reply = {"updates": [{"neighbour": 1, "context": "c " * 1000, "tags": ["t" * 500, "qdrant"]},
                         *({"neighbour": n, "context": "x", "tags": ["y"]} for n in range(2, 100))]}
    decision = LLMEnricher(ScriptedLLM([reply])).evolve(NoteView("new", TEXT), [nb])
    assert decision[0].tags == ("qdrant",) and len(decision[0].context) <= 300
    assert any("neighbour 1" in w and "longer than 60" in w for w in decision.warnings)
    assert any("and 93 more" in w for w in decision.warnings)
