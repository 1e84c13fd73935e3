"""A store whose creation did not finish, and one whose ``meta.json`` was lost.

A store killed (or refused for disk space) while it was created had ``shard/`` and no
``meta.json``; every later command then said "holds 64-d vectors, the embedder gives 384-d
... (amem reembed)". Such a store holds nothing and is created again; one that holds points
without its record says so, and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore
from amem.backends import _edge_blank
from amem.backends.edge import META_FILE, SHARD_DIR, EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.errors import BackendError
from amem.kernel.errors import DiskFullError

PLENTY = 1 << 40


class RoomFor:
    """A free-space provider with room for the first ``checks`` checks, then none (the disk
    filled while a store was being made)."""

    def __init__(self, checks: int) -> None:
        self.left = checks

    def free_bytes(self, path: Path) -> int:
        self.left -= 1
        return PLENTY if self.left >= 0 else 0


def test_a_creation_killed_before_its_record_is_created_again(tmp_path: Path) -> None:
    store = tmp_path / "store"
    EdgeBackend(store, 64).close()
    (store / META_FILE).unlink()  # as a process killed before it wrote its record left it
    other = HashingEmbedder(dim=96)  # the default embedder of a later command, another size
    with MemoryStore(store, embedder=other, agent_id="a") as opened:
        opened.add("the first note of the store made again", agent_id="a", enrich=False)
        assert opened.count(agent_id="a") == 1
    with MemoryStore(store, embedder=other, agent_id="a") as again:
        assert again.count(agent_id="a") == 1


def test_a_creation_refused_for_space_leaves_no_half_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _edge_blank.forget()  # the engine's own creation: the shard, then each index checked
    with pytest.raises(DiskFullError):
        EdgeBackend(store, 64, free_space=RoomFor(2))  # room to create, none for its indexes
    assert not (store / SHARD_DIR).exists()
    # a later creation in the process is written from the first shard, indexes and all: its
    # one check is the last before anything is written
    EdgeBackend(tmp_path / "first", 64).close()
    assert _edge_blank.blanks_made() == 1
    with pytest.raises(DiskFullError):
        EdgeBackend(store, 64, free_space=RoomFor(0))
    assert not [p.name for p in store.iterdir() if p.name.startswith(SHARD_DIR)]
    with MemoryStore(store, embedder=HashingEmbedder(dim=96), agent_id="a") as opened:
        assert opened.count(agent_id="a") == 0


@pytest.mark.parametrize("damage", ["deleted", "emptied"])
def test_a_store_with_notes_and_no_record_says_what_happened(tmp_path: Path, damage: str) -> None:
    store = tmp_path / "store"
    embedder = HashingEmbedder()
    with MemoryStore(store, embedder=embedder, agent_id="a") as made:
        made.add("a note that must not be lost", agent_id="a", enrich=False)
    meta = store / META_FILE
    if damage == "deleted":
        meta.unlink()
    else:
        meta.write_text("")
    for opener in (HashingEmbedder(dim=96), embedder):  # another size, and its own
        with pytest.raises(BackendError) as err:
            MemoryStore(store, embedder=opener, agent_id="a")
        message = str(err.value)
        assert "holds 1 points" in message and str(store) in message
        assert "backup" in message and "reembed" not in message
    assert (store / SHARD_DIR).exists()  # nothing was deleted
