"""LLM first, offline on any LLM failure: scripted model, then the real client over real HTTP."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from amem.enrich import FallbackEnricher, LLMEnricher, NoteView, OfflineEnricher, build_enricher
from amem.errors import LLMError, LLMResponseError, ValidationError
from amem.llm import LLMClient, LLMConfig
from tests.amem.enrich.scripted import ScriptedLLM
from tests.fakes import FakeOpenAI, error, garbage, json_reply, reject_format, slow

TEXT = "The deploy failed because the Qdrant collection had the wrong vector size; recreate it with e5."
GOOD: dict[str, Any] = {"keywords": ["Qdrant", "vector size"], "tags": ["qdrant"], "context": "A failed deploy.",
                        "category": "Technical", "note_type": "memory", "topics": ["deployment"]}


def combo(*steps: Any) -> FallbackEnricher:
    return FallbackEnricher(LLMEnricher(ScriptedLLM(list(steps))), OfflineEnricher())


def test_enrich_falls_back_on_llm_error_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="amem.enrich.fallback"):
        r = combo(LLMError("connection refused")).enrich(TEXT)
    assert r.enriched_by == "offline-fallback"
    assert r.warnings == ("LLM enrichment failed (LLMError: connection refused); used the offline rules",)
    assert r.category == "Technical" and "Qdrant collection" in r.keywords  # the offline result, not empty
    assert "LLM enrichment failed" in caplog.text


def test_wrong_shape_falls_back() -> None:
    r = combo({"keywords": "Qdrant"}).enrich(TEXT)
    assert r.enriched_by == "offline-fallback" and "LLMResponseError" in r.warnings[0]


def test_success_is_labelled_with_the_model() -> None:
    r = combo(GOOD).enrich(TEXT)
    assert r.enriched_by == "llm:scripted" and r.warnings == ()


def test_links_and_evolution_fall_back_too() -> None:
    cands = [("a", "Qdrant snapshots are slow.", 0.5), ("b", "Lunch with Anna.", 0.5)]
    links = combo(LLMResponseError("bad", raw="x")).verify_links(TEXT, cands)
    assert links == ["a"] and links.decided_by == "offline-fallback" and "link verification" in links.warnings[0]
    new = NoteView("new", TEXT, keywords=("Qdrant collection",))
    nb = NoteView("n1", "Qdrant collection settings.", "Settings.", (), ("settings",))
    evolved = combo(LLMError("timeout")).evolve(new, [nb])
    assert evolved.decided_by == "offline-fallback" and evolved[0].tags == ("settings", "qdrant-collection")
    assert evolved[0].decided_by == "offline-fallback"


def test_bad_input_is_not_a_model_failure() -> None:
    with pytest.raises(ValidationError):
        combo(GOOD).enrich("   ")
    with pytest.raises(ValidationError):
        combo().verify_links(TEXT, [("a", "b")])  # type: ignore[list-item]


def test_build_enricher() -> None:
    assert isinstance(build_enricher(None), OfflineEnricher)
    assert isinstance(build_enricher(ScriptedLLM([])), FallbackEnricher)


# ---------------------------------------------------------------- the real client over real HTTP


class NoSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def http_enricher(server: FakeOpenAI, **cfg: Any) -> tuple[FallbackEnricher, LLMClient]:
    config = LLMConfig(**{"base_url": server.url, "model": "fake", "read_timeout": 2.0, "max_retries": 1, **cfg})
    client = LLMClient(config, sleep=NoSleep())
    return FallbackEnricher(LLMEnricher(client)), client


def test_http_normal(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(json_reply(GOOD))
    enricher, client = http_enricher(fake_openai)
    with client:
        r = enricher.enrich(TEXT)
    assert r.enriched_by == "llm:fake" and r.keywords == ("Qdrant", "vector size")


@pytest.mark.parametrize("name, script, expect_in_warning, requests", [
    ("slow", [slow(1.0), slow(1.0)], "timed out", 2),
    ("500", [error(500), error(502)], "HTTP 502", 2),
    ("garbage", [garbage()], "not JSON", 1),
    ("wrong schema", [json_reply({"keywords": ["x"], "tags": ["y"]})], "missing the required key", 1),
    ("empty object", [json_reply({})], "missing the required key", 1),
])
def test_http_failures_fall_back(fake_openai: FakeOpenAI, name: str, script: list[Any], expect_in_warning: str,
                                 requests: int) -> None:
    fake_openai.script(*script)
    enricher, client = http_enricher(fake_openai, read_timeout=0.15)
    with client:
        r = enricher.enrich(TEXT)
    assert r.enriched_by == "offline-fallback", name
    assert expect_in_warning in r.warnings[0]
    assert r.category == "Technical" and r.keywords
    assert len(fake_openai.requests) == requests


def test_http_429_then_ok(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(error(429, retry_after="0"), json_reply(GOOD))
    enricher, client = http_enricher(fake_openai)
    with client:
        assert enricher.enrich(TEXT).enriched_by == "llm:fake"


def test_http_ladder_downgrade_then_ok(fake_openai: FakeOpenAI) -> None:
    fake_openai.set_default(reject_format("json_schema", json_reply(GOOD)))
    enricher, client = http_enricher(fake_openai)
    with client:
        assert enricher.enrich(TEXT).enriched_by == "llm:fake"
        assert enricher.enrich(TEXT).enriched_by == "llm:fake"
    assert [r.response_format for r in fake_openai.requests] == ["json_schema", "json_object", "json_object"]


def test_http_open_circuit_falls_back_without_calling(fake_openai: FakeOpenAI) -> None:
    fake_openai.set_default(error(503, "down"))
    now = [0.0]
    config = LLMConfig(base_url=fake_openai.url, model="fake", max_retries=0, breaker_threshold=2,
                       breaker_cooldown=60.0)
    with LLMClient(config, clock=lambda: now[0], sleep=NoSleep()) as client:
        enricher = FallbackEnricher(LLMEnricher(client))
        for _ in range(2):
            assert "HTTP 503" in enricher.enrich(TEXT).warnings[0]
        r = enricher.enrich(TEXT)
        assert r.enriched_by == "offline-fallback" and "circuit open" in r.warnings[0]
        assert len(fake_openai.requests) == 2
        now[0] += 61
        fake_openai.set_default(json_reply(GOOD))
        assert enricher.enrich(TEXT).enriched_by == "llm:fake"
        assert client.breaker.state == "closed"
