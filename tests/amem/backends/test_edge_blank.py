"""A new edge store's shard is written out from a blank made once per process
(``amem.backends._edge_blank``): it must be the shard the engine would have made, every store's
own, private, and a creation killed part way must leave nothing a later open mistakes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from amem.backends import EdgeBackend
from amem.backends import _edge_blank
from amem.backends.base import Point, SparseVector
from amem.backends.edge import SHARD_DIR, new_store_config, wanted_indexes
from amem.kernel.errors import DiskFullError
from amem.kernel.files import FixedFreeSpace

DIM = 8


def _point(pid: str) -> Point:
    return Point(id=pid, dense=np.array([1.0] + [0.0] * (DIM - 1), dtype=np.float32),
                 sparse=SparseVector(indices=(1,), values=(1.0,)),
                 payload={"id": "n1", "agent_id": "a", "is_active": True, "tags": ["x"]})


def _described(value: object) -> object:
    """An engine object as plain values (the binding's objects print only their address)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    names = [n for n in dir(value) if not n.startswith("_") and not callable(getattr(value, n))]
    return (type(value).__name__, {n: _described(getattr(value, n)) for n in names}) if names \
        else str(value)


def _schema(shard_dir: Path) -> dict[str, object]:
    shard = qe.EdgeShard.load(str(shard_dir), new_store_config(DIM))
    try:
        return {name: (str(info.data_type), _described(info.params), info.points)
                for name, info in shard.info().payload_schema.items()}
    finally:
        shard.close()


def test_a_new_store_is_the_shard_the_engine_makes_with_every_index(tmp_path: Path) -> None:
    EdgeBackend(tmp_path / "first", DIM).close()  # the engine's, kept as the blank
    made = EdgeBackend(tmp_path / "copied", DIM)  # written from it
    made.close()
    # what the engine makes when asked directly, with the same layout and indexes
    direct = tmp_path / "direct"
    shard = qe.EdgeShard.create(str(direct), new_store_config(
        DIM, made.segment_kb, made.search_threads, made.indexing_kb))
    for name, schema in wanted_indexes():
        shard.update(qe.UpdateOperation.create_field_index(name, schema))
    shard.close()
    copied = tmp_path / "copied" / SHARD_DIR
    assert _schema(copied) == _schema(direct)
    assert set(_schema(copied)) == {name for name, _ in wanted_indexes()}
    assert (json.loads((copied / "edge_config.json").read_text())
            == json.loads((direct / "edge_config.json").read_text()))
    assert _edge_blank.blanks_made() >= 1
    assert not (tmp_path / "copied" / (SHARD_DIR + _edge_blank.NEW_SUFFIX)).exists()


def test_stores_made_from_one_blank_share_no_file_and_are_private(tmp_path: Path) -> None:
    EdgeBackend(tmp_path / "first", DIM).close()  # so that both below are written from it
    old = os.umask(0o022)  # a caller's usual umask: the files must be private regardless
    try:
        first, second = EdgeBackend(tmp_path / "one", DIM), EdgeBackend(tmp_path / "two", DIM)
    finally:
        os.umask(old)
    try:
        first.upsert([_point("00000000-0000-0000-0000-000000000001")])
        first.flush()
        assert first.count() == 1 and second.count() == 0
        inodes: dict[int, list[Path]] = {}
        for root in (tmp_path / "one" / SHARD_DIR, tmp_path / "two" / SHARD_DIR):
            for here, dirs, files in os.walk(root):
                for name in dirs + files:
                    path = Path(here) / name
                    mode = path.stat().st_mode & 0o777
                    assert mode & 0o077 == 0, f"{path} is {oct(mode)}"
                    if name in files:
                        inodes.setdefault(path.stat().st_ino, []).append(path)
        assert all(len(paths) == 1 for paths in inodes.values())
    finally:
        first.close()
        second.close()
    with EdgeBackend(tmp_path / "one", DIM) as again:  # what was written is kept
        assert again.count() == 1


def test_a_creation_killed_while_writing_the_shard_leaves_nothing_an_open_takes(
        tmp_path: Path) -> None:
    store = tmp_path / "s"
    EdgeBackend(tmp_path / "first", DIM).close()
    EdgeBackend(store, DIM).close()
    # as a process killed while it wrote the new shard left it: the staging copy, no shard
    shutil.move(str(store / SHARD_DIR), str(store / (SHARD_DIR + _edge_blank.NEW_SUFFIX)))
    (store / "meta.json").unlink()
    with EdgeBackend(store, DIM) as made:
        made.upsert([_point("00000000-0000-0000-0000-000000000002")])
        assert made.count() == 1
    assert not (store / (SHARD_DIR + _edge_blank.NEW_SUFFIX)).exists()


def test_an_index_a_store_lacks_is_made_at_open_and_refused_without_room(tmp_path: Path) -> None:
    """A store made before an index existed gets it at its next open, each index after its
    own space check (the creation's blank does not reach an existing store)."""
    store = tmp_path / "s"
    with EdgeBackend(store, DIM) as made:
        made.upsert([_point("00000000-0000-0000-0000-000000000003")])
    shard = qe.EdgeShard.load(str(store / SHARD_DIR), new_store_config(DIM))
    shard.update(qe.UpdateOperation.delete_field_index("tags"))
    shard.close()
    assert "tags" not in _schema(store / SHARD_DIR)
    with pytest.raises(DiskFullError):
        EdgeBackend(store, DIM, free_space=FixedFreeSpace(0))
    with EdgeBackend(store, DIM) as opened:
        assert opened.count() == 1
    assert "tags" in _schema(store / SHARD_DIR)


def test_pages_of_zeros_are_left_out_of_a_blank_at_their_page_boundaries() -> None:
    page = _edge_blank.PAGE
    zeros = bytes(page)
    # a run ends at the page it is in; a page of zeros between two runs splits them
    assert _edge_blank.nonzero_runs(0, zeros + b"a" + bytes(page - 1) + zeros + b"b") == [
        (page, b"a" + bytes(page - 1)), (3 * page, b"b")]
    # an extent that starts inside a page is cut at the absolute boundary
    runs = _edge_blank.nonzero_runs(100, bytes(page - 100) + b"x" + bytes(page))
    assert [(offset, len(data)) for offset, data in runs] == [(page, page)]
    assert _edge_blank.nonzero_runs(7, bytes(3 * page)) == []
    assert _edge_blank.nonzero_runs(0, b"") == []


def test_a_blank_read_where_holes_read_as_zeros_writes_holes(tmp_path: Path) -> None:
    """On tmpfs the engine's own creation reads its index files whole, which turns their
    holes into pages of zeros; a blank kept from there wrote every later store of the process
    ~55 MB of zeros where the engine leaves holes (a disk store after a ``:memory:`` one on a
    tmpfs ``/tmp``). Zero pages are holes in the blank, wherever it was read."""
    source = tmp_path / "source"
    source.mkdir()
    page = _edge_blank.PAGE
    with open(source / "flags.dat", "wb") as f:  # zeros written as data, as tmpfs reports them
        f.write(bytes(64 * page) + b"flag" + bytes(page - 4) + bytes(63 * page))
    blank = _edge_blank.read_blank(source)
    assert blank.data_bytes == page
    _edge_blank.write_blank(blank, tmp_path / "copy", sync=False)
    copy = tmp_path / "copy" / "flags.dat"
    assert copy.read_bytes() == (source / "flags.dat").read_bytes()
    assert os.stat(copy).st_blocks * 512 <= 2 * page  # the one page of data, the rest holes
