"""HashingEmbedder: the deterministic embedder the rest of the test suite relies on."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from amem.embed import Embedder, HashingEmbedder
from amem.errors import ConfigError, ValidationError
from tests.amem.embed.conftest import SCRIPTS, assert_unit_rows


def test_shape_dtype_unit_norm_and_protocol() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 64
    assert embedder.model_id == "hashing-v1-d64"
    assert_unit_rows(embedder.embed(["alpha beta", "gamma"]), 2, 64)
    assert HashingEmbedder(dim=300).model_id == "hashing-v1-d300"


def test_every_script_and_blank_text_gets_a_unit_vector() -> None:
    embedder = HashingEmbedder()
    vectors = embedder.embed([*SCRIPTS, "", "   \n"])
    assert_unit_rows(vectors, len(SCRIPTS) + 2, 64)
    # Blank texts share the one fixed "no content" vector.
    np.testing.assert_array_equal(vectors[-1], vectors[-2])


def test_empty_list_gives_zero_rows() -> None:
    out = HashingEmbedder(dim=32).embed([])
    assert out.shape == (0, 32) and out.dtype == np.float32


def test_similar_texts_are_closer_than_unrelated_ones() -> None:
    embedder = HashingEmbedder(dim=512)
    anchor, near, far = embedder.embed(
        [
            "Caroline went to the LGBTQ support group yesterday",
            "caroline goes to a support group for LGBTQ people",
            "Quarterly revenue of the steel plant grew by four percent",
        ]
    )
    assert anchor @ near > 0.5
    assert anchor @ near > anchor @ far + 0.3
    zh = embedder.embed(["今天天气很好", "今天天气不错", "股票市场大幅下跌"])
    assert zh[0] @ zh[1] > zh[0] @ zh[2] + 0.2


def test_symmetric_and_batch_independent() -> None:
    embedder = HashingEmbedder()
    texts = ["one two three", "four", "五六七"]
    batch = embedder.embed(texts, kind="query")
    np.testing.assert_array_equal(batch, embedder.embed(texts, kind="passage"))
    singles = np.vstack([embedder.embed([t]) for t in texts])
    np.testing.assert_array_equal(batch, singles)


def test_deterministic_across_processes() -> None:
    # Python's hash() is salted per process; the embedder must not depend on it. The child gets
    # a fixed seed that differs from this process's (random or other) one.
    code = (
        "from amem.embed import HashingEmbedder;"
        "print(HashingEmbedder().embed(['hello world 你好'])[0].tobytes().hex())"
    )
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    env = {**os.environ, "PYTHONHASHSEED": seed}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    here = HashingEmbedder().embed(["hello world 你好"])[0].tobytes().hex()
    assert result.stdout.strip() == here


@pytest.mark.parametrize("dim", [0, 1, -5, 2.5, True, "64"])
def test_bad_dim_is_a_config_error(dim: object) -> None:
    with pytest.raises(ConfigError) as info:
        HashingEmbedder(dim=dim)  # type: ignore[arg-type]
    assert info.value.key == "dim"


def test_bad_inputs_name_the_field() -> None:
    embedder = HashingEmbedder()
    with pytest.raises(ValidationError) as info:
        embedder.embed("a bare string")
    assert info.value.field == "texts"
    with pytest.raises(ValidationError) as info:
        embedder.embed(["ok", 3])  # type: ignore[list-item]
    assert info.value.field == "texts[1]"
    with pytest.raises(ValidationError) as info:
        embedder.embed(["ok"], kind="document")  # type: ignore[arg-type]
    assert info.value.field == "kind"
    with pytest.raises(ValidationError):
        embedder.embed(None)  # type: ignore[arg-type]
