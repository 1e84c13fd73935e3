"""The pure parts of the issue-13 benchmarks: question order for heat, calibration statistics,
the embedding cache and the tool-list recall."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from amem.embed.hashing import HashingEmbedder
from benchmarks.calibrate import query_stats
from benchmarks.datasets import Corpus, Doc, Query
from benchmarks.embcache import CachedEmbedder
from benchmarks.heat_bench import ordered
from benchmarks.retrieval import evaluate


def test_heat_order_keeps_questions_sharing_evidence_together() -> None:
    corpus = Corpus("c", [Doc(f"D{i}", "x") for i in range(5)], [
        Query("a", {"D1"}, "1"), Query("b", {"D2"}, "4"), Query("c", {"D1", "D3"}, "1"),
        Query("adversarial", {"D1"}, "5"), Query("d", {"D3"}, "2")])
    assert ordered(corpus) == [(0, False), (2, True), (4, True), (1, False)]


def test_query_stats_separate_evidence_from_random_notes() -> None:
    docs = np.eye(4, dtype=np.float32)
    queries = np.array([[1, 0, 0, 0], [0, 0.6, 0.8, 0]], dtype=np.float32)
    stats = query_stats(queries, docs, [[0], [2]])
    assert stats["relevant_mean"] == 0.9 and stats["queries"] == 2
    assert stats["random_mean"] < 0.3 and stats["top1_p50"] == 0.9


def test_embedding_cache_round_trips_through_disk(tmp_path: Path) -> None:
    first = CachedEmbedder(HashingEmbedder(dim=16), tmp_path)
    want = first.embed(["a note", "another"], kind="passage")
    first.save()
    again = CachedEmbedder(HashingEmbedder(dim=16), tmp_path)
    assert np.allclose(again.embed(["another", "a note"], kind="passage"), want[::-1])
    assert len(list(tmp_path.iterdir())) == 1  # one file per model, no temporaries left


class BatchScaled:
    """An embedder whose vectors move with their batch, as the default one's int8 activations
    do (one scale per batch): each vector is the hashing one plus the batch's mean."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=16)
        self.model_id, self.dim = "batch-scaled", 16

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        vectors = self.inner.embed(texts, kind=kind)
        return vectors + vectors.mean(axis=0)


def test_embedding_cache_gives_a_text_one_vector_whatever_came_first(tmp_path: Path) -> None:
    # one cache filled by a run embedding the text among others, one by a run asking it alone:
    # each later run reads the same vector from either
    among = CachedEmbedder(BatchScaled(), tmp_path / "among")
    among.embed(["a note", "another", "a third"], kind="passage")
    among.embed(["a query"], kind="query")
    alone = CachedEmbedder(BatchScaled(), tmp_path / "alone")
    first = alone.embed(["a note"], kind="passage")
    assert np.array_equal(among.embed(["a note"], kind="passage"), first)
    assert np.array_equal(first[0], BatchScaled().embed(["a note"])[0])  # as embedded alone
    among.save()
    reread = CachedEmbedder(BatchScaled(), tmp_path / "among")
    assert np.array_equal(reread.embed(["another", "a note"], kind="passage")[1], first[0])


def test_a_realization_is_another_vector_as_stable_as_the_first(tmp_path: Path) -> None:
    alone = CachedEmbedder(BatchScaled(), tmp_path, realization=0)
    beside = CachedEmbedder(BatchScaled(), tmp_path, realization=1)
    note, query = alone.embed(["a note"])[0], alone.embed(["a query"], kind="query")[0]
    assert not np.allclose(beside.embed(["a note"])[0], note)  # the companion moved it
    assert np.array_equal(beside.embed(["a query"], kind="query")[0], query)  # queries alone
    # a realization's vector is the same whatever its cache embedded first
    other = CachedEmbedder(BatchScaled(), tmp_path / "other", realization=1)
    other.embed(["another", "a note", "a third"])
    assert np.array_equal(other.embed(["a note"])[0], beside.embed(["a note"])[0])
    alone.save()
    beside.save()
    assert len(list(tmp_path.glob("*.npz"))) == 2  # a file each: never read as the other
    with pytest.raises(ValueError, match="realization"):
        CachedEmbedder(BatchScaled(), tmp_path, realization=4)


def test_tool_list_recall_compares_equal_lengths() -> None:
    corpus = Corpus("c", [], [Query("q", {"x", "y"}, "1")])
    result = evaluate("locomo", [corpus], {"store": [[["a", "x", "b", "c"]]],
                                            "tool@10": [[["a", "y", "x"]]]})
    assert result["tool@10"]["cat1"]["R@list"] == 1.0  # both in its 3 notes
    assert result["store"]["cat1"]["R@list"] == 0.5  # its first 3 notes hold one
