"""The embedded default backend: the Qdrant engine in-process through ``qdrant-edge-py``.

Layout of a store directory::

    <path>/LOCK        our process lock (flock; holds the owner's pid)
    <path>/meta.json   store metadata, replaced atomically
    <path>/shard/      the EdgeShard: segments + WAL (the engine also locks its WAL)

Before ``optimize()`` every segment is a plain (brute-force, exact) segment; ``optimize()``
builds HNSW and can block for minutes on a large store, so it belongs to maintenance.

A full disk is an error, not a signal. The engine grows its files through memory maps (sparse
files it extends, then touches): a page the filesystem cannot back kills the process with
SIGBUS, not an exception. So every write first checks the free space of the store's
filesystem (``amem.kernel.files.FreeSpace``, statvfs by default) against a margin plus an
estimate proportional to the batch, and refuses with ``DiskFullError`` (code ``disk_full``,
naming the path) before the engine is touched: the refused batch was never acknowledged,
everything acknowledged before it is in the WAL, and reads go on working.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import asdict, replace
from itertools import chain
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterator, Sequence, cast

import numpy as np
import qdrant_edge as qe

from amem.backends import _common as c
from amem.backends import _edge_blank, _edge_build, _edge_keys
from amem.backends._edge_fields import CAPACITY as FIELD_CAPACITY, FieldCache
from amem.backends._edge_table import Filler
from amem.backends._edge_heat import PendingHeat, is_heat
from amem.backends._edge_moved import MovedPoints
from amem.backends._edge_space import read_claimed_holes
from amem.backends._edge_live import ACTIVE, SUCCESSOR, LiveFacts
from amem.backends._edge_tenants import TENANT_FIELD, SoleTenant
from amem.backends._common import ties_by_id as _ties_by_id
from amem.backends._filters import to_edge
from amem.backends._jsonfile import read_object, write_object
from amem.backends._lock import StoreLock, locked_message, owner_message, process_command
from amem.kernel.children import child_argv
from amem.kernel.errors import DiskFullError
from amem.kernel.files import (
    FreeSpace, StatvfsFreeSpace, allocates_on_read, check_free_space, fix_modes, flock_holder,
    is_disk_full, private_dir, wide_modes,
)
from amem.backends.base import (
    BOOL_INDEXES, DENSE, FLOAT_INDEXES, KEYWORD_INDEXES, LIVE_KEY, ON_DISK_INDEXES,
    SPARSE, Hit, IsEmpty, Legs, Match, Point, SparseVector, StoreFacts, Where, live_key,
)
from amem.errors import (
    AmemError, BackendError, ConfigError, EmbedderMismatchError, NotFoundError, StoreLockedError,
    ValidationError,
)

log = logging.getLogger(__name__)

SHARD_DIR = "shard"
META_FILE = "meta.json"
#: free space every write leaves the engine beyond its estimate (pages of its indexes, the
#: next WAL segment's first pages, a new segment's headers)
DISK_MARGIN_BYTES = 16 * 1024 * 1024
#: what one point may take on disk beyond its data, estimated high (measured: about 3.5 KB
#: a note all told with 64-d vectors and 300-character texts, WAL included)
POINT_OVERHEAD_BYTES = 16 * 1024
#: what creating a store takes at once (measured: 37 MB on tmpfs, where the engine's flag
#: files are written whole; 0.5 MB on ext4)
CREATE_BYTES = 48 * 1024 * 1024
#: what creating one payload index may take at once (its flag files)
INDEX_BYTES = 4 * 1024 * 1024
#: how long a measure of the engine files' holes is reused (``EdgeBackend._holes``)
_HOLES_TTL_S = 2.0
#: a point's data is written about twice (the WAL, then the segment); counted three times
_DATA_FACTOR = 3
#: the share of each dimension's values int8 quantization spans (the rest are clipped):
#: the engine's suggested 0.99
QUANTILE = 0.99
#: dense queries rank the int8 candidates again by their float vectors: the engine does not
#: by default (its scores would be the int8 estimates, off by up to ~1e-3). Four times the
#: asked-for candidates are rescored, so near ties at the list's end are settled by the float
#: scores too (100k hashing-vector notes, share of the top 10 reaching the exact 10th score:
#: 0.868 rescoring 1x, 0.990 at 2x, 0.993 at 4x, 0.995 at 8x; float HNSW 0.999)
OVERSAMPLING = 4.0
RESCORE = qe.QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING)
DENSE_PARAMS = qe.SearchParams(quantization=RESCORE)
#: an exact search stays exact: every float vector, not the int8 copies (consolidation's pairs)
EXACT_PARAMS = qe.SearchParams(exact=True, quantization=qe.QuantizationSearchParams(ignore=True))


#: the largest segment an index build makes, in KB of float vectors (the engine's
#: ``max_segment_size``: 1 KB = one 256-d vector): 100 MiB, 68,266 points at 384-d. A build's
#: peak RSS follows the size of the segment it writes (about 9 KB a point built plus 0.7-1 KB
#: a point of the store loaded, at 384-d, mostly the mapped pages of the segments it reads and
#: writes): one 100k-point segment took 1.14 GB, one 1M-point segment 10.1 GB; with the limit
#: the build child peaked at 0.81 GB at 100k and 1.51 GB at 1M. The price is more segments per
#: search: two at 100k (+12-17% CPU a search against one), 16 at 1M (~0.45 ms of engine CPU
#: each). A 100k-note store cannot be one segment and build under 1 GB: any limit that meets
#: that aim gives it two.
SEGMENT_KB = 102_400
#: the smallest plain segment a build indexes, in KB of float vectors (the engine's
#: ``indexing_threshold``, whose default, 10,000 KB, is 6,666 points at 384-d). Below its
#: threshold the engine leaves a plain segment as it is, and a build mostly meets small ones:
#: the points written since the last build, those a payload write moved out of the index
#: (``amem.backends._edge_moved``). At 10k notes built, 657 points given a payload write took
#: the engine query from 0.50 to 0.68 ms; ``optimize()`` left them plain at 1,000 KB (0.66 ms,
#: 0.4 s; 800 at the default: 0.71 ms) and merged them back at 1 KB (0.50 ms, 3.3 s). So every
#: non-empty plain segment is indexed (0 would turn indexing off). Search results do not move:
#: the same top 10 for 200 questions before and after ``optimize()`` at 700 and 3,000 notes,
#: which the engine now indexes (int8 copies, rescored with the floats) and left plain before.
INDEXING_KB = 1
#: the most search threads a store gives the engine: a thread each is spawned at open, so a
#: mistyped count (say 100000) must be refused, not tried
MAX_SEARCH_THREADS = 256


def auto_search_threads() -> int:
    """The engine's search threads when the settings leave it to us: one fewer than the CPUs
    this process may run on, at least one.

    A search keeps a core busy of its own (the query embedding, the BM25 leg beside it, the
    ranking steps between engine calls), and the engine's per-segment reads need no more
    threads than there are other cores. The engine's own default sized its pool from the
    machine (eight threads on a 2-CPU one): there, with one or two segments, a search took
    5-13% longer on those eight than on one thread, and with 11 segments the same
    (benchmarks/RESULTS.md, "The engine's search threads")."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity call (macOS): every CPU counts
        cpus = os.cpu_count() or 1
    return min(MAX_SEARCH_THREADS, max(1, cpus - 1))

# Run by optimize() in a child process: the engine holds the GIL while it optimizes, so doing
# it here would stop every thread of this process for the whole run. The child dies with this
# process (``amem.kernel.children``): an orphan kept the live shard busy with no owner to name.
_OPTIMIZE_CHILD = """
import qdrant_edge
shard = qdrant_edge.EdgeShard.load(sys.argv[1])
changed = shard.optimize()
shard.close()
print("changed" if changed else "optimal")
"""


def _sparse_vectors() -> dict[str, qe.EdgeSparseVectorParams]:
    """The BM25 sparse vector as every store holds it (IDF from the engine)."""
    return {SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}


def wanted_indexes() -> list[tuple[str, Any]]:
    """Every payload index of a store: (field, the engine's schema for it)."""
    wanted: list[tuple[str, Any]] = [
        (name, qe.KeywordIndexParams(is_tenant=name == "agent_id",
                                     on_disk=name in ON_DISK_INDEXES or None))
        for name in KEYWORD_INDEXES
    ]
    wanted += [(name, qe.BoolIndexParams(on_disk=True) if name in ON_DISK_INDEXES
                else qe.PayloadSchemaType.Bool) for name in BOOL_INDEXES]
    wanted += [(name, qe.PayloadSchemaType.Float) for name in FLOAT_INDEXES]
    wanted.append((LIVE_KEY, qe.PayloadSchemaType.Keyword))  # read by every search: in RAM
    return wanted


