"""Hybrid recall's ranking (lcm.hybrid): function words out of the word leg, BM25 over amem's
terms of each candidate's date and text, z-score fusion; and what grep(mode="hybrid") returns."""

from __future__ import annotations

import pytest

from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore, ManualClock
from lcm.hybrid import candidate_bm25, date_label, fuse, index_words

KEY = "agent:a:main"


def _store() -> LcmStore:
    return LcmStore(":memory:", LcmConfig(log_file_enabled=False), clock=ManualClock(), embedder=HashingEmbedder(256))


def test_function_words_are_not_sent_to_the_word_index_but_phrases_and_lone_words_are() -> None:
    assert index_words("What did Caroline say about the adoption?") == "Caroline say adoption?"
    assert index_words('when is "the big show" happening') == '"the big show" happening'
    # nothing but function words: the caller's words are kept, not an empty query
    assert index_words("what is it") == "what is it"
    assert index_words("数据库迁移 失败了") == "数据库迁移 失败了"


def test_a_date_reads_as_the_day_it_names_in_the_stores_zone() -> None:
    assert date_label("2023-05-08T13:56:00.000Z", "UTC") == "8 May 2023"
    # 23:30 UTC on 31 December is already the new year in Tokyo
    assert date_label("2023-12-31T23:30:00.000Z", "Asia/Tokyo") == "1 January 2024"
    assert date_label("not a time", "UTC") == ""


def test_candidate_bm25_weighs_length_lightly_and_counts_only_shared_terms() -> None:
    short = "the zeppelin tickets"
    long = "the zeppelin tickets " + " ".join(f"filler{i}" for i in range(40))
    scores = candidate_bm25("Where are the zeppelin tickets?", [short, long, "nothing in common here"])
    assert scores[2] == 0.0
    assert scores[0] > scores[1] > 0.0
    # b = 0.3: a turn eight times longer keeps most of its score (FTS5's b = 0.75 would halve it)
    assert scores[1] / scores[0] > 0.6


def test_fusion_keeps_a_clear_word_match_first_and_never_lifts_an_unembedded_candidate() -> None:
    words = {"a": 9.0, "b": 1.0, "c": 1.0, "d": 0.0}
    cosines = {"a": 0.83, "b": 0.84, "c": 0.80, "d": 0.85}  # "d" nearest, "a" middling
    assert [k for k, _ in fuse(list(words), words, cosines)][0] == "a"
    # "x" has no vector: the lowest known cosine, so the word tie with "y" goes to "y"
    ranked = fuse(["x", "y", "z"], {"x": 5.0, "y": 5.0, "z": 0.0}, {"y": 0.9, "z": 0.5})
    assert [k for k, _ in ranked] == ["y", "x", "z"]
    assert all(0.0 < s < 1.0 for _, s in ranked)
    with pytest.raises(ValueError, match="weight"):
        fuse(["x"], {"x": 1.0}, {"x": 0.5}, weight=1.5)


def test_a_question_naming_a_month_finds_that_days_turn_among_the_same_words_on_other_days() -> None:
    same = "we decided to ship the parser rewrite"
    turns = [{"role": "user", "content": same, "created_at": when}
             for when in ("2024-01-05T10:00:00Z", "2024-03-10T10:00:00Z", "2024-07-22T10:00:00Z")]
    with _store() as store:
        store.ingest(KEY, [*turns, {"role": "assistant", "content": "sounds good to me"}])
        store.embed_pending()
        res = store.grep("What did we decide in March 2024?", mode="hybrid", session_key=KEY,
                         sort="relevance", limit=3)
    # the three turns share every word and vector: only the date tells them apart
    assert res.hits[0].id == "msg_2", res.hits
    assert res.hits[0].created_at.startswith("2024-03-10")
    assert res.hits[0].score > res.hits[1].score


def test_hybrid_hits_keep_their_shape_and_an_unembedded_turn_is_found_by_its_words() -> None:
    with _store() as store:
        store.ingest(KEY, [{"role": "user", "content": "the zeppelin tickets are in the blue drawer"},
                           {"role": "assistant", "content": "noted, blue drawer"}])
        store.embed_pending()
        store.ingest(KEY, [{"role": "user", "content": "I lost the zeppelin tickets again"}])
        res = store.grep("where did the zeppelin tickets go", mode="hybrid", session_key=KEY,
                         sort="relevance", limit=5)
    assert res.not_embedded == 1 and any("no vector" in w for w in res.warnings)
    ids = [h.id for h in res.hits]
    assert "msg_3" in ids and set(ids) <= {"msg_1", "msg_2", "msg_3"}
    hit = res.hits[ids.index("msg_3")]
    assert (hit.kind, hit.role) == ("message", "user") and "zeppelin" in hit.snippet
    assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)


def test_each_sort_reads_the_same_ranking_whether_or_not_every_candidate_becomes_a_hit() -> None:
    # relevance and recency build only the hits they return; hybrid sort reads every candidate
    turns = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"deploy note {i}: the parser rewrite {'shipped' if i % 3 else 'slipped'}",
              "created_at": f"2024-0{1 + i % 9}-1{i % 10}T10:00:00Z"} for i in range(30)]
    with _store() as store:
        store.ingest(KEY, turns)
        store.embed_pending()
        every = store.grep("when did the parser rewrite ship", mode="hybrid", session_key=KEY,
                           sort="relevance", limit=120).hits
        top = store.grep("when did the parser rewrite ship", mode="hybrid", session_key=KEY,
                         sort="relevance", limit=4).hits
        recent = store.grep("when did the parser rewrite ship", mode="hybrid", session_key=KEY,
                            sort="recency", limit=4).hits
        mixed = store.grep("when did the parser rewrite ship", mode="hybrid", session_key=KEY,
                           sort="hybrid", limit=4).hits
    assert len(every) == 30
    assert [(h.id, h.score, h.snippet) for h in top] == [(h.id, h.score, h.snippet) for h in every[:4]]
    assert [h.id for h in recent] == [h.id for h in sorted(every[:4], key=lambda h: h.created_at,
                                                           reverse=True)]
    # hybrid sort fuses with the time order of every candidate: the newest turn, not among
    # the four most relevant, comes in
    newest = max(every, key=lambda h: h.created_at)
    assert newest.id not in {h.id for h in every[:4]}
    assert len(mixed) == 4 and newest.id in {h.id for h in mixed}


def test_lcm_terms_are_stemmed_without_function_words_and_keep_paths_whole() -> None:
    from lcm.ranking import terms

    assert terms("What did we deploy?") == terms("deployment") == ["deploy"]
    assert terms("what is it") == []
    assert "module_8.py" in terms("module_8.py failed in v4.1") and "v4.1" in terms("v4.1")


def test_lcm_stems_every_word_as_the_notes_store_does() -> None:
    from amem.text import stem as notes_stem
    from lcm.ranking import stem

    words = "deployed deployment studies studied connection running happily caroline adopted kids a v4".split()
    assert [stem(w) for w in words] == [notes_stem(w) for w in words]
