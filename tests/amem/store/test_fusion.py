"""Search's fusion of BM25 and dense with the default embedder (e5-small): z-score by default.

Few notes on purpose: the model is real (one load per module).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed import make_embedder
from amem.errors import ConfigError

from .conftest import make_store

NOTES = [
    ("zan", "Melanie: the spice farms on Zanzibar were the best part of the whole year"),
    ("camp", "Melanie: I went camping with the kids last weekend, we loved it"),
    ("visit1", "Melanie: we visited my grandmother when I was little"),
    ("visit2", "Melanie: when did you visit your parents last time?"),
    ("visit3", "Melanie: I visited the museum with my family in May"),
    ("paint", "Melanie: I finished a painting of a sunset yesterday"),
    ("run", "Caroline: I ran a charity race for mental health"),
]


@pytest.fixture(scope="module")
def embedder() -> Any:
    return make_embedder("e5-small")


def _store(embedder: Any, kind: str = "edge", **overrides: object) -> MemoryStore:
    store = make_store(kind, embedder, ManualClock("2026-01-10T12:00:00+00:00"), **overrides)
    for nid, text in NOTES:
        store.add(text, id=nid, enrich=False)
    return store


@pytest.fixture(scope="module")
def zscore_store(embedder: Any) -> Iterator[MemoryStore]:
    with _store(embedder) as store:
        yield store


def test_a_strong_rare_term_match_stands_out_of_the_fused_scores(
        zscore_store: MemoryStore) -> None:
    assert zscore_store.config.fusion == "zscore"
    results = zscore_store.search("When did Melanie visit Zanzibar?", limit=5, heat=False,
                                  expand_links=False)
    assert results[0].id == "zan"
    # RRF scored it 0.033 against 0.032 for a note merely sharing "Melanie" and "visit":
    # ranks alone cannot say that BM25's first match stands far above its second.
    assert results[0].rrf - results[1].rrf > 0.02
    assert all(0.0 < r.rrf < 1.0 and r.score == r.rrf for r in results)


def test_every_candidate_carries_its_own_cosine(zscore_store: MemoryStore) -> None:
    # "Caroline" is in one note only: BM25 finds it; its similarity is its own, not a guess
    results = zscore_store.search("Caroline", limit=7, heat=False, expand_links=False)
    by_id = {r.id: r for r in results}
    assert results[0].id == "run" and by_id["run"].found_by == "both"
    assert len({r.similarity for r in results}) > 1


def test_rrf_stays_available_and_a_bad_fusion_is_refused(embedder: Any) -> None:
    with _store(embedder, fusion="rrf", sparse_weight=1.0, dense_weight=1.0) as store:
        results = store.search("When did Melanie visit Zanzibar?", limit=3, heat=False,
                               expand_links=False)
        assert results[0].id == "zan"
        assert 1 / 61 < results[0].rrf <= 2 / 61  # RRF's own scale, k = 60
        assert results[0].rrf - results[1].rrf < 0.002  # levelled with the next by rank
    with pytest.raises(ConfigError, match="fusion") as info:
        load_config(overrides={"fusion": "max"})
    assert info.value.key == "fusion"


def test_both_engines_fuse_to_the_same_ranking(embedder: Any, zscore_store: MemoryStore) -> None:
    # z-scores read the engines' raw scores (BM25 with the engine's IDF, cosines), not only
    # their ranks: the two engines must still agree, to the order and the scores' 6th digit
    with _store(embedder, "qdrant-local") as other:
        for query in ("When did Melanie visit Zanzibar?", "kids", "Caroline charity race",
                      "what did Melanie paint"):
            mine = zscore_store.search(query, limit=7, heat=False, expand_links=False)
            theirs = other.search(query, limit=7, heat=False, expand_links=False)
            assert [r.id for r in mine] == [r.id for r in theirs], query
            assert [r.rrf for r in mine] == pytest.approx([r.rrf for r in theirs], abs=1e-5)
