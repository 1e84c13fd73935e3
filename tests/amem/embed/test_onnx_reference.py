"""The MiniLM int8 ONNX preset reproduces the fp32 reference all-MiniLM-L6-v2.

The reference vectors were computed once with sentence-transformers + PyTorch (see
``tests/fixtures/embed/make_minilm_reference.py``) and are kept as a fixture, so this test needs
neither.

Measured bound: every non-empty text reaches cosine >= 0.999 (lowest 0.99924, on the one-letter
text "a"). The empty string reaches only 0.9963: its input is just ``[CLS] [SEP]``, so the mean
pools two token vectors and the int8 weight rounding of the export is not averaged out over many
tokens. The store never embeds empty text (it rejects it at the boundary), so the test asserts
0.999 for non-empty texts and the measured 0.996 for the empty one rather than hide it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from amem.embed import OnnxEmbedder
from tests.amem.embed.conftest import assert_unit_rows

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "embed" / "minilm_reference.json"


@pytest.fixture(scope="module")
def reference() -> dict[str, object]:
    data: dict[str, object] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def test_fixture_is_what_it_says(reference: dict[str, object]) -> None:
    texts, vectors = reference["texts"], np.asarray(reference["vectors"])
    assert isinstance(texts, list) and len(texts) == 20
    assert vectors.shape == (20, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_minilm_matches_the_reference_model(
    minilm: OnnxEmbedder, reference: dict[str, object]
) -> None:
    texts = list(reference["texts"])  # type: ignore[call-overload]
    expected = np.asarray(reference["vectors"], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    ours = minilm.embed(texts)
    assert_unit_rows(ours, len(texts), 384)
    cosines = np.sum(ours * expected, axis=1)
    for text, cosine in zip(texts, cosines, strict=True):
        bound = 0.999 if text else 0.996
        assert cosine >= bound, f"cosine {cosine:.5f} < {bound} for {text[:40]!r}"
    assert float(np.mean(cosines)) >= 0.999


def test_minilm_truncates_like_the_reference(minilm: OnnxEmbedder) -> None:
    # The reference model cuts at 256 tokens; text past that must not change the vector.
    head = "memory notes about retrieval and ranking " * 60  # well over 256 tokens
    a, b = minilm.embed([head + "apples", head + "a completely different ending"])
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert minilm.config.max_length == 256
    assert minilm.model_id.startswith("onnx/all-MiniLM-L6-v2-int8@")
