"""A reembed killed between its two renames: whoever opens the store next finishes the swap.

The crash state was built by hand (a kill cannot be timed into that window): no ``store``, the
complete old store as ``store.reembed-old`` and the complete new one as ``store.reembed-new``.
The next command opened a new, empty store there, and the next reembed deleted the old one as
a leftover: every note gone (exploratory test of the nightly tools, 2026-12-05)."""

from __future__ import annotations

import shutil
from pathlib import Path

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from amem.reembed import reembed


def _store_with_notes(home: Path) -> Path:
    with MemoryStore(home / "store", embedder=HashingEmbedder(), agent_id="t") as store:
        store.add_many([{"text": f"observation {i}: a heron at pond {i}"} for i in range(5)], enrich=False)
    return home / "store"


def test_the_next_open_puts_the_new_store_in_place(tmp_path: Path) -> None:
    path = _store_with_notes(tmp_path)
    shutil.copytree(path, tmp_path / "store.reembed-new")  # the rebuilt store, complete
    path.rename(tmp_path / "store.reembed-old")             # killed right after the first rename
    with MemoryStore(path, embedder=HashingEmbedder(), agent_id="t") as store:
        assert store.count() == 5
    assert not (tmp_path / "store.reembed-new").exists()


def test_without_a_new_store_the_old_one_goes_back_and_reembed_keeps_it(tmp_path: Path) -> None:
    path = _store_with_notes(tmp_path)
    path.rename(tmp_path / "store.reembed-old")  # the new store lost too: the old is the only copy
    config = load_config(overrides={"home": str(tmp_path)})
    assert Path(config.store_path) == path
    done = reembed(config, HashingEmbedder(dim=32))
    assert done.notes == 5 and not (tmp_path / "store.reembed-old").exists()
    with MemoryStore(path, embedder=HashingEmbedder(dim=32), agent_id="t") as store:
        assert store.count() == 5