def new_store_config(dim: int, segment_kb: int = SEGMENT_KB,
                     search_threads: int | None = None,
                     indexing_kb: int | None = INDEXING_KB) -> qe.EdgeConfig:
    """The engine layout of a new store: what stays in RAM and what is only mapped.

    The float vectors (1.5 KB a note at 384-d) stay on disk, memory-mapped and never
    pre-read (``Cold``); search walks the HNSW graph over int8 copies of them kept in RAM
    (384 B a note) and rescores its best candidates with the originals, which reads only
    those candidates' pages. Plain (not yet optimized) segments have no quantized copy:
    they search their float vectors, read through the same maps. The payload documents are
    on disk as before; ``ON_DISK_INDEXES`` are set per index in ``_ensure_indexes``.
    Segments are merged up to ``segment_kb`` of float vectors (``SEGMENT_KB``); a build
    indexes plain segments from ``indexing_kb`` of them on (``INDEXING_KB``). The engine
    searches its segments on ``search_threads`` threads (None: its own default).
    """
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(
            size=dim, distance=qe.Distance.Cosine, memory=qe.Memory.Cold,
            quantization_config=qe.ScalarQuantizationConfig(
                type=qe.ScalarType.Int8, quantile=QUANTILE, memory=qe.Memory.Pinned),
        )},
        sparse_vectors=_sparse_vectors(),
        payload_memory=qe.Memory.Cold,
        optimizers=qe.EdgeOptimizersConfig(max_segment_size=segment_kb,
                                           indexing_threshold=indexing_kb),
        wal_enabled=True,
        max_search_threads=search_threads,
    )


def unrecorded_message(path: Path, why: str, points: int) -> str:
    """What a store holding points without a readable record of its embedder says: what
    happened, and what to do (not ``amem reembed``: it reads that record too)."""
    return (f"the store at {path} holds {points:,} points but {why}: the record of the "
            f"embedder that wrote them was deleted, emptied or damaged (by hand, or by a disk "
            f"error). Restore {META_FILE} from a backup, or move {path} aside and import the "
            "notes again into a new store")


