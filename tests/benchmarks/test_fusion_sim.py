"""The ranking replay of benchmarks.fusion_sim on a tiny corpus (hashing embedder)."""

from __future__ import annotations

import pytest

from amem.embed.hashing import HashingEmbedder
from benchmarks.datasets import Corpus, Doc, Query
from benchmarks.fusion_sim import Replay, heat, ids_of, rrf_ranker, zscore_ranker


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
