"""Build the index of an open edge store on a copy, while the store keeps serving.

``EdgeBackend.optimize()`` closes the shard for a child process to optimise it: every call of
the owning process waits minutes at 100k points. Here the shard is flushed and copied
(``shard.build``) under the engine gate; a child optimises the copy (at a lower CPU
priority: the live store's writes come first) while the live shard answers and takes writes
(their point ids are recorded); then the points changed meanwhile are copied onto the built
shard in rounds outside the gate, each round taking what changed during the one before; once
few are left, under the gate again, the copy is swapped in and the rest written onto it
(deleted points deleted). Calls wait only for the copy and the last, short swap: replaying a
minute of writes under the gate stopped every write for seconds (15k replayed points: 16 s).

Crash safety: the swap renames ``shard`` -> ``shard.old`` and ``shard.build`` -> ``shard``,
replays, flushes, and only then commits by renaming ``shard.old`` -> ``shard.old.done``
(atomic) before deleting it. While ``shard.old`` exists the swap is not committed, so
:func:`recover` (run before every open) puts it back as ``shard``: the state from before the
build, which had every write. A crash only loses the build, never a write.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import qdrant_edge as qe

from amem.errors import BackendError

log = logging.getLogger(__name__)

BUILD_DIR = "shard.build"
#: changed points left for the swap under the gate; more are copied onto the build before it
SWAP_REPLAY_MAX = 256
#: changed points read from the live shard per hold of the gate during the catch-up
CATCH_UP_CHUNK = 1000
#: the catch-up ends after copying this many times the points changed when it began (plus
#: one chunk): writes faster than the copy would never let it end; the swap takes the rest
CATCH_UP_FACTOR = 4
#: the child's niceness: its minutes of index building yield the CPU to the serving process
CHILD_NICE = 10
OLD_DIR = "shard.old"
DONE_DIR = "shard.old.done"


class ShardHolder(Protocol):
    """Where the backend keeps its open shard (``None`` while it is swapped or closed)."""

    shard: qe.EdgeShard | None


class BuildTarget(Protocol):
    """What a build on a copy needs of the edge store (``EdgeBackend`` is one).

    Named here, not imported from ``amem.backends.edge``, so this module sits below the backend
    that calls it (no import cycle).
    """

    path: Path
    #: ids changed while a build works on a copy (``None``: no build running)
    touched: set[str] | None
    #: the child optimising the copy (the backend's ``close`` kills it)
    build_child: subprocess.Popen[str] | None

    @property
    def shard(self) -> qe.EdgeShard: ...

    @property
    def _handle(self) -> ShardHolder: ...

    def _engine(self, op: str) -> AbstractContextManager[None]: ...


def recover(path: Path, shard_name: str) -> None:
    """Undo what an interrupted build left in the store directory ``path``."""
    shard, old = path / shard_name, path / OLD_DIR
    if old.exists():
        log.warning("an index build of %s stopped during its swap; the shard from before it "
                    "is restored (it holds every write)", path)
        if shard.exists():
            shutil.rmtree(shard)
        os.rename(old, shard)
    for leftover in (path / BUILD_DIR, path / DONE_DIR):
        if leftover.exists():
            shutil.rmtree(leftover, ignore_errors=True)


def build_on_copy(backend: BuildTarget, shard_name: str, child_code: str, *,
                  swap_max: int = SWAP_REPLAY_MAX) -> str:
    """Optimise a copy of the shard in a child, swap it in, replay what changed meanwhile.

    Returns the child's outcome (``changed``/``optimal``), the points copied onto the build
    before the swap and those replayed by it (at most ``swap_max`` unless writes outran the
    catch-up, see ``CATCH_UP_FACTOR``).
    """
    shard_dir, build = backend.path / shard_name, backend.path / BUILD_DIR
    with backend._engine("index build copy"):
        backend.shard.flush()
        shutil.rmtree(build, ignore_errors=True)
        shutil.copytree(shard_dir, build)
        backend.touched = set()
    try:
        child = subprocess.Popen([sys.executable, "-c", _niced(child_code), str(build)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        backend.build_child = child
        try:
            out, err = child.communicate()
        finally:
            backend.build_child = None
        if child.returncode != 0:
            tail = " | ".join(err.strip().splitlines()[-3:]) or f"exit code {child.returncode}"
            raise BackendError(f"building the index of {backend.path} in a child process failed: "
                               f"{tail}")
        caught_up = _catch_up(backend, build, swap_max)
        with backend._engine("index build swap"):
            replayed = _swap(backend, shard_dir, build)
        log.info("index of %s built (%s; %d points copied before the swap, %d replayed by it)",
                 backend.path, out.strip(), caught_up, replayed)
        return f"{out.strip()}, {caught_up} copied before the swap, {replayed} replayed"
    finally:
        backend.touched = None
        shutil.rmtree(build, ignore_errors=True)


def _niced(child_code: str) -> str:
    """``child_code`` run at ``CHILD_NICE`` (a platform without ``os.nice`` runs it as is)."""
    return f"import os\nif hasattr(os, 'nice'):\n    os.nice({CHILD_NICE})\n{child_code}"


def _catch_up(backend: BuildTarget, build: Path, swap_max: int) -> int:
    """Copy the points changed since the copy onto the built shard, outside the gate, in
    chunks, until at most ``swap_max`` are left for the swap; points copied.

    Each chunk takes up to ``CATCH_UP_CHUNK`` ids out of the record and reads those points
    from the live shard under the gate (a short hold); a point changed again later is
    recorded again and copied by a later chunk or by the swap, so the copy ends with every
    write.
    """
    copied = 0
    budget: int | None = None
    built: qe.EdgeShard | None = None
    try:
        while True:
            with backend._engine("index build catch-up"):
                touched = backend.touched if backend.touched is not None else set()
                if budget is None:
                    budget = CATCH_UP_FACTOR * len(touched) + CATCH_UP_CHUNK
                if len(touched) <= swap_max or copied >= budget:
                    break
                ids = sorted(touched)[:CATCH_UP_CHUNK]
                touched.difference_update(ids)
                records = backend.shard.retrieve(list[Any](ids), with_payload=True,
                                                 with_vector=True)
            if built is None:
                built = qe.EdgeShard.load(str(build))
            _write_onto(built, ids, records)
            copied += len(ids)
        if built is not None:
            built.flush()
    finally:
        if built is not None:
            built.close()
    return copied


def _write_onto(built: qe.EdgeShard, ids: list[str], records: list[Any]) -> None:
    """Write the live shard's ``records`` of ``ids`` onto ``built``; ids without a record
    were deleted meanwhile and are deleted there."""
    points = []
    for r in records:
        if r.vector is None:  # asked with_vector=True: the engine always answers them
            raise BackendError(f"point {r.id} came back without vectors; build not swapped in")
        points.append(qe.Point(r.id, r.vector, r.payload))
    if points:
        built.update(qe.UpdateOperation.upsert_points(points))
    gone = set(ids) - {str(r.id) for r in records}
    if gone:
        built.update(qe.UpdateOperation.delete_points(list[Any](sorted(gone))))


def _swap(backend: BuildTarget, shard_dir: Path, build: Path) -> int:
    """Swap the built copy in for the live shard (the engine gate is held); points replayed."""
    old, done = backend.path / OLD_DIR, backend.path / DONE_DIR
    ids = sorted(backend.touched or ())
    live = backend.shard
    records = live.retrieve(list[Any](ids), with_payload=True, with_vector=True) if ids else []
    live.flush()
    live.close()
    backend._handle.shard = None
    try:
        os.rename(shard_dir, old)
        try:
            os.rename(build, shard_dir)
        except OSError:
            os.rename(old, shard_dir)  # the live shard goes back; the copy is dropped
            raise
    finally:
        backend._handle.shard = qe.EdgeShard.load(str(shard_dir))
    built = backend.shard
    try:
        _write_onto(built, ids, records)
        built.flush()
    except BaseException:
        # Not committed: the live shard from before the swap comes back whole.
        built.close()
        backend._handle.shard = None
        recover(backend.path, shard_dir.name)
        backend._handle.shard = qe.EdgeShard.load(str(shard_dir))
        raise
    os.rename(old, done)  # the commit point (see the module docstring)
    shutil.rmtree(done, ignore_errors=True)
    return len(ids)