def _payload_size(payload: Any) -> int:
    """A payload's size as the engine stores it, near enough (its JSON)."""
    try:
        return len(json.dumps(payload, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return 4096


class _Handle:
    """The open shard and our lock, shared with the finalizer (which must not hold the backend)."""

    def __init__(self, lock: StoreLock) -> None:
        self.shard: qe.EdgeShard | None = None
        self.lock = lock
        #: a temporary store's directory, held here so that it outlives the shard: the
        #: finalizer holds this handle, and a garbage collection that took the backend and its
        #: directory together deleted the files before the finalizer flushed the shard in them
        self.tmp: tempfile.TemporaryDirectory[str] | None = None


def _abandon(handle: _Handle) -> None:
    """Close a store whose backend was dropped without :meth:`EdgeBackend.close`."""
    log.warning("edge store at %s was not closed; closing it now", handle.lock.store)
    shard, handle.shard = handle.shard, None
    try:
        if shard is not None:
            shard.flush()
            shard.close()
    except Exception:  # best effort in a finalizer: the WAL still holds every write
        log.exception("closing the abandoned edge store at %s failed", handle.lock.store)
    finally:
        handle.lock.release()
        tmp, handle.tmp = handle.tmp, None
        if tmp is not None:  # a temporary store: its files go once the shard is closed
            tmp.cleanup()


def _text_ids(points: Sequence[Any]) -> list[str]:
    """The ids of engine points read without payload or vector, as text.

    The binding builds a ``uuid.UUID`` for each ``.id`` (Python's constructor) and ``str``
    formats it again: 1.2 us a point, against 0.55 us to cut the id out of the point's repr,
    which the binding writes in Rust (``ScoredPoint(id="<uuid>", ...``, ``Record(id=...``).
    A search reads ~230 ids (measured at 10k notes: 0.15 ms of its ~3 ms). A repr not of that
    form (another engine version, an integer id) falls back to ``str(p.id)``; a payload or a
    vector would make the repr long, so only bare points come here.
    """
    out: list[str] = []
    for p in points:
        text = repr(p)
        start = text.find('(id="') + 5
        if start > 4 and text[start + 36:start + 37] == '"':
            out.append(text[start:start + 36])
        else:
            out.append(str(p.id))
    return out


class EdgeBackend:
    """A :class:`~amem.backends.base.VectorBackend` on an EdgeShard in ``<path>/shard``.

    Args:
        path: The store directory (created if missing). Not ``":memory:"``: use
            :meth:`temporary` for a throwaway store.
        dim: The dense vector size. Required to create a store; when opening an existing
            store it may be None (read from the shard) or must equal the stored size.
        segment_kb: The largest segment a build makes, in KB of float vectors (default
            ``SEGMENT_KB``). Applies to a new store and to one created without a limit; a
            store keeps the limit it was given (``segment_kb`` then reads it).
        search_threads: The engine's search threads (its per-segment reads run on them); 0
            (the default) = ``auto_search_threads()``. Set at every open (``search_threads``
            then reads it).
        indexing_kb: The smallest plain segment a build indexes, in KB of float vectors
            (default ``INDEXING_KB``; None: the engine's own default, as stores were made
            before it). Set at every open.

    Raises:
        StoreLockedError: another process (or another handle in this one) owns the store.
        EmbedderMismatchError: ``dim`` differs from the store's.
        ConfigError: a new store without ``dim``, or a bad ``path``/``dim``/``segment_kb``/
            ``search_threads``/``indexing_kb``.
    """

    def __init__(self, path: str | Path, dim: int | None = None, *,
                 free_space: FreeSpace | None = None, segment_kb: int = SEGMENT_KB,
                 search_threads: int = 0, indexing_kb: int | None = INDEXING_KB,
                 durable: bool = True) -> None:
        if str(path) == ":memory:":
            raise ConfigError(
                "':memory:' is not a directory for the edge backend; use EdgeBackend.temporary(dim)",
                key="path",
            )
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ConfigError(f"dim must be a positive integer, got {dim!r}", key="dim")
        if isinstance(segment_kb, bool) or not isinstance(segment_kb, int) or segment_kb < 1:
            raise ConfigError(f"segment_kb must be a positive integer (KB of float vectors), "
                              f"got {segment_kb!r}", key="segment_kb")
        if isinstance(search_threads, bool) or not isinstance(search_threads, int) \
                or not 0 <= search_threads <= MAX_SEARCH_THREADS:
            raise ConfigError(f"search_threads must be an integer from 0 to {MAX_SEARCH_THREADS} "
                              f"(0 = one fewer than the CPUs), got {search_threads!r}",
                              key="search_threads")
        if indexing_kb is not None and (isinstance(indexing_kb, bool)
                                        or not isinstance(indexing_kb, int) or indexing_kb < 1):
            raise ConfigError(f"indexing_kb must be a positive integer (KB of float vectors) "
                              f"or None (the engine's default), got {indexing_kb!r}",
                              key="indexing_kb")
        #: the store's segment size limit (KB of float vectors; the stored one once open)
        self.segment_kb = segment_kb
        #: the smallest plain segment a build indexes (``INDEXING_KB``; None: the engine's
        #: default, as stores had before it), given to the engine at every open
        self.indexing_kb = indexing_kb
        #: the threads the engine searches on, given to it at every open
        self.search_threads = search_threads or auto_search_threads()
        self.path = Path(path).expanduser().resolve()
        #: how much room the store's filesystem has left (checked before every write)
        self.free_space: FreeSpace = free_space or StatvfsFreeSpace()
        self._holes_cache: tuple[float, int] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        #: False for a store deleted at close (``temporary``): its new shard is not synced
        self._durable = durable
        try:
            private_dir(self.path)  # 0700: the engine's files inherit no one else's access
        except OSError as exc:
            raise ConfigError(f"cannot create the store directory {self.path}: {exc}", key="path") from exc
        #: whether reading a hole of the engine's files takes space here (tmpfs)
        self._reads_allocate = allocates_on_read(self.path)
        self._lock = StoreLock(self.path)
        self._lock.acquire()
        # qdrant-edge 0.9.0 keeps hard-deleted points in its IDF statistics until the shard is
        # reopened (replacing a point is fine). After a delete, sparse queries therefore ask for
        # IDF over the live points (an empty corpus filter): a little slower, always right.
        self._idf: qe.SearchParams | None = None
        # Every engine call holds the gate, so optimize() can swap the shard under the others.
        self._gate = threading.RLock()
        #: the writes made while an index build works on a copy (None: no build); the
        #: build's child applies them onto the copy, its swap the last few
        self.changes: _edge_build.ChangeLog | None = None
        #: the child process of a running ``optimize_on_copy`` (killed by ``close``)
        self.build_child: subprocess.Popen[str] | None = None
        self._handle = _Handle(self._lock)
        #: retrieval counts not yet written to the engine (``amem.backends._edge_heat``)
        self._heat = PendingHeat()
        #: points moved out of the index by payload and vector writes since the last build
        self.moved = MovedPoints()
        #: whether one agent owns every point (a search may then leave its tenant out)
        self.tenants = SoleTenant()
        #: which live conditions exclude no point (a read may then leave them out)
        self.live = LiveFacts()
        #: a hard delete came since the facts were counted (``store_facts`` counts again)
        self._facts_stale = False
        #: every point carries its ``LIVE_KEY`` (filled at open; every write keeps it)
        self._keyed_all = False
        #: the points this open gave their ``LIVE_KEY``: written by a version without it
        #: (``amem.upgrades.heal_older_writes`` brings them up to date)
        self.keyed_at_open: list[str] = []
        #: bumped by every write a filter can see (``generation``); this handle holds the
        #: store's lock, so no other process writes it
        self._generation = 0
        #: the ranking fields of recently ranked points (``amem.backends._edge_fields``)
        self.field_cache = FieldCache()
        #: the background fill of the ranking table (``keep_fields``; None: not asked)
        self._filler: Filler | None = None
        # what the engine creates from now on is made private (_make_private); what was wide
        # before is left as it was, for ``amem doctor`` to report and ``--fix`` to change
        self._wide_before = frozenset(p for p, _ in wide_modes(self.path))
        try:
            self._handle.shard, self.dim = self._open(dim)
        except BaseException:
            self._lock.release()
            raise
        self._make_private()
        # A backend dropped without close() (or alive at interpreter exit) still flushes, closes
        # the shard and frees the directory for the next opener.
        self._finalizer = weakref.finalize(self, _abandon, self._handle)

    @classmethod
    def temporary(cls, dim: int, *, search_threads: int = 0) -> EdgeBackend:
        """A store in a fresh temporary directory, deleted on :meth:`close`."""
        tmp = tempfile.TemporaryDirectory(prefix="amem-edge-")
        try:
            backend = cls(tmp.name, dim, search_threads=search_threads, durable=False)
        except BaseException:
            tmp.cleanup()
            raise
        backend._tmp = backend._handle.tmp = tmp
        return backend

    # -- opening -----------------------------------------------------------------------------

    def _open(self, dim: int | None) -> tuple[qe.EdgeShard, int]:
        _edge_build.recover(self.path, SHARD_DIR)
        created = fresh = False
        blank_key: tuple[Any, ...] = ()
        shard_dir = self.path / SHARD_DIR
        config_file = shard_dir / "edge_config.json"
        if config_file.exists():
            stored = self._stored_dim(config_file)
            unrecorded = self._unrecorded()
            if unrecorded is not None:
                points = self._points_in(shard_dir, stored)
                if points == 0 and dim is not None and dim != stored:
                    # created but never recorded (killed or refused for space before meta.json
                    # was written): it holds nothing, so it is created again at this size
                    log.warning("the store at %s was never finished (%s, no point stored): "
                                "created again", self.path, unrecorded)
                    shutil.rmtree(shard_dir)
                    (self.path / META_FILE).unlink(missing_ok=True)
                    return self._open(dim)
                # at its own size its creation goes on where it stopped (the indexes it lacks
                # are made below), then it is marked finished
                created = points == 0
                if dim is not None and dim != stored:
                    raise BackendError(unrecorded_message(self.path, unrecorded, points))
            if dim is not None and dim != stored:
                raise EmbedderMismatchError(
                    f"the store at {self.path} holds {stored}-d vectors, the embedder gives {dim}-d; "
                    "open it with its own embedder or rebuild the vectors (amem reembed)",
                    stored=f"dim={stored}", given=f"dim={dim}",
                )
            if self._reads_allocate:
                # tmpfs backs every page the engine reads at load, holes too: without room for
                # them the load dies of SIGBUS; refused here instead, naming the path. Only
                # the files it reads whole count (``_edge_space``): the WAL's and the data's
                # holes are claimed by writes alone
                check_free_space(self.free_space, self.path, read_claimed_holes(shard_dir),
                                 doing="opening the store (tmpfs gives a page to every "
                                       "hole the engine reads as it loads its indexes)")
            # A store created before the memory layout (``new_store_config``) or the segment
            # limit is given them now: the engine keeps its segments as they are (a segment
            # above the limit stays whole, and is merged with nothing more) and builds the
            # new ones in the new layout from the next optimize on (the background index
            # build or ``amem optimize``).
            kept = self._segment_limit(config_file) if self._has_layout(config_file) else None
            # The search threads are given at every open (the engine keeps the last in its
            # config file, so its own reopens after a build inherit them). With the layout in
            # place only they are given: what is left out the engine keeps as stored.
            # The indexing threshold too: a store made before it builds its small plain
            # segments from the next build on (``INDEXING_KB``).
            layout = (qe.EdgeConfig(sparse_vectors=_sparse_vectors(),
                                    max_search_threads=self.search_threads,
                                    optimizers=qe.EdgeOptimizersConfig(
                                        max_segment_size=kept or self.segment_kb,
                                        indexing_threshold=self.indexing_kb))
                      if kept is not None
                      else new_store_config(stored, self.segment_kb, self.search_threads,
                                            self.indexing_kb))
            with self._engine("load"):
                shard = qe.EdgeShard.load(str(shard_dir), layout)
            if kept is None:
                log.info("edge store %s: float vectors on disk with int8 copies in RAM and "
                         "segments of at most %d KB of vectors from the next optimize on (the "
                         "store predates that layout)", self.path, self.segment_kb)
            else:
                self.segment_kb = kept or self.segment_kb
            log.info("opened edge store %s (%d-d)", self.path, stored)
            dim = stored
        else:
            if dim is None:
                raise ConfigError(f"creating a new store at {self.path} needs dim", key="dim")
            if shard_dir.exists() and self._unrecorded() is not None:
                shutil.rmtree(shard_dir)  # a creation killed before it wrote its config
            config = new_store_config(dim, self.segment_kb, self.search_threads,
                                      self.indexing_kb)
            self.check_space(0, margin=DISK_MARGIN_BYTES + CREATE_BYTES)
            # written out from the first shard this process made (``_edge_blank``): the
            # engine's own creation of a shard and its indexes costs ~0.35 s of CPU a store
            blank_key = (dim, self.segment_kb, self.search_threads, self.indexing_kb,
                         tuple(name for name, _ in wanted_indexes()))
            with self._engine("create"):
                copied = _edge_blank.written(shard_dir, config, blank_key, sync=self._durable)
                fresh = copied is None
                shard = qe.EdgeShard.create(str(shard_dir), config) if copied is None else copied
            created = True
            log.info("created edge store %s (%d-d)", self.path, dim)
        try:
            self._ensure_indexes(shard)
            if fresh:  # the engine made it: kept, with its indexes, for the next creation
                with self._engine("keep a blank shard"):
                    shard.flush()
                    _edge_blank.keep(blank_key, shard_dir)
            with self._engine("key the store's points"):
                room, path = self.check_space, self.path
                self._keyed_all = (
                    _edge_keys.fill(shard, room=room, moved=self.moved, path=path,
                                    keyed=self.keyed_at_open)
                    and _edge_keys.mend(shard, room=room, moved=self.moved, path=path))
            with self._engine("read the store's facts"):
                self._count_facts(shard)
        except BaseException:
            shard.close()
            if created:  # a half-made store (no index, say) must not look like a store
                shutil.rmtree(shard_dir, ignore_errors=True)
            raise
        if created and self._unrecorded() is not None:
            # the mark of a finished creation: a shard without it was interrupted (and is
            # made again when it holds nothing); the store's user fills it (``NoteIndex``)
            write_object(self.path / META_FILE, {})
        return shard, dim

    def _unrecorded(self) -> str | None:
        """Why ``meta.json`` records nothing (missing, empty, not a JSON object), or None
        when it is readable: a new store has one from its first open (``NoteIndex``)."""
        try:
            text = (self.path / META_FILE).read_text(encoding="utf-8")
        except FileNotFoundError:
            return f"no {META_FILE}"
        if not text.strip():
            return f"an empty {META_FILE}"
        try:
            value = json.loads(text)
        except ValueError:
            return f"a {META_FILE} that is not valid JSON"
        return None if isinstance(value, dict) else f"a {META_FILE} that holds no JSON object"

    def _points_in(self, shard_dir: Path, dim: int) -> int:
        """The points of a shard not opened yet (loaded and closed again)."""
        with self._engine("load"):
            shard = qe.EdgeShard.load(str(shard_dir), new_store_config(dim, self.segment_kb,
                                                                         self.search_threads,
                                                                         self.indexing_kb))
            try:
                return int(shard.count(qe.CountRequest(exact=True)))
            finally:
                shard.close()

    def _stored_dim(self, config_file: Path) -> int:
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
            dense = config["vectors"][DENSE]
            sparse = config["sparse_vectors"][SPARSE]
        except PermissionError as exc:  # ours, but written by another user (sudo amem ...)
            raise BackendError(owner_message(config_file, exc)) from exc
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BackendError(
                f"{config_file} is not an amem edge store (expected vectors {DENSE!r} and {SPARSE!r}): {exc}"
            ) from exc
        if str(dense.get("distance", "")).lower() != "cosine" or str(sparse.get("modifier", "")).lower() != "idf":
            raise BackendError(f"{config_file}: {DENSE!r} must be cosine and {SPARSE!r} must use IDF")
        return int(dense["size"])

    @staticmethod
    def _has_layout(config_file: Path) -> bool:
        """Whether the stored config already has the memory layout (``_stored_dim`` has
        checked it is ours and readable)."""
        config = json.loads(config_file.read_text(encoding="utf-8"))
        dense = config["vectors"][DENSE]
        return "quantization_config" in dense and dense.get("memory") == "cold"

    @staticmethod
    def _segment_limit(config_file: Path) -> int | None:
        """The stored segment size limit (KB of float vectors), or None: the store has none."""
        config = json.loads(config_file.read_text(encoding="utf-8"))
        optimizers = config.get("optimizers")
        limit = optimizers.get("max_segment_size") if isinstance(optimizers, dict) else None
        return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None

    @property
    def segment_points(self) -> int:
        """The points of the largest segment a build makes (``segment_kb`` at this ``dim``):
        a bulk write starts its builds before the plain part outgrows it (``amem.index_build``)."""
        return max(1, self.segment_kb * 1024 // (4 * self.dim))

    def _ensure_indexes(self, shard: qe.EdgeShard) -> None:
        # Indexes live in the segments and survive a reload; only missing ones are created.
        existing = set(shard.info().payload_schema)
        for name, schema in wanted_indexes():
            if name not in existing:
                self.check_space(0, margin=DISK_MARGIN_BYTES + INDEX_BYTES)
                with self._engine(f"create index {name}"):
                    shard.update(qe.UpdateOperation.create_field_index(name, schema))

    @contextmanager
    def _engine(self, op: str, *, write: bool = False) -> Iterator[None]:
        """Turn the engine's untyped exceptions into our error tree.

        ``write``: the block writes to the engine. If it fails while an index build works on
        a copy, how much of it the live shard took is unknown, so the build is dropped
        (``ChangeLog.fail``) rather than swapped in without it.
        """
        try:
            with self._gate:
                try:
                    yield
                except BaseException as exc:
                    # a payload for a missing point is refused whole (NotFoundError below)
                    if write and self.changes is not None and "No point with id" not in str(exc):
                        self.changes.fail(f"{op} failed during the build: {exc}")
                    raise
        except (AmemError, DiskFullError):
            raise
        except Exception as exc:  # the binding raises plain Exception for engine errors
            text = str(exc)
            if "WouldBlock" in text:  # another opener without our lock holds the WAL
                holder = flock_holder(self.path / SHARD_DIR / "wal")
                raise StoreLockedError(
                    locked_message(self.path, holder, process_command(holder)),
                    path=str(self.path), holder_pid=holder) from exc
            if is_disk_full(exc) or "No space left on device" in text or "os error 28" in text:
                raise DiskFullError(f"the disk holding {self.path} is full ({op}: {text}); "
                                    "free some space and retry", path=str(self.path)) from exc
            raise BackendError(f"qdrant-edge {op} failed on {self.path}: {text}") from exc

    def check_space(self, points: int, data_bytes: int = 0, *, margin: int = DISK_MARGIN_BYTES) -> None:
        """Raise ``DiskFullError`` unless the store's filesystem has room for ``points`` points
        holding ``data_bytes`` of vectors and payload, with ``margin`` to spare, beyond the
        holes of the engine's own files.

        The engine's files are sparse: it sets their length first and fills them later
        through memory maps. The holes of its WAL and data files are filled by writes alone,
        in order, which the estimate counts; those of the files an open reads whole are
        claimed by that read on tmpfs only (``amem.backends._edge_space``, measured). There,
        room for them is kept free, so a write never leaves a store the next open cannot map;
        elsewhere no hole counts (a 21 MB store on ext4 was refused with 254 MB free).
        """
        needed = margin + self._holes() + points * POINT_OVERHEAD_BYTES + _DATA_FACTOR * data_bytes
        check_free_space(self.free_space, self.path, needed)

    def _holes(self) -> int:
        """The holes a next open would claim (tmpfs only; 0 elsewhere), walked at most every
        ``_HOLES_TTL_S`` seconds (a walk stats a few hundred files; a batch of adds should not
        pay it each time)."""
        if not self._reads_allocate:
            return 0
        now = time.monotonic()
        if self._holes_cache is None or now - self._holes_cache[0] > _HOLES_TTL_S:
            self._holes_cache = (now, read_claimed_holes(self.path / SHARD_DIR))
        return self._holes_cache[1]

    @property
    def shard(self) -> qe.EdgeShard:
        """The open engine shard (raises once closed)."""
        shard = self._handle.shard
        if shard is None:
            raise BackendError(f"the edge store at {self.path} is closed")
        return shard

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, points: Sequence[Point]) -> None:
        """Insert or replace whole points (checked first: nothing is written on bad input)."""
        checked = [c.check_point(point, self.dim) for point in points]
        pids = [one[0] for one in checked]
        # the key's few bytes beside each payload
        size = sum(4 * self.dim + 8 * len(one[2][0]) + _payload_size(one[3]) + _edge_keys.KEY_BYTES
                   for one in checked)
        if checked:
            self.check_space(len(checked), size)
            with self._engine("upsert", write=True):
                # the point's agent and state as one key (``base.LIVE_KEY``), whatever was
                # given; inside the gate, as ``lapse`` moves the time the key reads expiries by
                lapsed = self.live.lapsed_upto
                checked = [(pid, dense, sparse, {**payload, LIVE_KEY: live_key(payload, lapsed)})
                           for pid, dense, sparse, payload in checked]
                batch = [qe.Point(pid, {DENSE: dense, SPARSE: qe.SparseVector(*sparse)}, payload)
                         for pid, dense, sparse, payload in checked]
                # before the engine takes them: a search leaving its tenant out sees the change
                self.tenants.written(p[3].get(TENANT_FIELD) for p in checked)
                self.live.written(p[3] for p in checked)
                self._generation += 1
                self.field_cache.forget(pids)
                self.shard.update(qe.UpdateOperation.upsert_points(batch))
                if self.changes is not None:
                    self.changes.upsert(checked)
            self._heat.forget(pids)  # each whole payload was written: it holds the counts now
            self.moved.forget(pids)  # counted as written by the index builder

    def set_payload(self, point_id: str, payload: dict[str, Any]) -> None:
        """Merge ``payload`` into one point's payload; :class:`NotFoundError` if it is missing.

        A payload of only retrieval counts (a search's bump) is held in memory and shown by
        every read until the store persists its writes (``amem.backends._edge_heat``); it is
        not checked against the engine (a point deleted meanwhile is skipped then)."""
        pid = c.check_id(point_id)
        if not isinstance(payload, dict):
            raise ValidationError("payload must be a dict", field="payload")
        if is_heat(payload):
            if self._heat.record(pid, dict(payload)):
                self.write_heat()
            return
        self._heat.forget([pid], payload.keys())
        self.check_space(1, _payload_size(payload))
        try:
            with self._engine("set_payload", write=True):
                if TENANT_FIELD in payload:
                    self.tenants.reassigned()
                self.live.changed(payload)
                payload = self._keyed(pid, payload)
                self._generation += 1
                self.field_cache.forget([pid])
                self.shard.update(qe.UpdateOperation.set_payload([pid], payload))
                if self.changes is not None:
                    self.changes.set_payload([pid], payload)
            self.moved.mark([pid])
        except BackendError as exc:
            if "No point with id" in str(exc):
                raise NotFoundError(f"no point {pid} in {self.path}", id=pid) from exc
            raise

    def update_point(
        self, point_id: str, payload: dict[str, Any], *, where: Where | None = None,
        dense: np.ndarray | None = None, sparse: SparseVector | None = None,
    ) -> bool:
        """Change named parts of one existing point matching ``where``; False if there is none."""
        pid, vectors = c.check_update(point_id, payload, self.dim, dense, sparse)
        dense_part: list[float] | None = vectors.get(DENSE)
        sparse_part: tuple[list[int], list[float]] | None = vectors.get(SPARSE)
        if sparse_part is not None:
            vectors[SPARSE] = qe.SparseVector(*sparse_part)
        flt = to_edge(c.point_where(pid, where))
        assert flt is not None  # a Where with a condition always translates to a filter
        self.check_space(1, _payload_size(payload) + (4 * self.dim if vectors else 0))
        # The gate makes the check and the writes one step for every thread of this process.
        with self._engine("update point", write=True):
            if not self.shard.count(qe.CountRequest(exact=True, filter=flt)):
                return False
            if TENANT_FIELD in payload:
                self.tenants.reassigned()
            self.live.changed(payload)
            payload = self._keyed(pid, payload)
            self._generation += 1
            self.field_cache.forget([pid])
            self._heat.forget([pid], payload.keys())  # what this write carries replaces it
            if payload:
                self.shard.update(qe.UpdateOperation.set_payload_by_filter(flt, payload))
                if self.changes is not None:  # the point matched: the copy holds it as well
                    self.changes.set_payload([pid], payload)
            if vectors:
                self.shard.update(qe.UpdateOperation.update_vectors([qe.PointVectors(pid, vectors)]))
                if self.changes is not None:
                    self.changes.update_vectors(pid, dense_part, sparse_part)
            self.moved.mark([pid])
        return True

    def _keyed(self, pid: str, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with the point's :data:`LIVE_KEY` as it will be after the merge, when it
        changes a field the key says (read from the stored point: inside the engine gate, so no
        write comes between). A payload naming the key itself has it computed all the same."""
        if not payload.keys() & _edge_keys.KEYED_FIELDS:
            return payload
        records = self.shard.retrieve([pid], with_payload=list(_edge_keys.SOURCES),
                                      with_vector=False)
        stored = dict(records[0].payload or {}) if records else {}
        return {**payload, LIVE_KEY: live_key({**stored, **payload}, self.live.lapsed_upto)}

    def delete(self, ids: Sequence[str]) -> None:
        """Hard-delete points; unknown ids are ignored."""
        checked = c.check_ids(ids)
        if checked:
            # a delete writes little (a WAL entry, a flag); it is allowed closer to the edge,
            # so a caller can still drop notes on a nearly full disk
            self.check_space(0, 64 * len(checked), margin=DISK_MARGIN_BYTES // 4)
            with self._engine("delete", write=True):
                self._generation += 1
                self.field_cache.forget(checked)
                self.shard.update(qe.UpdateOperation.delete_points(list[Any](checked)))
                if self.changes is not None:
                    self.changes.delete(checked)
                # The points that made a fact false may be gone: counted afresh at the next
                # ``store_facts`` (once for a run of deletes). A delete never makes a fact
                # false, so nothing a reader left out can be wrong meanwhile.
                self._facts_stale = True
            self._heat.forget(checked)
            self.moved.forget(checked)
            if self._idf is None:
                log.debug("hard delete in %s: IDF now counted over live points until reopen", self.path)
                self._idf = qe.SearchParams(idf=qe.IdfParams(corpus=qe.Filter()))

    def moved_points(self) -> int:
        """Points a payload or vector write moved out of the index since the last build
        (``amem.backends._edge_moved``; counted by ``amem.index_build``)."""
        return len(self.moved)

    def store_facts(self) -> StoreFacts:
        """The agent owning every point (``amem.backends._edge_tenants``) and the live
        conditions no point fails (``amem.backends._edge_live``), with an epoch that moves
        before a write ends any of it. The lock makes this handle the store's only writer, so
        a reader that finds the epoch unchanged after its engine reads saw no point the
        conditions it left out would have excluded."""
        if self._facts_stale:  # after hard deletes: under the gate, so no write comes between
            with self._engine("count the store's facts"):
                if self._facts_stale:
                    self._count_facts(self.shard, unknown_only=True)
        # No gate between the two reads: a write falling between them moves the sum, so the
        # reader's check afterwards drops what it read with them. Both only grow: their sum
        # moves whenever either does.
        sole, tenant_epoch = self.tenants.get()
        live = self.live.get()
        return StoreFacts(sole_agent=sole, all_active=ACTIVE in live.vacuous,
                          none_superseded=SUCCESSOR in live.vacuous,
                          expiry_from=live.expiry_from, keyed=self._keyed_all,
                          lapsed_upto=live.lapsed_upto, key_expiry_from=live.key_expiry_from,
                          epoch=tenant_epoch + live.epoch)

    def lapse(self, now: float) -> bool:
        """Give the active notes whose expiry came by ``now`` (epoch seconds) the lapsed key,
        so a read at ``now`` or later naming the key leaves them out without the expiry's
        range (``amem.backends._edge_live``); True when the keys hold up to ``now``.

        Nothing is written when no expiry came since the last call, or for a time before it
        (a reader with an earlier clock then says the range). The notes themselves stay as
        they are until the sweep: only the backend's own key changes, and it is stripped from
        every read. Without room on the disk, or when the engine refuses the write, the keys
        stay as they were (a warning, False): reads say the range, and the next call tries
        again from the same time.
        """
        if not self._keyed_all:
            return False
        try:
            # one hold of the gate for the read, the room check and the writes, so no write
            # comes between; the room is checked outside the write block, so a full disk
            # never fails a running index build's change log as a failed write would
            with self._gate:
                known = self.live.get()
                if now < known.lapsed_upto:
                    return False
                if now < known.key_expiry_from:
                    return True
                with self._engine("read the notes whose expiry came"):
                    groups = _edge_keys.expiry_came(self.shard, known.lapsed_upto, now)
                ids = [pid for group in groups.values() for pid in group]
                if ids:
                    self.check_space(len(ids), _edge_keys.KEY_BYTES * len(ids))
                with self._engine("key the notes whose expiry came", write=True):
                    self._write_lapsed(now, groups, ids)
        except (BackendError, DiskFullError) as exc:
            log.warning("the notes of %s whose expiry came by %s were not keyed as such (%s); "
                        "searches say the expiry's range", self.path, now, exc)
            return False
        return True

    def _write_lapsed(self, now: float, groups: dict[str, list[Any]], ids: list[str]) -> None:
        """:meth:`lapse`'s writes (inside the gate), then the time and the next expiry."""
        if ids:
            # before the first write: a reader that left the range out at an earlier time
            # reads again, whether all of this lands or not (an engine error midway leaves
            # some keys lapsed with the old time kept; the next call writes them all again)
            self.live.moving()
            self._generation += 1
            self.moved.mark(ids)
        for key, group in groups.items():
            self.shard.update(qe.UpdateOperation.set_payload(group, {LIVE_KEY: key}))
            if self.changes is not None:
                self.changes.set_payload(group, {LIVE_KEY: key})
        self.live.lapsed(now, _edge_keys.first_expiry(self.shard, after=now))

    def _count_facts(self, shard: qe.EdgeShard, *, unknown_only: bool = False) -> None:
        """Read the store's facts from the engine (at open, and after hard deletes): the tenant
        index's values and what the live conditions exclude (exact counts over RAM indexes).
        Called inside the engine's gate, so no write falls between the reads and the loads.

        ``unknown_only`` (after deletes, which can only make facts true): skip what already
        holds. At 100k points the tenant facet costs ~14 ms and the three counts ~2 ms."""
        if not unknown_only or self.tenants.get()[0] is None:
            facet = shard.facet(qe.FacetRequest(key=TENANT_FIELD, limit=2, exact=True))
            # the exact facet lists a deleted agent's value with a count of 0 (after the
            # agents that hold points: the hits come most points first) until a rebuild
            self.tenants.load(hit.value for hit in facet.hits if hit.count > 0)
        self._facts_stale = False
        if unknown_only and self.live.get().complete:
            return

        def count(where: Where) -> int:
            return int(shard.count(qe.CountRequest(exact=True, filter=to_edge(where))))

        # Each shape timed at 100k points (scratch): "not active" ~1 ms where counting the
        # active ones took 14; a successor's IsEmpty 1-2 ms. The earliest expiries are first
        # values of their index (a value no range matches never hides a note).
        lapsed = self.live.lapsed_upto
        self.live.load(inactive=count(Where(must_not=(Match(ACTIVE, True),))),
                       superseded=count(Where(must_not=(IsEmpty(SUCCESSOR),))),
                       earliest_expiry=_edge_keys.first_expiry(shard),
                       earliest_after_lapsed=(None if lapsed == -math.inf
                                              else _edge_keys.first_expiry(shard, after=lapsed)))

    def generation(self) -> int:
        """Changes with every write a filter can see: upserts, payload and vector changes,
        deletes, index builds (the held retrieval counts do not count: no filter names them).
        The lock makes this handle the store's only writer."""
        return self._generation

    def write_heat(self) -> int:
        """Write the retrieval counts held in memory to the engine (one write per distinct
        payload; points deleted meanwhile skipped); the number of points written."""
        groups = self._heat.take()
        if not groups:
            return 0
        try:
            self.check_space(sum(len(pids) for pids, _ in groups))
        except DiskFullError as exc:  # a ranking hint is not worth failing a flush or close
            log.warning("heat: %d retrieval counts not written, the disk is full: %s",
                        sum(len(pids) for pids, _ in groups), exc)
            return 0
        written = 0
        with self._engine("write retrieval counts", write=True):
            for pids, payload in groups:
                present = [str(r.id) for r in self.shard.retrieve(
                    list[Any](pids), with_payload=False, with_vector=False)]
                if present:
                    try:
                        self.shard.update(qe.UpdateOperation.set_payload(list[Any](present),
                                                                         payload))
                    except BaseException:
                        self.field_cache.forget(present)  # what the engine took is unknown
                        raise
                    # merged into what is kept, not forgotten: these are every search's
                    # matches, and a server's ranking table would thin out through the day
                    self.field_cache.patch(present, payload)
                    if self.changes is not None:
                        self.changes.set_payload(present, payload)
                    self.moved.mark(present)
                    written += len(present)
        return written

    # -- reads -------------------------------------------------------------------------------

    def _hit(self, p: Any, with_vectors: bool, fields: Sequence[str] | None = None,
             with_payload: bool = True) -> Hit:
        """One engine record as a hit, the retrieval counts held in memory laid over its
        payload (``fields``: the keys asked for, ``None`` for the whole payload)."""
        score = float(getattr(p, "score", 0.0))
        dense = c.as_array((p.vector or {}).get(DENSE)) if with_vectors else None
        pid, payload = str(p.id), dict(p.payload or {})
        payload.pop(LIVE_KEY, None)  # the backend's own: derived from the fields beside it
        if with_payload:
            self._heat.show(pid, payload, fields)
        return Hit(id=pid, score=score, payload=payload, dense=dense)

    def retrieve(self, ids: Sequence[str], *, with_vectors: bool = False,
                 with_payload: bool = True) -> list[Hit]:
        """The existing points among ``ids``, in the order asked."""
        checked = c.check_ids(ids)
        if not checked:
            return []
        if with_vectors and not with_payload:  # vectors only (MMR's head, missing cosines)
            return self._kept_vectors(checked)
        with self._engine("retrieve"):
            records = self.shard.retrieve(list[Any](checked), with_payload=bool(with_payload),
                                          with_vector=[DENSE] if with_vectors else False)
        found = {str(r.id): self._hit(r, with_vectors, with_payload=bool(with_payload))
                 for r in records}
        return [found[i] for i in checked if i in found]

    def _kept_vectors(self, asked: Sequence[str]) -> list[Hit]:
        """Hits holding only their vectors (read-only arrays), in the order asked: the kept
        ones from the field cache, the others read in one call, turned into arrays in one
        conversion (one per vector was most of the read for a search's 20 vectors) and kept.
        Filled under the engine gate, as the fields are: what is kept is what the engine holds."""
        with self._engine("retrieve"):
            dense, missing = self.field_cache.get_vectors(asked)
            records: list[Any] = self.shard.retrieve(
                list[Any](missing), with_payload=False, with_vector=[DENSE]) if missing else []
            ids = [str(r.id) for r in records]
            rows = [(r.vector or {}).get(DENSE) for r in records]
            have = [i for i, row in enumerate(rows) if row is not None]
            # one pass over the floats: ``np.asarray`` of a list of lists checks each row's
            # shape and converts element by element (0.29 ms for a search's 20 vectors, in
            # place after a query; this 0.17 ms); the cast to float32 rounds the same way
            floats = chain.from_iterable(cast(list[float], rows[i]) for i in have)
            matrix = np.fromiter(floats, dtype=np.float32,
                                 count=len(have) * self.dim).reshape(len(have), self.dim)
            for k, i in enumerate(have):
                row = matrix[k].copy()  # a row of its own: a kept view would hold the matrix
                self.field_cache.put_vector(ids[i], row)
                dense[ids[i]] = row
        # a point without a dense vector is found, with none
        found: dict[str, np.ndarray | None] = {pid: None for pid in ids}
        found.update(dense)
        return [Hit(id=pid, score=0.0, payload={}, dense=found[pid]) for pid in asked
                if pid in found]

    def _query(self, request: qe.QueryRequest, op: str, with_vectors: bool = False,
               fields: Sequence[str] | None = None) -> list[Hit]:
        with self._engine(op):
            points = self.shard.query(request)
        return [self._hit(p, with_vectors, fields) for p in points]

    def _kept_fields(self, key: tuple[str, ...], pids: Sequence[str]
                     ) -> dict[str, dict[str, Any]]:
        """The ``key`` fields of ``pids`` from the field cache, the points not kept read in one
        call and kept. Called under the engine gate, with the query that ranked ``pids``: no
        write lands between them, so what the cache receives is what the engine holds (writes
        forget their points under the same gate)."""
        kept, missing = self.field_cache.get(key, pids)
        if missing:
            for r in self.shard.retrieve(list[Any](missing), with_payload=c.payload_fields(key),
                                         with_vector=False):
                read = dict(r.payload or {})
                self.field_cache.put(key, str(r.id), read)
                kept[str(r.id)] = read
        return kept

    def keep_fields(self, fields: Sequence[str], limit: int) -> bool:
        """Keep the ``fields`` of up to ``limit`` points in RAM, read by a background thread
        now and again after every index build (``amem.backends._edge_table``); the searches
        asking for these fields then read only points written since. True; a second call
        changes nothing; ``limit`` 0 keeps nothing (False): a running fill stops and what it
        kept is dropped (memory back, searches read the engine again)."""
        key = tuple(cast(list[str], c.payload_fields(fields)))  # checked; a list, never None
        if limit < 1:
            filler, self._filler = self._filler, None
            if filler is not None:
                filler.stop()
                with self._gate:
                    self.field_cache.clear()
                    self.field_cache.capacity = FIELD_CAPACITY
            return False
        if self._filler is not None:
            return True
        self.field_cache.capacity = max(self.field_cache.capacity, limit + FIELD_CAPACITY)
        ref = weakref.ref(self)  # the thread must not keep a dropped store open

        def read(offset: str | None, n: int) -> tuple[int, str | None] | None:
            backend = ref()
            return None if backend is None else backend._fill_page(key, offset, n)

        segments = self._segments_dir

        def warm(cancelled: Callable[[], bool]) -> int:  # the path only: no reference to self
            return _edge_build.read_ahead(segments, cancelled=cancelled)

        self._filler = Filler(read, limit, warm=warm)
        self._filler.start()
        return True

    def field_table(self, wait: float = 0.0) -> dict[str, Any] | None:
        """The ranking table's fill (``amem.backends._edge_table.FillState`` as a dict),
        after waiting up to ``wait`` seconds for a pass in progress; None if not kept."""
        if self._filler is None:
            return None
        if wait > 0:
            self._filler.wait(wait)
        return asdict(self._filler.state)

    def _fill_page(self, key: tuple[str, ...], offset: str | None, limit: int
                   ) -> tuple[int, str | None]:
        """Read one page of ``key`` fields into the field cache, under the engine gate (so
        a write lands before or after it, and forgets what it changes either way)."""
        request = qe.ScrollRequest(offset=offset, limit=limit, with_payload=list(key),
                                   with_vector=False)
        with self._engine("fill the ranking table"):
            records, nxt = self.shard.scroll(request)
            for r in records:
                self.field_cache.put(key, str(r.id), r.payload or {})
        return len(records), None if nxt is None else str(nxt)

    def _kept_hit(self, pid: str, score: float, kept: dict[str, dict[str, Any]],
                  key: tuple[str, ...]) -> Hit:
        """A ranked point as a hit whose payload is its kept ``key`` fields (a copy: a point
        both legs ranked is one entry of ``kept``), the held retrieval counts laid over them."""
        payload = dict(kept.get(pid, {}))
        self._heat.show(pid, payload, key)
        return Hit(id=pid, score=score, payload=payload)

    def dense_search(
        self, vector: np.ndarray, where: Where | None, limit: int, *, with_vectors: bool = False,
        exact: bool = False, fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Nearest points by cosine, best first (``exact`` bypasses the HNSW index)."""
        selector = c.payload_fields(fields)
        key = None if isinstance(selector, bool) or with_vectors else tuple(selector)
        request = qe.QueryRequest(
            limit=c.check_limit(limit),
            query=qe.Query.Nearest(c.dense_list(vector, self.dim, "vector"), using=DENSE),
            filter=to_edge(where),
            # named fields come from the field cache: the query returns ids and scores only
            with_payload=False if key is not None else selector,
            with_vector=[DENSE] if with_vectors else False,
            params=EXACT_PARAMS if exact else DENSE_PARAMS,
        )
        if key is None:
            return self._query(request, "dense search", with_vectors, fields)
        return self._query_kept(request, "dense search", key)

    def _query_kept(self, request: qe.QueryRequest, op: str, key: tuple[str, ...]) -> list[Hit]:
        """A query asked for ids and scores only, its hits' ``key`` fields from the field
        cache (read under the query's gate, as ``_kept_fields`` needs)."""
        with self._engine(op):
            points = self.shard.query(request)
            ranked = list(zip(_text_ids(points), (float(p.score) for p in points)))
            kept = self._kept_fields(key, [pid for pid, _ in ranked])
        return [self._kept_hit(pid, score, kept, key) for pid, score in ranked]

    def search_legs(self, dense: np.ndarray, sparse: SparseVector | None, where: Where | None,
                    limit: int, *, fields: Sequence[str] | None = None,
                    sparse_hits: Sequence[Hit] | None = None) -> Legs:
        """Both rankings in one ``query_batch`` (the engine plans the queries together), then
        the cosines of the BM25 hits the dense ranking lacks in one exact query over their
        ids: each from the float vector the engine holds.

        The cosines once came from a third request in the batch, the sparse query again as a
        prefetch rescored by the dense vector: the engine ran the sparse query twice, which at
        100k notes cost 0.7 ms of a 2.0 ms batch; the query over ids costs ~0.08 ms at any
        size (measured, optimized stores, 10k and 100k notes). A BM25 hit the dense ranking
        holds takes the cosine that ranking gave it, the same float.

        With ``fields`` the queries return ids and scores only and the named keys come from
        the field cache (``amem.backends._edge_fields``), the points not kept in one read:
        loading each candidate's payload cost the legs more than their search.

        ``sparse_hits``: the BM25 ranking already read (``sparse_search`` with the same
        ``where``, ``limit`` and ``fields``, while the query was embedded); only the dense
        query runs, with the exact query for these hits' cosines in the same batch (their
        ids are known before it; ``sparse`` must then be None).
        """
        limit = c.check_limit(limit)
        if sparse_hits is not None and sparse is not None:
            raise ValidationError("search_legs takes a sparse vector or the sparse hits, "
                                  "not both", field="sparse")
        flt = to_edge(where)
        selector = c.payload_fields(fields)  # checks them
        key = None if isinstance(selector, bool) else tuple(selector)
        with_payload = key is None
        nearest = qe.Query.Nearest(c.dense_list(dense, self.dim, "dense"), using=DENSE)
        # DENSE_PARAMS on the dense ranking: its cosines are the float vectors', not the int8
        # copies' estimates an optimized segment would give
        requests = [qe.QueryRequest(limit=limit, query=nearest, filter=flt,
                                    with_payload=with_payload, params=DENSE_PARAMS)]
        idx, val = c.sparse_lists(sparse, "sparse") if sparse is not None else ([], [])
        if idx:
            terms = qe.Query.Nearest(qe.SparseVector(idx, val), using=SPARSE)
            requests.append(qe.QueryRequest(limit=limit, query=terms, filter=flt,
                                            with_payload=with_payload, params=self._idf))
        # the given hits that carry their vectors are scored here (c.carried_cosines); the
        # others' ids are known: their cosines come in the same batch (-0.1 ms)
        given = [h.id for h in sparse_hits if h.dense is None] if sparse_hits is not None else []
        if given:
            requests.append(self._cosines_of(nearest, given))
        # One gate for the queries and the reads after them: no write lands between them, so
        # what the cache receives is what the engine holds (writes forget their points under
        # it), and the cosines are those of the points just ranked.
        with self._engine("search legs"):
            answers = self.shard.query_batch(qe.QueryBatchRequest(requests))
            scored = answers.pop() if given else []
            ranked = [list(zip(_text_ids(hits) if key is not None else [str(p.id) for p in hits],
                               hits)) for hits in answers]
            # a BM25 hit the dense ranking holds keeps the cosine that ranking gave it
            cosines = {pid: float(p.score) for pid, p in ranked[0]}
            if sparse_hits is not None:
                c.carried_cosines(dense, sparse_hits, cosines)
            bm25_ids = ([h.id for h in sparse_hits] if sparse_hits is not None
                        else [pid for pid, _ in ranked[1]] if idx else [])
            alone = [pid for pid in bm25_ids if pid not in cosines]
            if alone and not given:
                scored = self.shard.query(self._cosines_of(nearest, alone))
            for pid, cos in zip(_text_ids(scored), (float(p.score) for p in scored)):
                cosines.setdefault(pid, cos)
            kept: dict[str, dict[str, Any]] = {}
            if key is not None:
                kept = self._kept_fields(
                    key, list(dict.fromkeys(pid for hits in ranked for pid, _ in hits)))

        def hit(pid: str, p: Any) -> Hit:
            if key is None:
                return self._hit(p, False)
            return self._kept_hit(pid, float(p.score), kept, key)

        dense_hits = [hit(pid, p) for pid, p in ranked[0]]
        bm25_hits = (list(sparse_hits) if sparse_hits is not None
                     else [hit(pid, p) for pid, p in ranked[1]] if idx else [])
        return Legs(sparse=bm25_hits, dense=dense_hits,
                    sparse_cosines={pid: cosines[pid] for pid in bm25_ids if pid in cosines})

    @staticmethod
    def _cosines_of(nearest: Any, ids: Sequence[str]) -> qe.QueryRequest:
        """The exact query for the cosines of the points ``ids`` (from their float vectors)."""
        return qe.QueryRequest(limit=len(ids), query=nearest, with_payload=False,
                               params=EXACT_PARAMS,
                               filter=qe.Filter(must=[qe.HasIdCondition(set(ids))]))

    def sparse_search(self, vector: SparseVector, where: Where | None, limit: int, *,
                      fields: Sequence[str] | None = None, with_vectors: bool = False
                      ) -> list[Hit]:
        """Points sharing a term with ``vector``, by IDF-weighted dot product.

        ``with_vectors`` with ``fields``: the vectors come from the field cache, the others
        read in one call after the query and kept (``_kept_vectors``), where a search's
        next reads of them (the legs' cosines, MMR's head) find them."""
        idx, val = c.sparse_lists(vector, "vector")
        limit = c.check_limit(limit)
        flt = to_edge(where)
        selector = c.payload_fields(fields)
        if not idx:
            return []
        key = None if isinstance(selector, bool) else tuple(selector)
        request = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(qe.SparseVector(idx, val), using=SPARSE),
            # named fields come from the field cache, as for the dense search
            filter=flt, with_payload=selector if key is None else False, params=self._idf,
            with_vector=[DENSE] if with_vectors and key is None else False,
        )
        if key is None:
            return self._query(request, "sparse search", with_vectors, fields)
        hits = self._query_kept(request, "sparse search", key)
        if with_vectors and hits:
            vectors = {h.id: h.dense for h in self._kept_vectors([h.id for h in hits])}
            hits = [replace(h, dense=vectors.get(h.id)) for h in hits]
        return hits

    def hybrid_rrf(
        self, dense: np.ndarray, sparse: SparseVector, where: Where | None, limit: int,
        prefetch: int, k: int = 60, *, weights: tuple[float, float] | None = None,
    ) -> list[Hit]:
        """The engine's RRF of a dense and a sparse prefetch; scores are sum 1/(k + rank), rank from 1.

        ``weights=(dense, sparse)`` asks for Qdrant's weighted RRF, which divides the rank:
        each list adds 1/(k + rank / weight), so weight 2 makes rank 2 count like rank 1.
        """
        flt = to_edge(where)
        prefetch = c.check_limit(prefetch, "prefetch")
        stages = [qe.Prefetch(
            limit=prefetch, query=qe.Query.Nearest(c.dense_list(dense, self.dim), using=DENSE), filter=flt,
            params=DENSE_PARAMS,
        )]
        idx, val = c.sparse_lists(sparse)
        fusion_weights = c.rrf_weights(weights, bool(idx))
        if idx:  # a query without terms has no sparse ranking, only the dense one
            stages.append(qe.Prefetch(
                limit=prefetch, query=qe.Query.Nearest(qe.SparseVector(idx, val), using=SPARSE), filter=flt,
                params=self._idf,
            ))
        request = qe.QueryRequest(
            # the stubs do not declare Fusion.Rrf a Fusion; the engine accepts it
            limit=c.check_limit(limit), prefetches=stages, query=cast(Any, qe.Fusion.Rrf(k=c.engine_rrf_k(k), weights=fusion_weights)),
            filter=flt, with_payload=True,
        )
        return _ties_by_id(self._query(request, "hybrid query"))

    def scroll(
        self, where: Where | None, *, limit: int = 256, offset: str | None = None,
        with_vectors: bool = False, fields: Sequence[str] | None = None,
    ) -> tuple[list[Hit], str | None]:
        """One page in id order and the id that starts the next page (None at the end)."""
        request = qe.ScrollRequest(
            offset=None if offset is None else c.check_id(offset, "offset"),
            limit=c.check_limit(limit), filter=to_edge(where),
            with_payload=c.payload_fields(fields),
            with_vector=[DENSE] if with_vectors else False,
        )
        with self._engine("scroll"):
            records, nxt = self.shard.scroll(request)
        return ([self._hit(r, with_vectors, fields) for r in records],
                None if nxt is None else str(nxt))

    def times(self, where: Where | None, field: str, limit: int, *,
              start: float | None = None) -> list[tuple[str, float]]:
        """Matching points and their ``field`` values, by the field's index (no payload read),
        read from ``start`` on (a neighbour window at 100k notes: 0.41 -> 0.23-0.30 ms)."""
        request = qe.ScrollRequest(
            limit=c.check_limit(limit), filter=to_edge(where), with_payload=False,
            with_vector=False, order_by=qe.OrderBy(key=field, direction=qe.Direction.Asc,
                                                   start_from=c.check_start(start)),
        )
        with self._engine("times"):
            records, _ = self.shard.scroll(request)
        values = [r.order_value for r in records]  # each access converts: read once
        timed = [(r, float(v)) for r, v in zip(records, values) if v is not None]
        return list(zip(_text_ids([r for r, _ in timed]), (v for _, v in timed)))

    def iterate(self, where: Where | None = None, *, with_vectors: bool = False,
                batch: int = 256) -> Iterator[Hit]:
        """Every matching point, page by page."""
        return c.iterate_pages(self.scroll, where, with_vectors=with_vectors, batch=batch)

    def count(self, where: Where | None = None) -> int:
        """The exact number of matching points.

        Without a filter the engine's own tally answers (``exact=False``): with no condition
        to estimate it is each segment's live points, deletions and points moved between
        segments accounted (a test holds it to the exact count through deletes, moved points,
        re-upserts and builds). The exact count reads every point id: 5 ms at 100k points,
        asked by the index build's growth trigger on every single add of a served store."""
        exact = where is not None
        with self._engine("count"):
            return int(self.shard.count(qe.CountRequest(exact=exact, filter=to_edge(where))))

    # -- meta and lifecycle ------------------------------------------------------------------

    def read_meta(self) -> dict[str, Any]:
        """The contents of ``meta.json`` ({} for a new store).

        Raises:
            BackendError: the file is empty or damaged while the store holds points: what
                happened and what to do (``unrecorded_message``)."""
        try:
            return read_object(self.path / META_FILE)
        except BackendError as exc:
            why = self._unrecorded() or str(exc)
            raise BackendError(unrecorded_message(self.path, why, self.count())) from exc

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Replace ``meta.json`` atomically: a reader sees the old file or the new one, never half."""
        write_object(self.path / META_FILE, meta)

    def optimize(self, *, in_process: bool = False) -> None:
        """Build HNSW and merge segments: maintenance only, never on a request.

        qdrant-edge 0.9.0 holds the GIL for the whole run, so in this process every Python
        thread would stop with it (measured: 17 s at 10k 384-d points on a busy 2-core
        machine, minutes at 100k). By default the shard is therefore closed, optimized by a
        child process and reopened; our lock stays held throughout, other threads keep
        running, and their calls on this store wait for the reopen. ``in_process=True``
        optimizes here instead (for a process with nothing else to do).

        The engine evicts the files of every segment it builds from the page cache as the
        build ends (0 bytes resident right after it, ``fincore``), so the first searches after
        it read every candidate's payload and vector from disk (10k notes: 29 major page
        faults a search, full / floor 1.70x against 1.47x warm). The segments are read back
        once after the build, outside the engine gate (searches run meanwhile), as the build
        on a copy does before its swap (``_edge_build.read_ahead``): 0.15 s at 10k.
        """
        started = time.perf_counter()
        self.write_heat()  # into the segments the build merges, not moved out after it
        with self._engine("optimize"):
            self._generation += 1  # the same points, in new segments: nothing kept survives
            self.field_cache.clear()
            moved = self.moved.checkpoint()  # no write runs beside it: the gate is held
            if in_process:
                outcome = "changed" if self.shard.optimize() else "optimal"
            else:
                outcome = self._optimize_in_child()
            self.moved.settle(moved)
        built = time.perf_counter()
        try:
            warmed = _edge_build.read_ahead(self._segments_dir)
        except OSError as exc:  # the build is done; only the first searches' speed is at stake
            log.warning("optimized %s, but its new segments could not be read back into the "
                        "page cache (the first searches read them from disk): %s", self.path, exc)
            warmed = 0
        # after the read-back, as the build on a copy swaps only after its own: the new pass
        # then scrolls pages already in the cache instead of faulting them in beside it
        if self._filler is not None:  # the cache was cleared: read the new segments' fields
            self._filler.restart()
        log.info("optimized %s in %.1f s (%s; %d MB read back into the page cache in %.2f s)",
                 self.path, built - started, outcome, warmed >> 20, time.perf_counter() - built)

    @property
    def _segments_dir(self) -> Path:
        """The engine's segment files, what ``_edge_build.read_ahead`` reads back."""
        return self.path / SHARD_DIR / "segments"

    def _optimize_in_child(self) -> str:
        shard_dir = str(self.path / SHARD_DIR)
        shard = self.shard
        shard.flush()
        shard.close()  # frees the engine's WAL lock for the child; our LOCK stays held
        self._handle.shard = None
        try:
            child = subprocess.run(child_argv(_OPTIMIZE_CHILD, shard_dir), capture_output=True,
                                   text=True, env=_edge_build.child_env())
        finally:
            self._handle.shard = qe.EdgeShard.load(shard_dir)
        if child.returncode != 0:
            tail = child.stderr.strip().splitlines()[-3:]
            raise BackendError(f"optimizing {self.path} in a child process failed: {' | '.join(tail)}")
        return child.stdout.strip()

    def optimize_on_copy(self) -> str:
        """Build the index on a copy while this store serves (``amem.backends._edge_build``):
        calls wait only for the copy and the swap; the child applies the writes made meanwhile."""
        self.write_heat()
        # before the copy: a point written between the two stays marked (counted early)
        moved = self.moved.checkpoint()
        try:
            outcome = _edge_build.build_on_copy(self, SHARD_DIR)
            self.moved.settle(moved)
            return outcome
        finally:
            with self._gate:  # the shard swapped for the build: nothing kept survives
                self._generation += 1
                self.field_cache.clear()
            if self._filler is not None:
                self._filler.restart()

    def flush(self) -> None:
        """Write every acknowledged change to the segments (the WAL already has them), the
        retrieval counts held in memory first."""
        self.write_heat()
        with self._engine("flush"):
            self.shard.flush()
        self._make_private()

    def _make_private(self) -> None:
        """Take others' access off the engine's files (0600 / 0700).

        The engine creates its segment and WAL files itself, with the process umask; we cannot
        hand it a mode. A store directory created by us is 0700 from its creation, so nobody
        else can reach them meanwhile; this walk (at open, flush and close) makes the files the
        engine created since this open private too. What was wide before the open keeps its
        mode: changing a store's permissions is ``amem doctor --fix``'s decision, not an open's.
        """
        try:
            fixed = fix_modes(self.path, keep=self._wide_before)
        except OSError as exc:  # a store that cannot be chmod-ed still works; doctor reports it
            log.warning("could not make the files of %s private: %s", self.path, exc)
            return
        if fixed:
            log.debug("made %d engine files of %s private", len(fixed), self.path)

    def close(self) -> None:
        """Flush, close the shard, release the lock; a temporary store is deleted. Idempotent."""
        self._finalizer.detach()
        child = self.build_child
        if child is not None:  # an index build on a copy: dropped, the live shard is complete
            child.kill()
        if self._filler is not None:  # before the shard closes under it
            self._filler.stop()
        try:
            if self._handle.shard is not None:
                try:
                    self.write_heat()
                except AmemError as exc:  # a ranking hint never keeps the store from closing
                    log.warning("heat: retrieval counts not written at close: %s", exc)
            temporary = self._tmp is not None  # deleted below: nothing to make durable
            with self._engine("close"):
                shard, self._handle.shard = self._handle.shard, None
                if shard is not None:
                    if not temporary:
                        shard.flush()
                    shard.close()
            if not temporary:
                self._make_private()
        finally:
            self._lock.release()
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = self._handle.tmp = None

    def __enter__(self) -> EdgeBackend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle.shard is None else f"{self.dim}-d"
        return f"EdgeBackend({str(self.path)!r}, {state})"
