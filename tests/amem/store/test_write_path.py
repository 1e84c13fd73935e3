"""The add pipeline: dedup, fold, pending merge, enrichment, links, evolution, LLM fallback."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.llm import LLMClient, LLMConfig
from amem.notes import point_id
from tests.fakes.embedders import RecordingEmbedder


def store_with(embedder: HashingEmbedder, clock: ManualClock, llm: Any = None,
               **overrides: Any) -> MemoryStore:
    return MemoryStore(":memory:", config=load_config(overrides=overrides), embedder=embedder,
                       clock=clock, llm=llm)


def test_exact_duplicate_returns_existing_id_and_writes_nothing(edge_store: MemoryStore) -> None:
    first = edge_store.add("Alice prefers green tea over coffee")
    again = edge_store.add("Alice  prefers green tea over coffee")  # whitespace-only difference
    assert first.status == "created" and again.status == "deduplicated"
    assert again.id == first.id and edge_store.count() == 1


def test_offline_enrichment_fills_the_note(edge_store: MemoryStore) -> None:
    res = edge_store.add("The staging PostgreSQL database needs a vacuum before the Friday release.")
    note = edge_store.get(res.id)
    assert res.enriched_by == "offline" and note.enriched_by == "offline"
    assert note.keywords and note.context and note.category in (
        "Technical", "Business", "Personal", "Project", "Research", "System", "General")
    assert any("postgresql" in k.lower() for k in note.keywords)


def test_caller_given_fields_are_kept(edge_store: MemoryStore) -> None:
    res = edge_store.add("ping", keywords=["k"], tags=["t"], category="System", context="c")
    note = edge_store.get(res.id)
    assert (note.keywords, note.tags, note.category, note.context, note.enriched_by) == (
        ["k"], ["t"], "System", "c", "given")


def test_near_duplicate_folds_into_existing(embedder: HashingEmbedder, clock: ManualClock) -> None:
    with store_with(embedder, clock, fold_threshold=0.8, pending_threshold=0.6) as store:
        first = store.add("The deploy pipeline runs make release after CI is green on main branch")
        folded = store.add("The deploy pipeline runs make release after CI is green on the main branch")
        assert folded.status == "folded" and folded.id == first.id and folded.similarity >= 0.8
        note = store.get(first.id)
        assert "the main branch" in note.content and store.count() == 1
        assert note.evolution_history[-1]["action"] == "fold"
        # the folded text is recognised as an exact duplicate from now on
        again = store.add("The deploy pipeline runs make release after CI is green on the main branch")
        assert again.status == "deduplicated" and again.id == first.id


def test_middle_band_is_stored_flagged_pending_merge(embedder: HashingEmbedder,
                                                     clock: ManualClock) -> None:
    with store_with(embedder, clock, fold_threshold=0.99, pending_threshold=0.5) as store:
        store.add("Bob is allergic to peanuts and shellfish")
        res = store.add("Bob is allergic to peanuts, order vegetarian lunch")
        assert res.status == "pending_merge" and 0.5 <= res.similarity < 0.99
        assert store.get(res.id).pending_merge is True and store.count() == 2


def test_links_are_written_both_ways_and_evolution_is_recorded(embedder: HashingEmbedder,
                                                               clock: ManualClock) -> None:
    with store_with(embedder, clock, fold_threshold=0.99, pending_threshold=0.98,
                    link_floor=0.2) as store:
        a = store.add("Project Falcon launch moved to March because of the payment review")
        b = store.add("Project Falcon payment review is done by the security team in March")
        assert a.id in b.links
        assert b.id in store.get(a.id).links
        # offline rule: the new note's keywords that the neighbour also mentions become its tags
        assert b.evolved == [a.id]
        evolved = store.get(a.id)
        history = evolved.evolution_history[-1]
        assert history["triggered_by"] == b.id and history["action"] == "evolve"
        assert set(history) >= {"at", "old_context", "new_context", "old_tags", "new_tags"}
        assert evolved.tags == history["new_tags"] != history["old_tags"]


def test_evolution_cadence_setting(embedder: HashingEmbedder, clock: ManualClock) -> None:
    with store_with(embedder, clock, fold_threshold=0.99, pending_threshold=0.98, link_floor=0.2,
                    evolve_max=0) as store:
        store.add("Project Falcon launch moved to March because of the payment review")
        res = store.add("Project Falcon payment review is done by the security team in March")
        assert res.evolved == []


def test_fast_path_stores_as_given(edge_store: MemoryStore) -> None:
    edge_store.add("Project Falcon launch moved to March", enrich=False)
    res = edge_store.add("Project Falcon launch moved to March again", enrich=False)
    assert res.status == "created" and res.links == [] and res.enriched_by == "none"
    note = edge_store.get(res.id)
    assert note.keywords == [] and note.context == ""


def test_add_many_dedups_within_and_across_batches(edge_store: MemoryStore) -> None:
    items = [{"text": f"bulk {i % 5}"} for i in range(12)]
    results = edge_store.add_many(items, enrich=False)
    assert [r.status for r in results].count("created") == 5
    assert edge_store.count() == 5


def _dead_llm() -> LLMClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": "down"})

    config = LLMConfig(base_url="http://llm.invalid/v1", model="m", max_retries=0)
    return LLMClient(config, http=httpx.Client(transport=httpx.MockTransport(handler)),
                     sleep=lambda s: None)


def test_dead_llm_falls_back_offline_and_says_so(embedder: HashingEmbedder, clock: ManualClock) -> None:
    with store_with(embedder, clock, llm=_dead_llm()) as store:
        res = store.add("Carol's birthday is on 12 August; she likes board games")
        assert res.status == "created" and res.enriched_by == "offline-fallback"
        assert res.warnings
        note = store.get(res.id)
        assert note.keywords and note.enriched_by == "offline-fallback" and note.warnings


def test_llm_enrichment_through_the_wire(embedder: HashingEmbedder, clock: ManualClock) -> None:
    import json

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        system = body["messages"][0]["content"].lower()
        if "link" in system and "candidate" in system:
            content = {"decisions": []}
        else:
            content = {"keywords": ["birthday", "board games"], "tags": ["carol", "birthday"],
                       "context": "Carol's birthday and hobbies.", "category": "Personal",
                       "note_type": "memory", "topics": ["people"]}
        return httpx.Response(200, json={"choices": [{"message": {"content": json.dumps(content)}}]})

    client = LLMClient(LLMConfig(base_url="http://llm.test/v1", model="fake-model"),
                       http=httpx.Client(transport=httpx.MockTransport(handler)))
    with store_with(embedder, clock, llm=client) as store:
        res = store.add("Carol's birthday is on 12 August; she likes board games")
        note = store.get(res.id)
        assert res.enriched_by == "llm:fake-model", res
        assert note.category == "Personal" and "birthday" in note.keywords


def test_evolution_re_embeds_only_notes_whose_embedded_text_changed(clock: ManualClock) -> None:
    recorder = RecordingEmbedder()
    texts = [
        "Project Falcon launch moved to March because of the payment review",
        "Project Falcon payment review is done by the security team in March",
        "The security team launches the Falcon payments audit in March",
        "Falcon payment reviews: the security team signs off before the March launch",
        "March launch of Project Falcon waits for payments and security sign-off",
    ]
    with store_with(recorder, clock, fold_threshold=0.99, pending_threshold=0.98,
                    link_floor=0.1) as store:
        evolved = []
        for text in texts:
            evolved += store.add(text).evolved
        assert len(evolved) >= 4  # the scenario really evolves linked notes
        notes = [n for n, _ in store.iter_notes()]
        # every stored vector is still the embedding of the note's current embedded text
        for note in notes:
            hit = store.index.backend.retrieve([point_id(note.agent_id, note.id)], with_vectors=True)[0]
            assert hit.dense is not None
            want = recorder.embed([note.embed_text()], kind="query")[0]
            assert np.allclose(hit.dense, want / np.linalg.norm(want), atol=1e-5), note.content
        # and no identical text was embedded twice (an unchanged text keeps its vector)
        assert len(recorder.passages) == len(set(recorder.passages))
        # evolution that only tags words already in the content leaves the embedded text alone
        assert len(recorder.passages) < len(texts) + len(evolved)


def test_fold_appends_only_new_sentences_and_history_keeps_the_whole_text(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    turn = "Caroline: I went to the LGBTQ support group yesterday. It was so powerful and moving."
    with store_with(embedder, clock, fold_threshold=0.7, pending_threshold=0.6) as store:
        first = store.add(f"{turn} Melanie: Wow, that sounds great!")
        again = f"{turn} Melanie: Did you meet anyone new?"
        folded = store.add(again)
        assert folded.status == "folded" and folded.id == first.id
        note = store.get(first.id)
        assert note.content.count("support group") == 1  # the shared turn is stored once
        assert note.content.endswith("\n\nMelanie: Did you meet anyone new?")
        assert note.evolution_history[-1]["folded_text"] == again
        assert store.add(again).status == "deduplicated"


def _recounted(store: MemoryStore) -> int:
    from amem.bm25 import payload_terms

    return sum(len(payload_terms(h.payload)) for h in store.index.backend.iterate(None))


def test_folds_and_evolutions_keep_the_bm25_token_total(embedder: HashingEmbedder,
                                                        clock: ManualClock) -> None:
    """The running token total (every later note's BM25 vector is built with its average
    length) followed adds and updates but not folds or evolutions, which change a stored
    note's terms: a fold left it at 6 for 13 stored."""
    with store_with(embedder, clock, fold_threshold=0.8, pending_threshold=0.6) as store:
        store.add("The deploy pipeline runs make release after CI is green on main branch")
        folded = store.add("The deploy pipeline runs make release after CI is green on the main branch. "
                           "Then the canary takes an hour")
        assert folded.status == "folded"
        assert store.index.stats.tokens == _recounted(store)
    with store_with(embedder, clock, fold_threshold=0.99, pending_threshold=0.98,
                    link_floor=0.2) as store:
        store.add("Project Falcon launch moved to March because of the payment review")
        b = store.add("Project Falcon payment review is done by the security team in March")
        assert b.evolved  # the neighbour's tags changed
        assert store.index.stats.tokens == _recounted(store)
