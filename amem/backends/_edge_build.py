"""Build the index of an open edge store on a copy, while the store keeps serving.

``EdgeBackend.optimize()`` closes the shard for a child process to optimise it: every call of
the owning process waits minutes at 100k points. Here the shard is flushed and copied
(``shard.build``) under the engine gate; a child optimises the copy (at a lower CPU
priority: the live store's writes come first) while the live shard answers and takes writes.
Each write acknowledged meanwhile is also appended to a change log (``shard.build.log``,
one JSON line a write: the operation and its data, in the order the gate let them through).
A second child (at the serving process's priority) applies the log onto the built copy in
batches until it has nearly reached the log's end, then flushes and exits; under the gate
again the copy is swapped in and the last lines (those appended since that child's last
read) applied.

Why the child applies the log: the serving process used to copy the changed points itself
(read from the live shard, written onto the copy), and both engine calls hold the GIL, so a
writer going flat out ran at half its rate for as long as that copy lasted (20 s after 20k
writes). Appending a line costs a writer some microseconds; the child's batches run on the
other core. A write the log could not take (disk full), or an engine write that failed
during the build (its effect on the live shard unknown), drops the build: the store keeps its
live shard and the next bulk write builds again.

Crash safety: the swap renames ``shard`` -> ``shard.old`` and ``shard.build`` -> ``shard``,
applies the tail, flushes, and only then commits by renaming ``shard.old`` ->
``shard.old.done`` (atomic) before deleting it. While ``shard.old`` exists the swap is not
committed, so :func:`recover` (run before every open) puts it back as ``shard``: the state
from before the build, which had every write. The log and the copy are only ever read by
the build. A crash only loses the build, never a write.
"""

from __future__ import annotations

import base64
import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from array import array
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Protocol, Sequence

import qdrant_edge as qe

from amem.backends.base import DENSE, SPARSE
from amem.backends._edge_space import allocated_bytes, copy_sparse, data_extents
from amem.backends._lock import process_command
from amem.kernel.files import flock_holder
from amem.errors import BackendError, StoreLockedError
from amem.kernel.children import child_argv, exit_if_orphaned

log = logging.getLogger(__name__)

BUILD_DIR = "shard.build"
LOG_FILE = "shard.build.log"
#: log lines left for the swap under the gate: the child stops catching up once a read of
#: the log brings at most this many (the rest arrive while it flushes and exits)
SWAP_REPLAY_MAX = 256
#: log lines the child reads and applies per batch
CATCH_UP_CHUNK = 2000
#: the child stops catching up after applying this many times the log's bytes when it began
#: (plus 1 MB): writes faster than its batches would never let it end; the swap takes the rest
CATCH_UP_FACTOR = 4
#: the child's niceness: its minutes of index building yield the CPU to the serving process
CHILD_NICE = 10
OLD_DIR = "shard.old"
DONE_DIR = "shard.old.done"

#: the children of :func:`build_on_copy` (run with ``-c``; arguments: see :func:`child_main`);
#: the child's one line of stdout is its reply to the parent, which reads it from the pipe
#: they die with their parent (``amem.kernel.children``): an orphan would go on writing into a
#: ``shard.build`` that the next opener's ``recover`` deletes and the next build copies into
BUILD_CHILD = """
from amem.backends._edge_build import child_main
sys.stdout.write(child_main(sys.argv[1:]) + "\\n")
"""

#: a checked point as the backend writes it: id, dense list, sparse (indices, values), payload
CheckedPoint = tuple[str, list[float], tuple[list[int], list[float]], dict[str, Any]]


class ShardHolder(Protocol):
    """Where the backend keeps its open shard (``None`` while it is swapped or closed)."""

    shard: qe.EdgeShard | None


class BuildTarget(Protocol):
    """What a build on a copy needs of the edge store (``EdgeBackend`` is one).

    Named here, not imported from ``amem.backends.edge``, so this module sits below the backend
    that calls it (no import cycle).
    """

    path: Path
    #: the writes made while a build works on a copy (``None``: no build running)
    changes: ChangeLog | None
    #: the child optimising the copy (the backend's ``close`` kills it)
    build_child: subprocess.Popen[str] | None

    @property
    def shard(self) -> qe.EdgeShard: ...

    @property
    def _handle(self) -> ShardHolder: ...

    def _engine(self, op: str, *, write: bool = False) -> AbstractContextManager[None]: ...

    def check_space(self, points: int, data_bytes: int = 0, *, margin: int = ...) -> None: ...


