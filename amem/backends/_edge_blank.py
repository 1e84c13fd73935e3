"""A new edge store's shard, written out from the first one a process made.

Creating a shard and its payload indexes cost the engine ~0.35 s of CPU on every new store
(each ``create_field_index`` 11-17 ms on an empty shard, more with each index before it; 22 of
them), while loading a finished empty shard costs ~0.02-0.09 s. Every creation at one
dimension and layout leaves the same shard, so the first one in a process is made by the
engine as before, and read into memory (:func:`keep`, right after its indexes: the data only,
~100 KB; the engine's files are sparse, ~240 MB long); each later creation writes those bytes
out again, holes left as holes, and loads the result (:func:`written`). What this saves is paid
by whoever makes many stores in one process: a server giving each agent family its own home, a
migration, the test suite (thousands of in-memory stores). A command's single creation costs
what it did, plus the read (~0.01 s).

The shard is written beside its place (``shard.new``) and renamed into it, so a creation
killed part way leaves no half-written shard where ``EdgeBackend`` looks for one; the next
creation deletes the leftover. Files are owner-only from their first byte (0o600, directories
0o700), as the store gives everything the engine creates. Two stores written from one blank
share the segments' names (uuids), never their files: nothing moves segments between stores.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Hashable

import qdrant_edge as qe

from amem.backends._edge_space import data_extents

NEW_SUFFIX = ".new"


@dataclass(frozen=True)
class BlankFile:
    path: str  # relative to the shard's directory
    size: int
    #: (offset, data), no page of zeros among them; the rest of ``size`` is holes
    extents: tuple[tuple[int, bytes], ...]


@dataclass(frozen=True)
class Blank:
    dirs: tuple[str, ...]  # relative, parents before children
    files: tuple[BlankFile, ...]

    @property
    def data_bytes(self) -> int:
        return sum(len(data) for f in self.files for _, data in f.extents)


_blanks: dict[Hashable, Blank] = {}


def blanks_made() -> int:
    """How many blanks this process holds (one per dimension and layout created)."""
    return len(_blanks)


def forget() -> None:
    """Drop every blank: the next creation is the engine's own again (and kept)."""
    _blanks.clear()


#: the unit zeros are left out in: a page, what a filesystem allocates and a map faults in
PAGE = 4096
_ZERO_PAGE = bytes(PAGE)


def nonzero_runs(start: int, data: bytes) -> list[tuple[int, bytes]]:
    """The runs of ``data`` (read at offset ``start``) that hold a non-zero byte, cut at page
    boundaries: zero pages are left out, to be written as holes.

    Why: on tmpfs the engine's own creation reads its index files whole, which gives every
    page a frame, so the files report their holes as data. Kept as data, a blank captured on
    tmpfs (a ``:memory:`` store where ``/tmp`` is a tmpfs) wrote every later store of the
    process, on disk too, ~55 MB of zeros where the engine's creation leaves holes.
    """
    runs: list[tuple[int, bytes]] = []
    view = memoryview(data)
    run_start: int | None = None
    lo = 0
    while lo < len(data):
        # page boundaries are absolute offsets: the first piece ends at the first boundary
        hi = min(len(data), lo + PAGE - (start + lo) % PAGE)
        zero = view[lo:hi] == _ZERO_PAGE[: hi - lo]
        if zero and run_start is not None:
            runs.append((start + run_start, bytes(view[run_start:lo])))
            run_start = None
        elif not zero and run_start is None:
            run_start = lo
        lo = hi
    if run_start is not None:
        runs.append((start + run_start, bytes(view[run_start:])))
    return runs


def read_blank(root: Path) -> Blank:
    """The directories and files under ``root``, each file's data extents read."""
    dirs: list[str] = []
    files: list[BlankFile] = []
    for here, subdirs, names in os.walk(root):
        subdirs.sort()
        rel = os.path.relpath(here, root)
        if rel != ".":
            dirs.append(rel)
        for name in sorted(names):
            path = os.path.join(here, name)
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                extents = []
                for start, end in data_extents(f.fileno()):
                    f.seek(start)
                    extents.extend(nonzero_runs(start, f.read(end - start)))
            files.append(BlankFile(os.path.relpath(path, root), size, tuple(extents)))
    return Blank(tuple(dirs), tuple(files))


def write_blank(blank: Blank, dest: Path, *, sync: bool = True) -> None:
    """Write ``blank`` as the directory ``dest`` (which must not exist); ``sync``: every file
    that holds data and every directory synced to disk before it returns (~0.04 s; a store
    deleted at close skips it)."""
    os.mkdir(dest, 0o700)
    for rel in blank.dirs:
        os.mkdir(dest / rel, 0o700)
    for f in blank.files:
        fd = os.open(dest / f.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            for offset, data in f.extents:
                os.pwrite(fd, data, offset)
            os.ftruncate(fd, f.size)
            if sync and f.extents:  # a file of holes holds nothing to sync
                os.fsync(fd)
        finally:
            os.close(fd)
    for rel in (*reversed(blank.dirs), ".") if sync else ():
        fd = os.open(dest / rel, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def keep(key: Hashable, shard_dir: Path) -> None:
    """Keep the shard just created at ``shard_dir`` (flushed, nothing written to it but its
    indexes) as the blank of ``key``: everything its config and indexes depend on."""
    if key not in _blanks:
        _blanks[key] = read_blank(shard_dir)


def written(shard_dir: Path, config: qe.EdgeConfig, key: Hashable, *,
            sync: bool = True) -> qe.EdgeShard | None:
    """A new shard at ``shard_dir`` written from the blank of ``key`` and loaded with
    ``config``; None when this process has no blank for ``key`` yet (the caller creates it
    and :func:`keep` s it). ``sync``: see :func:`write_blank`."""
    blank = _blanks.get(key)
    if blank is None:
        return None
    staging = shard_dir.with_name(shard_dir.name + NEW_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)  # a creation killed part way
    try:
        write_blank(blank, staging, sync=sync)
        os.rename(staging, shard_dir)
        if sync:
            fd = os.open(shard_dir.parent, os.O_RDONLY)
            try:
                os.fsync(fd)  # the rename itself
            finally:
                os.close(fd)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return qe.EdgeShard.load(str(shard_dir), config)
