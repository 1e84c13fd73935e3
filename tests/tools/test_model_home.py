"""The converted e5-small model lives under the home of the store that uses it.

``--home`` (and a config's ``home``) chose the store's directory but the model went to the
default home (XDG, not even ``$AMEM_HOME``): a second home shared one model directory with
every other, and a throwaway home wrote into the user's data. One conversion (~3 s) is shared
by the tests: each opens a store whose home already holds it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed import E5OnnxEmbedder, LazyEmbedder
from tools.runtime import Runtime


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose ``models`` holds the converted e5-small."""
    root = tmp_path_factory.mktemp("home")
    E5OnnxEmbedder(cache_dir=root / "models")
    return root


def test_store_converts_under_its_config_home(home: Path) -> None:
    config = load_config(overrides={"home": str(home), "embedder": "e5-small"})
    with MemoryStore(":memory:", config=config) as store:
        assert isinstance(store.embedder, E5OnnxEmbedder)
        assert store.embedder.model_dir.parent == home / "models"


def test_home_flag_converts_under_that_home(home: Path, tmp_path: Path) -> None:
    """``amem --home DIR`` is the ``home`` override of ``Runtime.load`` (tools.cli)."""
    env = {"AMEM_HOME": str(tmp_path / "env-home"), "AMEM_EMBEDDER": "e5-small"}
    with Runtime.load(env, overrides={"home": str(home)}) as runtime:
        store = runtime.memory
        assert isinstance(store.embedder, LazyEmbedder)  # the CLI loads it on first use
        loaded = store.embedder.embedder()
        assert isinstance(loaded, E5OnnxEmbedder)
        assert loaded.model_dir.parent == home / "models"
        assert Path(store.location) == home / "store"