class ChangeLog:
    """The writes acknowledged by the live shard during a build, appended to ``path``.

    Called under the engine gate, after the engine took the write, so the lines are in the
    order the live shard applied them. Never raises into the write (it is acknowledged
    already): a line it cannot append marks the log ``broken`` and the build is dropped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # O_APPEND and one write() a line: the child never sees a line out of order
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                                       0o600)
        self.lines = 0
        #: why the build cannot be swapped in (``None``: it can)
        self.broken: str | None = None

    def upsert(self, points: Sequence[CheckedPoint]) -> None:
        self._append({"op": "upsert", "points": [
            [pid, _f32(dense), idx, _f32(val), payload] for pid, dense, (idx, val), payload in points]})

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        self._append({"op": "set_payload", "ids": list(ids), "payload": payload})

    def update_vectors(self, pid: str, dense: list[float] | None,
                       sparse: tuple[list[int], list[float]] | None) -> None:
        self._append({"op": "vectors", "id": pid, "dense": None if dense is None else _f32(dense),
                      "sparse": None if sparse is None else [sparse[0], _f32(sparse[1])]})

    def delete(self, ids: Sequence[str]) -> None:
        self._append({"op": "delete", "ids": list(ids)})

    def fail(self, why: str) -> None:
        """Mark the build as not to be swapped in (the first reason is kept)."""
        if self.broken is None:
            self.broken = why
            log.warning("the index build on a copy of %s will be dropped: %s", self.path.parent, why)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _append(self, record: dict[str, Any]) -> None:
        if self.broken is not None:
            return
        if self._fd is None:
            self.fail("a write came after the change log was closed")
            return
        try:
            data = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
            while data:
                data = data[os.write(self._fd, data):]
        except (OSError, TypeError, ValueError) as exc:
            self.fail(f"the change log could not take a write: {exc}")
            return
        self.lines += 1


def _f32(values: list[float]) -> str:
    """``values`` as base64 float32 (the engine stores float32: the round trip is exact)."""
    return base64.b64encode(array("f", values).tobytes()).decode("ascii")


def _unf32(text: str) -> list[float]:
    values = array("f")
    values.frombytes(base64.b64decode(text))
    return values.tolist()


class LogReader:
    """Complete lines of a change log from a byte offset on (the last line may be half written)."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self._file: IO[bytes] = open(path, "rb")  # noqa: SIM115 (closed by close())
        self._file.seek(offset)
        #: the offset after the last complete line read
        self.offset = offset
        self._partial = b""

    def read(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Up to ``limit`` records appended since the last read (all with ``None``)."""
        records: list[dict[str, Any]] = []
        while limit is None or len(records) < limit:
            line = self._file.readline()
            if not line:
                break
            if not line.endswith(b"\n"):  # a writer is appending it: read it whole next time
                self._partial += line
                break
            line, self._partial = self._partial + line, b""
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise BackendError(f"the change log {self._file.name!r} has a bad line at byte "
                                   f"{self.offset}: {exc}") from exc
            self.offset += len(line)
            records.append(record)
        return records

    def close(self) -> None:
        self._file.close()


def apply(shard: qe.EdgeShard, records: Sequence[dict[str, Any]]) -> None:
    """Apply change-log ``records`` onto ``shard`` in order; runs of upserts or of deletes go
    as one engine call each."""
    points: dict[str, qe.Point] = {}
    deletes: list[str] = []

    def send() -> None:
        if points:
            shard.update(qe.UpdateOperation.upsert_points(list(points.values())))
            points.clear()
        if deletes:
            shard.update(qe.UpdateOperation.delete_points(list[Any](deletes)))
            deletes.clear()

    for record in records:
        op = record.get("op")
        if op == "upsert":
            if deletes:
                send()
            for pid, dense, idx, val, payload in record["points"]:
                points.pop(pid, None)  # a later write of the same point wins
                points[pid] = qe.Point(pid, {DENSE: _unf32(dense),
                                             SPARSE: qe.SparseVector(idx, _unf32(val))}, payload)
        elif op == "delete":
            if points:
                send()
            deletes.extend(record["ids"])
        elif op == "set_payload":
            send()
            shard.update(qe.UpdateOperation.set_payload(list[Any](record["ids"]), record["payload"]))
        elif op == "vectors":
            send()
            vectors: dict[str, Any] = {}
            if record["dense"] is not None:
                vectors[DENSE] = _unf32(record["dense"])
            if record["sparse"] is not None:
                vectors[SPARSE] = qe.SparseVector(record["sparse"][0], _unf32(record["sparse"][1]))
            shard.update(qe.UpdateOperation.update_vectors([qe.PointVectors(record["id"], vectors)]))
        else:
            raise BackendError(f"the change log has an unknown operation {op!r}")
    send()


def child_main(argv: list[str]) -> str:
    """The build's two children, one after the other; what the child answers its parent.

    ``optimize <copy>`` (at ``CHILD_NICE``) optimises the copy and answers ``changed`` or
    ``optimal``. ``catch-up <copy> <log> <swap_max>`` (at the serving process's priority: a
    niced catch-up on a busy machine fell behind a writer for minutes, and the swap then
    replayed 18k writes under the gate) applies the change log onto the copy until a read
    brings at most ``swap_max`` new lines, flushes, reads the copy's files into the page
    cache (``read_ahead``), and answers ``<lines applied> <offset>``.
    """
    mode, build = argv[0], Path(argv[1])
    parent = os.getppid()  # checked between the catch-up's batches (no signal elsewhere)
    if mode == "optimize":
        if hasattr(os, "nice"):
            os.nice(CHILD_NICE)
        shard = qe.EdgeShard.load(str(build))
        try:
            return "changed" if shard.optimize() else "optimal"
        finally:
            shard.close()
    if mode != "catch-up":
        raise SystemExit(f"unknown mode {mode!r}: optimize or catch-up")
    log_path, swap_max = Path(argv[2]), int(argv[3])
    shard = qe.EdgeShard.load(str(build))
    try:
        reader = LogReader(log_path)
        try:
            budget = CATCH_UP_FACTOR * log_path.stat().st_size + 1024 * 1024
            applied = 0
            while True:
                exit_if_orphaned(parent)
                records = reader.read(CATCH_UP_CHUNK)
                apply(shard, records)
                applied += len(records)
                if len(records) <= swap_max or reader.offset >= budget:
                    break
            shard.flush()
        finally:
            reader.close()
    finally:
        shard.close()
    read_ahead(build)
    return f"{applied} {reader.offset}"


def read_ahead(root: Path, *, chunk: int = 1 << 20, budget: int | None = None,
               cancelled: Callable[[], bool] | None = None) -> int:
    """Read every file under ``root`` once, so its pages are in the page cache; bytes read.

    The engine evicts a segment's files from the page cache whenever it drops the segment:
    at ``close()``, and as an optimisation ends for the segments it has just built (0 bytes
    resident right after either, measured with ``fincore``). The built copy's files were
    therefore cold when the serving process mapped them after the swap (4,000 major page
    faults in the first 60 searches after a 20k build, none in the next 60), and so were a
    plain ``optimize()``'s. The catch-up child reads the copy after its flush, before it
    answers, outside the engine gate; ``EdgeBackend.optimize`` reads the new segments after
    the build; the page cache is shared, so the serving process's maps then find them.

    Only the data is read: the engine's files are sparse (a 10k store's segments: 306 MB long,
    40 MB of data), and reading a hole would fill the page cache with zeros. At most
    ``budget`` bytes (default: half the memory the system reports available), so a store
    larger than the machine's spare memory does not push out the pages it just read, or
    other programs'. A file removed meanwhile is skipped; ``cancelled``, checked at each chunk,
    ends the reading early (a store closed meanwhile).
    """
    left_total = _spare_memory() // 2 if budget is None else budget
    buf = memoryview(bytearray(chunk))
    total = 0
    for path in sorted(root.rglob("*")):
        try:
            if not path.is_file() or path.is_symlink():
                continue
            with open(path, "rb", buffering=0) as f:
                for start, end in data_extents(f.fileno()):
                    f.seek(start)
                    left = min(end - start, left_total - total)
                    while left > 0:
                        if cancelled is not None and cancelled():
                            return total
                        got = f.readinto(buf[:min(chunk, left)])
                        if not got:
                            break
                        total += got
                        left -= got
        except FileNotFoundError:
            continue
        if total >= left_total:
            log.info("read %d MB of %s back into the page cache, the budget (half the "
                     "memory available); the rest is read from disk when searched", total >> 20,
                     root)
            break
    return total


def _spare_memory() -> int:
    """The memory the system reports available (``MemAvailable``), in bytes; where it does not
    say, no limit."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return sys.maxsize


