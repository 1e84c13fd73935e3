"""The read-path benchmark's bulk-import part: corpus vectors for notes, the model for queries."""

from __future__ import annotations

import numpy as np
import pytest

from amem.embed.hashing import HashingEmbedder
from benchmarks.readpath_bench import (CorpusVectors, import_then_search, moves_then_search,
                                       single_adds_then_search)


def test_corpus_vectors_serve_notes_from_the_corpus_and_queries_from_the_model() -> None:
    model = HashingEmbedder(dim=16)
    texts = ["alpha beta", "gamma delta"]
    vecs = np.eye(2, 16, dtype=np.float32)
    corpus = CorpusVectors(model, texts, vecs)
    assert np.array_equal(corpus.embed(texts[::-1]), vecs[::-1])
    assert corpus.misses == 0
    other = corpus.embed(["not in the corpus"])  # embedded by the model, counted
    assert corpus.misses == 1 and np.allclose(other, model.embed(["not in the corpus"]))
    assert np.allclose(corpus.embed(["alpha beta"], kind="query"),
                       model.embed(["alpha beta"], kind="query"))


def test_import_then_search_reports_both_phases() -> None:
    model = HashingEmbedder(dim=16)
    texts = [f"note {i} about topic {i % 7}" for i in range(60)]
    vecs = np.asarray(model.embed(texts), dtype=np.float32)
    out = import_then_search(model, texts, vecs, ["topic 3", "note 5"], batch=25,
                             after_queries=4)
    assert out["stored"] == 60 and out["vector_misses"] == 0
    # 60 notes stay under optimize_after (5000): no build ran, so no search during one
    assert out["build_running_at_end"] is False and out["during_build"] == {"searches": 0}
    assert out["unindexed_at_end"] == 60 and out["builds"] == 0 and out["import_waited_s"] == 0
    assert out["import_notes_per_s"] > 0 and out["after_build"]["major_faults"] >= 0
    after = out["after_build"]
    assert after["searches"] == 4 and after["full_p95"] >= after["full_p50"] > 0


@pytest.mark.slow  # 7 s: a store built and searched the two ways
def test_single_adds_build_only_where_the_store_is_kept_built() -> None:
    model = HashingEmbedder(dim=16)
    texts = [f"note {i} about topic {i % 7} and place {i % 5}" for i in range(70)]
    vecs = np.asarray(model.embed(texts), dtype=np.float32)
    out = single_adds_then_search(model, texts, vecs, ["topic 3", "note 5", "place 2"],
                                  size=30, optimize_after=20)
    assert out["notes_bulk"] == 30 and out["single_adds"] == 40
    kept, counted = out["kept built"], out["counted only"]
    # the bulk part built both (30 >= 20); then 40 single adds: only the kept store built
    assert kept["builds"] >= 2 and kept["unindexed"] < 20
    assert counted["builds"] == 1 and counted["unindexed"] >= 40
    for side in (kept, counted):
        assert side["search"]["full_p95"] >= side["search"]["full_p50"] > 0
    assert out["counted_over_kept_full_p50"] > 0


def test_single_adds_can_be_embedded_by_the_model() -> None:
    model = HashingEmbedder(dim=16)
    texts = [f"note {i} about topic {i % 7} and place {i % 5}" for i in range(40)]
    vecs = np.asarray(model.embed(texts), dtype=np.float32)
    vecs[30:] = 0.0  # the adds' corpus vectors are unusable (zero): only the model can embed them
    out = single_adds_then_search(model, texts, vecs, ["topic 3"], size=30, optimize_after=20,
                                  embed_adds=True)
    assert out["adds_embedded"] is True and out["single_adds"] == 10
    assert out["kept_over_counted_adds_s"] > 0


@pytest.mark.slow  # 12 s: a day of writes and searches, two ways
def test_a_day_of_searches_builds_only_where_moves_are_counted() -> None:
    model = HashingEmbedder(dim=16)
    texts = [f"note {i} about topic {i % 7} and place {i % 5}" for i in range(40)]
    vecs = np.asarray(model.embed(texts), dtype=np.float32)
    queries = [f"topic {i % 7} place {i % 5}" for i in range(20)]
    out = moves_then_search(model, texts, vecs, queries, day_searches=20, rounds=2,
                            optimize_after=10)
    counted, before = out["after_day"]["moves counted"], out["after_day"]["as before"]
    built = {name: out["built"][name]["builds"] for name in ("moves counted", "as before")}
    assert min(built.values()) >= 1 and out["built"]["as before"]["points_moved"] == 0
    # the day's retrieval counts moved notes in both; only the counting store built again
    assert counted["builds"] > built["moves counted"] and counted["points_moved"] < 10, counted
    assert before["builds"] == built["as before"] and before["points_moved"] >= 10, before
    for name in ("moves counted", "as before"):
        assert out["after_optimize"][name]["points_moved"] == 0
        search = out["after_optimize_search"][name]
        assert search["full_p95"] >= search["full_p50"] > 0
