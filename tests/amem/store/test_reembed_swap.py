"""A reembed killed between its two renames: whoever opens the store next finishes the swap.

The crash state was built by hand (a kill cannot be timed into that window): no ``store``, the
complete old store as ``store.reembed-old`` and the complete new one as ``store.reembed-new``.
The next command opened a new, empty store there, and the next reembed deleted the old one as
a leftover: every note gone (exploratory test of the nightly tools, 2026-12-05)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from amem.reembed import reembed
from amem.storeswap import NEW, SPOOL, abandoned_rebuild, hold_spool, remove_abandoned


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


class DyingEmbedder(HashingEmbedder):
    """Dies at its second call, as a reembed killed while it builds the new store."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim=dim)
        self.calls = 0

    def embed(self, texts: Any, kind: str = "passage") -> Any:
        self.calls += 1
        if self.calls >= 2:
            raise KeyboardInterrupt("killed")
        return super().embed(texts, kind=kind)


def test_what_a_killed_reembed_left_is_found_only_when_no_run_holds_it(tmp_path: Path) -> None:
    path = _store_with_notes(tmp_path)
    config = load_config(overrides={"home": str(tmp_path)})
    with pytest.raises(KeyboardInterrupt):
        reembed(config, DyingEmbedder(dim=32), batch=2)
    spool = tmp_path / SPOOL
    assert spool.exists() and (tmp_path / NEW).is_dir()
    assert abandoned_rebuild(path) == [tmp_path / NEW, spool]
    guard = hold_spool(path)  # a reembed running now holds it: nothing is abandoned
    try:
        assert abandoned_rebuild(path) == []
    finally:
        os.close(guard)
    assert remove_abandoned(path) == [tmp_path / NEW, spool]
    assert not spool.exists() and not (tmp_path / NEW).exists()
    with MemoryStore(path, embedder=HashingEmbedder(), agent_id="t") as store:
        assert store.count() == 5  # the store in use was never touched


def test_a_second_reembed_after_a_killed_one_finishes_and_leaves_nothing(tmp_path: Path) -> None:
    path = _store_with_notes(tmp_path)
    config = load_config(overrides={"home": str(tmp_path)})
    with pytest.raises(KeyboardInterrupt):
        reembed(config, DyingEmbedder(dim=32), batch=2)
    assert reembed(config, HashingEmbedder(dim=32)).notes == 5
    assert abandoned_rebuild(path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_a_reembed_of_a_store_without_tag_keys_writes_them(tmp_path: Path) -> None:
    """reembed reads the old store's points as they are (no upgrade runs on it): notes of a
    version before tag keys come out with the keys the tags filter reads."""
    from amem.backends.edge import EdgeBackend
    from amem.notefields import TAG_KEYS
    from amem.notes import point_id

    path = tmp_path / "store"
    with MemoryStore(path, embedder=HashingEmbedder(), agent_id="t") as store:
        store.add("A heron at the pond", tags=["Birds"], id="h", enrich=False)
    with EdgeBackend(path, HashingEmbedder().dim) as old:  # as the older version wrote it
        assert old.update_point(point_id("t", "h"), {TAG_KEYS: None})
    reembed(load_config(overrides={"home": str(tmp_path)}), HashingEmbedder(dim=32))
    with MemoryStore(path, embedder=HashingEmbedder(dim=32), agent_id="t") as store:
        (hit,) = store.index.backend.retrieve([point_id("t", "h")])
        assert hit.payload[TAG_KEYS] == ["birds"]
        assert [r.id for r in store.search("heron", tags=["BIRDS"])] == ["h"]
