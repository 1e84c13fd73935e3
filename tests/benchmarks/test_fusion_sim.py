"""The ranking replay of benchmarks.fusion_sim on a tiny corpus (hashing embedder)."""

from __future__ import annotations

import pytest

from amem.embed.hashing import HashingEmbedder
from benchmarks.datasets import Corpus, Doc, Query
from benchmarks.fusion_sim import (Replay, coverage_ranker, heat, ids_of, rrf_ranker, title,
                                  zscore_ranker)


def _corpus() -> Corpus:
    docs = [Doc("D1:1", "Melanie: we flew to Zanzibar in May", date_label="8 May 2023"),
            Doc("D1:2", "Melanie: the kids loved the camping trip", date_label="8 May 2023"),
            Doc("D1:3", "Caroline: I joined a support group", date_label="8 May 2023"),
            Doc("D1:4", "Caroline: I joined a support group", date_label="8 May 2023")]
    queries = [Query("When did Melanie go to Zanzibar?", {"D1:1"}, "2"),
               Query("What group did Caroline join?", {"D1:3"}, "4"),
               Query("Where did Melanie go camping?", {"D1:2", "D1:1"}, "1")]
    return Corpus("conv-x", docs, queries)


def test_replay_ranks_every_candidate_and_merges_duplicates() -> None:
    rp = Replay(_corpus(), HashingEmbedder(dim=64), dated=True)
    assert rp.holds[-1] == ["D1:3", "D1:4"]  # the same text is one note holding both turns
    sparse, dense = rp.legs(0)
    assert sparse[0][0] == 0 and sparse[0][1] > sparse[-1][1]  # the rare term wins BM25
    for ranker in (rrf_ranker(60), zscore_ranker(0.4)):
        ranked = ranker(rp, 0)
        assert {d for d, _ in ranked} == {d for d, _ in sparse + dense}
        assert ids_of(rp, ranker(rp, 1))[:2] == ["D1:3", "D1:4"]
    assert zscore_ranker(0.4)(rp, 0)[0][0] == 0


def test_heat_replay_prints_every_signal(capsys: pytest.CaptureFixture[str]) -> None:
    embedder = HashingEmbedder(dim=64)
    heat([Replay(_corpus(), embedder, dated=True)], embedder)
    out = capsys.readouterr().out
    assert "| none |" in out and "| shown | 0.05 |" in out
    assert "| opened by a similar question | 1.0 |" in out


def _articles() -> Corpus:
    """Two articles; the answer to the question lies in a sentence that does not name Lou."""
    docs = [Doc("p0s0", "Lou is a mathematician in Hong Kong.", source="Lou"),
            Doc("p0s1", "He graduated from the Chinese University in 1981.", source="Lou"),
            Doc("p1s0", "Chen graduated from Peking University.", source="Chen")]
    queries = [Query("Which university did Lou graduate from?", {"p0s1"}, "all", part=0),
               Query("Where did Chen study?", {"p1s0"}, "all", part=1)]
    return Corpus("cmrc", docs, queries)


def test_the_title_reaches_the_side_the_replay_names() -> None:
    embedder = HashingEmbedder(dim=64)
    plain = Replay(_articles(), embedder, dated=False)
    bm25 = Replay(_articles(), embedder, dated=False, title="bm25")
    dense = Replay(_articles(), embedder, dated=False, title="dense")
    # BM25: without the title the sentence naming Lou wins on the rare name; with it, the
    # sentence that answers holds Lou too and wins on the other terms
    assert plain.legs(0)[0][0][0] == 0
    assert bm25.legs(0)[0][0][0] == 1
    assert (bm25.doc_vecs == plain.doc_vecs).all()
    # the embedded text: a "Keywords: Lou" line only where the sentence lacks the name
    assert (dense.doc_vecs[0] == plain.doc_vecs[0]).all()
    assert not (dense.doc_vecs[1] == plain.doc_vecs[1]).all()
    assert dense.legs(0)[0] == plain.legs(0)[0]
    with pytest.raises(ValueError, match="title must be one of"):
        Replay(_articles(), embedder, dated=False, title="both")


def test_coverage_tie_break_keeps_the_candidates_and_without_lift_the_order() -> None:
    rp = Replay(_articles(), HashingEmbedder(dim=64), dated=False, title="keyword")
    for qi in range(2):
        fused = zscore_ranker(0.4)(rp, qi)
        assert [d for d, _ in coverage_ranker(0.4, 0.0)(rp, qi)] == [d for d, _ in fused]
        assert {d for d, _ in coverage_ranker(0.4, 5.0)(rp, qi)} == {d for d, _ in fused}


def test_title_replay_prints_every_place(capsys: pytest.CaptureFixture[str]) -> None:
    title(_articles(), HashingEmbedder(dim=64))
    out = capsys.readouterr().out
    for place in ("none", "bm25", "dense", "keyword", "tag"):
        assert f"| {place} | zscore 0.4 |" in out
    assert "| keyword | + coverage tie-break 0.5 |" in out
