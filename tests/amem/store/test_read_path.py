"""MemoryStore basics and the search pipeline, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.errors import NotFoundError, ValidationError

NOTES = [
    ("n1", "Alice prefers green tea over coffee", ["alice"]),
    ("n2", "Bob drinks espresso every morning", ["bob"]),
    ("n3", "The staging database runs PostgreSQL 16", []),
    ("n4", "Team lunch is on Friday at the Thai place", []),
]


def fill(store: MemoryStore, agent: str | None = None) -> None:
    for nid, text, subjects in NOTES:
        store.add(text, subjects, id=nid, enrich=False, agent_id=agent)


def test_add_get_count_delete(store: MemoryStore) -> None:
    fill(store)
    assert store.count() == 4
    note = store.get("n1")
    assert note.content == NOTES[0][1] and note.subjects == ["alice"]
    store.delete("n1")
    assert store.count() == 3
    with pytest.raises(NotFoundError):
        store.get("n1")
    assert store.get("n1", include_inactive=True).is_active is False
    assert all(r.id != "n1" for r in store.search("green tea", limit=5))


def test_search_ranks_lexical_and_returns_fields(store: MemoryStore) -> None:
    fill(store)
    results = store.search("green tea", limit=2)
    assert results[0].id == "n1"
    top = results[0].to_dict()
    for key in ("id", "content", "context", "keywords", "tags", "topics", "links", "timestamp",
                "note_type", "similarity", "rrf", "via"):
        assert key in top
    assert top["via"] == "match" and top["rrf"] > 0 and 0 < top["similarity"] <= 1


def test_tenants_are_isolated(store: MemoryStore) -> None:
    fill(store, agent="a1")
    store.add("Alice prefers green tea", id="x", agent_id="a2", enrich=False)
    assert store.count(agent_id="a1") == 4 and store.count(agent_id="a2") == 1
    assert [r.id for r in store.search("green tea", agent_id="a2")] == ["x"]
    with pytest.raises(NotFoundError):
        store.get("n1", agent_id="a2")
    with pytest.raises(NotFoundError):
        store.delete("n1", agent_id="a2")
    assert store.count(agent_id="a1") == 4


def test_subject_filter_keeps_named_and_unnamed(store: MemoryStore) -> None:
    fill(store)
    ids = {r.id for r in store.search("drinks tea coffee espresso database lunch", limit=10,
                                      subject="alice")}
    assert "n1" in ids and "n2" not in ids and {"n3", "n4"} <= ids


def test_topics_filter_applies_to_knowledge_notes_only(store: MemoryStore) -> None:
    store.add("Python lists are dynamic arrays", id="k1", note_type="knowledge",
              topics=["python", "data-structures"], enrich=False)
    store.add("Python dicts are hash tables", id="k2", note_type="knowledge", topics=["python"],
              enrich=False)
    store.add("I wrote Python code today", id="m1", enrich=False)
    ids = {r.id for r in store.search("python", limit=10, topics_filter=["python", "data-structures"])}
    assert ids == {"k1", "m1"}


def test_heat_counts_only_returned_matches(store: MemoryStore) -> None:
    fill(store)
    store.search("green tea", limit=1)
    assert store.get("n1").retrieval_count == 1
    # n2 was a candidate (shares nothing lexical but is in the dense pool) yet not returned
    assert store.get("n2").retrieval_count == 0


def test_matches_carry_the_score_they_are_ordered_by(store: MemoryStore) -> None:
    for i in range(6):
        store.add(f"Quarterly report number {i} on the Falcon budget", id=f"r{i}", enrich=False)
    for _ in range(5):  # heat r5 (the last in the fused order) by finding it often
        store.search("Quarterly report number 5", limit=1, heat=False)
    results = store.search("quarterly Falcon budget report", limit=6)
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)  # the order follows ``score``
    heated = next(r for r in results if r.id == "r5")
    assert heated.score > heated.rrf  # the boost is visible, and ``rrf`` is before it
    assert any(r.score == r.rrf for r in results)  # never retrieved: no boost
    assert {r.found_by for r in results} <= {"bm25", "dense", "both"}
    assert results[0].found_by == "both"
    off = store.search("quarterly Falcon budget report", limit=6, heat=False)
    assert all(r.score == r.rrf for r in off)


def test_heat_reorders_near_ties_only(store: MemoryStore) -> None:
    store.add("Falcon budget review notes", id="best", enrich=False)
    store.add("Falcon budget", id="hot", enrich=False)
    for i in range(8):
        store.add(f"Unrelated filler note number {i} about lunch", enrich=False)
    first = [r.id for r in store.search("Falcon budget review", limit=2, heat=False)]
    assert first == ["best", "hot"]
    for _ in range(30):  # "hot" returned again and again, today
        store.search("Falcon budget", limit=1, heat=False)
    assert store.get("hot").retrieval_count >= 30
    # 30 retrievals do not lift a note over a clearly better match (at 0.05 they did)
    assert [r.id for r in store.search("Falcon budget review", limit=2)] == ["best", "hot"]


def test_found_by_names_the_ranking(store: MemoryStore) -> None:
    fill(store)
    results = store.search("zzzqqq unmatched words", limit=4, expand_links=False)
    assert results and {r.found_by for r in results} == {"dense"}  # no shared term: no BM25


def test_min_similarity_drops_what_is_below_it(store: MemoryStore) -> None:
    fill(store)
    everything = store.search("green tea", limit=4, expand_links=False, heat=False)
    cut = sorted(r.similarity for r in everything)[-2]  # keep the best two
    kept = store.search("green tea", limit=4, min_similarity=cut, heat=False)
    assert len(kept) == 2 and all(r.similarity >= cut for r in kept)
    assert store.search("green tea", limit=4, min_similarity=1.0, heat=False) == []


def test_link_expansion_appends_linked_notes(store: MemoryStore) -> None:
    store.add("Project Falcon launches in March", id="a", enrich=False)
    store.add("Falcon launch date depends on the payment provider review", id="b", enrich=False)
    store.add("Payment provider review is run by Dana from security", id="c", enrich=False)
    # wire links by hand: a -> b -> c
    store.index.update_payload("a", store.agent_id, {"links": ["b"]})
    store.index.update_payload("b", store.agent_id, {"links": ["a", "c"]})
    store.index.update_payload("c", store.agent_id, {"links": ["b"]})
    results = store.search("Project Falcon launches in March", limit=1)
    assert results[0].id == "a" and results[0].via == "match"
    linked = [r for r in results if r.via == "link"]
    assert [r.id for r in linked][:1] == ["b"]
    assert all(r.similarity >= store.config.link_min_cosine for r in linked)
    assert len(store.search("Project Falcon", limit=1, expand_links=False)) == 1


@pytest.mark.parametrize("kwargs,field", [
    ({"query": ""}, "query"), ({"query": "   "}, "query"), ({"query": 5}, "query"),
    ({"query": "x" * 5000}, "query"), ({"query": "ok", "limit": 0}, "limit"),
    ({"query": "ok", "limit": "3"}, "limit"), ({"query": "ok", "limit": 1000}, "limit"),
    ({"query": "ok", "topics_filter": "python"}, "topicsFilter"),
    ({"query": "ok", "subject": ""}, "subject"),
    ({"query": "ok", "min_similarity": 1.5}, "min_similarity"),
    ({"query": "ok", "min_similarity": "0.3"}, "min_similarity"),
    ({"query": "ok", "min_similarity": True}, "min_similarity"),
])
def test_bad_search_input_names_the_field(edge_store: MemoryStore, kwargs: dict, field: str) -> None:
    fill(edge_store)
    with pytest.raises(ValidationError) as info:
        edge_store.search(**kwargs)
    assert info.value.field == field
    assert edge_store.count() == 4


@pytest.mark.parametrize("kwargs,field", [
    ({"text": ""}, "text"), ({"text": " \n"}, "text"), ({"text": None}, "text"),
    ({"text": "x" * 40_000}, "text"), ({"text": "ok", "subjects": "alice"}, "subjects"),
    ({"text": "ok", "subjects": [1]}, "subjects"), ({"text": "ok", "id": ""}, "id"),
    ({"text": "ok", "timestamp": "yesterday"}, "timestamp"),
    ({"text": "ok", "category": "Nope"}, "category"), ({"text": "ok", "agent_id": ""}, "agent_id"),
    ({"text": "ok", "note_type": "fact"}, "note_type"),
])
def test_bad_add_input_names_the_field_and_stores_nothing(edge_store: MemoryStore, kwargs: dict,
                                                          field: str) -> None:
    fill(edge_store)
    text = kwargs.pop("text")
    with pytest.raises(ValidationError) as info:
        edge_store.add(text, **kwargs)
    assert info.value.field == field
    assert edge_store.count() == 4


@pytest.mark.parametrize("text", [
    "Ünïcödé ñ ß", "北京是中国的首都。", "東京タワーへ行きました", "안녕하세요", "مرحبا بالعالم",
    "नमस्ते दुनिया", "emoji 🎉👩‍💻 zwj", "tabs\tand\nnewlines  kept ", "שלום עולם", "Ελληνικά",
])
def test_text_of_every_script_round_trips_exactly(edge_store: MemoryStore, text: str) -> None:
    res = edge_store.add(text, enrich=False)
    assert edge_store.get(res.id).content == text
    assert edge_store.search(text.strip(), limit=1)[0].content == text


def test_get_and_delete_validate_ids(edge_store: MemoryStore) -> None:
    with pytest.raises(ValidationError):
        edge_store.get("")
    with pytest.raises(ValidationError):
        edge_store.delete(42)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        edge_store.get("missing")


def test_link_expansion_applies_the_search_filters(store: MemoryStore) -> None:
    store.add("Project Falcon launches in March", id="a", enrich=False)
    store.add("Project Falcon notes for Bob only", ["bob"], id="b", enrich=False)
    store.add("Project Falcon notes for everyone", id="c", enrich=False)
    store.index.update_payload("a", store.agent_id, {"links": ["b", "c"]})
    linked = [r.id for r in store.search("Project Falcon launches in March", limit=1,
                                         subject="alice") if r.via == "link"]
    assert linked == ["c"]  # b names another subject; c names nobody
    store.delete("c")
    assert [r.id for r in store.search("Project Falcon launches in March", limit=1,
                                       subject="alice") if r.via == "link"] == []


def test_a_store_written_by_an_older_tokenizer_gets_its_bm25_vectors_rebuilt(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    from amem import bm25
    from amem.backends import EdgeBackend
    from amem.backends.base import Point

    with MemoryStore(tmp_path, embedder=embedder, clock=clock) as store:
        nid = store.add("Our deployments failed twice this week", enrich=False).id
        store.add("Lunch is at noon", subjects=["Quelmar"], enrich=False)
        # make it the store an older tokenizer wrote: its terms, and no version in the metadata
        hit = next(h for h in store.index.backend.iterate(None, with_vectors=True)
                   if h.payload["id"] == nid)
        old_terms = ["deployment", "fail", "twice", "week"]  # the light stemmer's terms
        store.index.backend.upsert([Point(hit.id, hit.dense, bm25.doc_vector(
            old_terms, 4.0, bm25.Bm25Params()), hit.payload)])
    engine = EdgeBackend(tmp_path, embedder.dim)  # the closed store, as files
    meta = engine.read_meta()
    meta.pop(bm25.TOKENIZER_KEY)
    meta.pop("subject_terms")  # older than subjects in ranking as well (both upgrades run)
    meta["bm25_stats"]["tokens"] = 4  # what the older tokenizer counted (stayed so for good)
    engine.write_meta(meta)
    engine.close()
    with MemoryStore(tmp_path, embedder=embedder, clock=clock) as store:
        found = {r.id: r.found_by for r in store.search("deploying", limit=2, heat=False)}
        assert found[nid] in ("bm25", "both")  # the query's term meets the rebuilt vector
        assert store.index.backend.read_meta()[bm25.TOKENIZER_KEY] == bm25.TOKENIZER_VERSION
        counted = sum(len(bm25.payload_terms(h.payload))
                      for h in store.index.backend.iterate(None))
        assert counted > 4 and store.index.stats.tokens == counted
        assert store.index.backend.read_meta()["bm25_stats"]["tokens"] == counted