def recover(path: Path, shard_name: str) -> None:
    """Undo what an interrupted build left in the store directory ``path``."""
    shard, old = path / shard_name, path / OLD_DIR
    if old.exists():
        log.warning("an index build of %s stopped during its swap; the shard from before it "
                    "is restored (it holds every write)", path)
        if shard.exists():
            shutil.rmtree(shard)
        os.rename(old, shard)
    remove_build(path / BUILD_DIR)
    if (path / DONE_DIR).exists():
        shutil.rmtree(path / DONE_DIR, ignore_errors=True)
    (path / LOG_FILE).unlink(missing_ok=True)


def remove_build(build: Path) -> None:
    """Delete a build's copy left by an earlier build, unless a process still works on it.

    The engine locks the copy's WAL while a build child has it open: a child that outlived
    its parent (an amem before ``amem.kernel.children``, or a platform without the parent's
    death signal) would go on writing while the copy is deleted and copied again (the next
    build then failed with "File exists ... temp_segments"). It is named instead.
    """
    if not build.exists():
        return
    holder = flock_holder(build / "wal")
    if holder is not None:
        raise StoreLockedError(
            f"{build} is still being written by process {holder} "
            f"({process_command(holder) or 'command unknown'}), the child of an index build "
            "whose parent is gone; it ends when its step is done. Retry then, or stop it "
            f"(kill {holder}): it holds no write of its own.", path=str(build.parent),
            holder_pid=holder)
    shutil.rmtree(build)


def build_on_copy(backend: BuildTarget, shard_name: str, *,
                  swap_max: int = SWAP_REPLAY_MAX) -> str:
    """Optimise a copy of the shard in a child, which then applies the writes made meanwhile;
    swap it in and apply the last few.

    Returns the child's outcome (``changed``/``optimal``), the change-log lines the child
    applied and those the swap applied (about ``swap_max`` at most unless writes outran the
    child, see ``CATCH_UP_FACTOR``).
    """
    shard_dir, build = backend.path / shard_name, backend.path / BUILD_DIR
    log_path = backend.path / LOG_FILE
    # The copy keeps the engine's holes (``copy_sparse``) and the child's build writes new
    # segments beside it: room for twice what the shard takes on disk, or the copy could fill
    # the disk and the live shard's next write find none. Refused before the copy. (Its
    # length with the holes, 1 GB for a 21 MB store, was asked before.)
    backend.check_space(0, 0, margin=2 * allocated_bytes(shard_dir) + 16 * 1024 * 1024)
    with backend._engine("index build copy"):
        backend.shard.flush()
        remove_build(build)
        shutil.copytree(shard_dir, build, copy_function=copy_sparse)
        backend.changes = ChangeLog(log_path)
    try:
        outcome = _run_child(backend, "optimize", str(build))
        out = _run_child(backend, "catch-up", str(build), str(log_path), str(swap_max))
        try:
            applied, offset = out.split()
            caught_up, reached = int(applied), int(offset)
        except ValueError:
            raise BackendError(f"the index build's catch-up child of {backend.path} answered "
                               f"{out!r}, not '<applied> <offset>'") from None
        with backend._engine("index build swap"):
            replayed = _swap(backend, shard_dir, build, reached)
        log.info("index of %s built (%s; %d logged writes applied by the child, %d by the swap)",
                 backend.path, outcome, caught_up, replayed)
        return f"{outcome}, {caught_up} copied before the swap, {replayed} replayed"
    finally:
        with backend._engine("index build end"):  # no write may log into a closed file
            changes, backend.changes = backend.changes, None
        if changes is not None:
            changes.close()
        shutil.rmtree(build, ignore_errors=True)
        log_path.unlink(missing_ok=True)


def _run_child(backend: BuildTarget, *args: str) -> str:
    """Run one of the build's children (``backend.build_child`` meanwhile, for ``close`` to
    kill); what it printed."""
    child = subprocess.Popen(child_argv(BUILD_CHILD, *args), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=child_env())
    backend.build_child = child
    try:
        out, err = child.communicate()
    finally:
        backend.build_child = None
    if child.returncode != 0:
        tail = " | ".join(err.strip().splitlines()[-3:]) or f"exit code {child.returncode}"
        raise BackendError(f"building the index of {backend.path} in a child process failed "
                           f"({args[0]}): {tail}")
    return out.strip()


def child_env() -> dict[str, str]:
    """The child's environment: it imports this very ``amem`` (a checkout run from its own
    directory, or a benchmark's old tree, is not on the child's default path)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _swap(backend: BuildTarget, shard_dir: Path, build: Path, offset: int) -> int:
    """Swap the built copy in for the live shard and apply the change log from ``offset``
    onto it (the engine gate is held); log lines applied."""
    changes = backend.changes
    if changes is None:
        raise BackendError(f"the index build of {backend.path} lost its change log")
    if changes.broken is not None:
        raise BackendError(f"the index build of {backend.path} was dropped: {changes.broken}")
    reader = LogReader(changes.path, offset)
    try:
        records = reader.read()
    finally:
        reader.close()
    old, done = backend.path / OLD_DIR, backend.path / DONE_DIR
    live = backend.shard
    t0 = time.perf_counter()
    live.flush()
    t1 = time.perf_counter()
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
    t2 = time.perf_counter()
    try:
        apply(built, records)
        built.flush()
        t3 = time.perf_counter()
        log.info("index build swap: live flush %.2f s, close + load %.2f s, %d lines applied "
                 "+ flush %.2f s",
                 t1 - t0, t2 - t1, len(records), t3 - t2)
    except BaseException:
        # Not committed: the live shard from before the swap comes back whole.
        built.close()
        backend._handle.shard = None
        recover(backend.path, shard_dir.name)
        backend._handle.shard = qe.EdgeShard.load(str(shard_dir))
        raise
    os.rename(old, done)  # the commit point (see the module docstring)
    shutil.rmtree(done, ignore_errors=True)
    return len(records)
