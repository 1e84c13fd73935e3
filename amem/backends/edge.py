"""The embedded default backend: the Qdrant engine in-process through ``qdrant-edge-py``.

Layout of a store directory::

    <path>/LOCK        our process lock (flock; holds the owner's pid)
    <path>/meta.json   store metadata, replaced atomically
    <path>/shard/      the EdgeShard: segments + WAL (the engine also locks its WAL)

Before ``optimize()`` every segment is a plain (brute-force, exact) segment; ``optimize()``
builds HNSW and can block for minutes on a large store, so it belongs to maintenance.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Iterable, Iterator, Sequence, cast

import numpy as np
import qdrant_edge as qe

from amem.backends import _common as c
from amem.backends import _edge_build
from amem.backends._common import ties_by_id as _ties_by_id
from amem.backends._filters import to_edge
from amem.backends._jsonfile import read_object, write_object
from amem.backends._lock import StoreLock, locked_message
from amem.backends.base import (
    BOOL_INDEXES, DENSE, FLOAT_INDEXES, KEYWORD_INDEXES, ON_DISK_INDEXES, SPARSE, Hit, Point, SparseVector, Where,
)
from amem.errors import (
    AmemError, BackendError, ConfigError, EmbedderMismatchError, NotFoundError, StoreLockedError,
    ValidationError,
)

log = logging.getLogger(__name__)

SHARD_DIR = "shard"
META_FILE = "meta.json"


# Run by optimize() in a child process: the engine holds the GIL while it optimizes, so doing
# it here would stop every thread of this process for the whole run.
_OPTIMIZE_CHILD = """
import sys
import qdrant_edge
shard = qdrant_edge.EdgeShard.load(sys.argv[1])
changed = shard.optimize()
shard.close()
print("changed" if changed else "optimal")
"""


class _Handle:
    """The open shard and our lock, shared with the finalizer (which must not hold the backend)."""

    def __init__(self, lock: StoreLock) -> None:
        self.shard: qe.EdgeShard | None = None
        self.lock = lock


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


class EdgeBackend:
    """A :class:`~amem.backends.base.VectorBackend` on an EdgeShard in ``<path>/shard``.

    Args:
        path: The store directory (created if missing). Not ``":memory:"``: use
            :meth:`temporary` for a throwaway store.
        dim: The dense vector size. Required to create a store; when opening an existing
            store it may be None (read from the shard) or must equal the stored size.

    Raises:
        StoreLockedError: another process (or another handle in this one) owns the store.
        EmbedderMismatchError: ``dim`` differs from the store's.
        ConfigError: a new store without ``dim``, or a bad ``path``/``dim``.
    """

    def __init__(self, path: str | Path, dim: int | None = None) -> None:
        if str(path) == ":memory:":
            raise ConfigError(
                "':memory:' is not a directory for the edge backend; use EdgeBackend.temporary(dim)",
                key="path",
            )
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ConfigError(f"dim must be a positive integer, got {dim!r}", key="dim")
        self.path = Path(path).expanduser().resolve()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the store directory {self.path}: {exc}", key="path") from exc
        self._lock = StoreLock(self.path)
        self._lock.acquire()
        # qdrant-edge 0.9.0 keeps hard-deleted points in its IDF statistics until the shard is
        # reopened (replacing a point is fine). After a delete, sparse queries therefore ask for
        # IDF over the live points (an empty corpus filter): a little slower, always right.
        self._idf: qe.SearchParams | None = None
        # Every engine call holds the gate, so optimize() can swap the shard under the others.
        self._gate = threading.RLock()
        #: ids of the points changed while an index build works on a copy (None: no build);
        #: the build replays them onto the copy when it swaps it in
        self.touched: set[str] | None = None
        #: the child process of a running ``optimize_on_copy`` (killed by ``close``)
        self.build_child: subprocess.Popen[str] | None = None
        self._handle = _Handle(self._lock)
        try:
            self._handle.shard, self.dim = self._open(dim)
        except BaseException:
            self._lock.release()
            raise
        # A backend dropped without close() (or alive at interpreter exit) still flushes, closes
        # the shard and frees the directory for the next opener.
        self._finalizer = weakref.finalize(self, _abandon, self._handle)

    @classmethod
    def temporary(cls, dim: int) -> EdgeBackend:
        """A store in a fresh temporary directory, deleted on :meth:`close`."""
        tmp = tempfile.TemporaryDirectory(prefix="amem-edge-")
        try:
            backend = cls(tmp.name, dim)
        except BaseException:
            tmp.cleanup()
            raise
        backend._tmp = tmp
        return backend

    # -- opening -----------------------------------------------------------------------------

    def _open(self, dim: int | None) -> tuple[qe.EdgeShard, int]:
        _edge_build.recover(self.path, SHARD_DIR)
        shard_dir = self.path / SHARD_DIR
        config_file = shard_dir / "edge_config.json"
        if config_file.exists():
            stored = self._stored_dim(config_file)
            if dim is not None and dim != stored:
                raise EmbedderMismatchError(
                    f"the store at {self.path} holds {stored}-d vectors, the embedder gives {dim}-d; "
                    "open it with its own embedder or rebuild the vectors (amem reembed)",
                    stored=f"dim={stored}", given=f"dim={dim}",
                )
            with self._engine("load"):
                shard = qe.EdgeShard.load(str(shard_dir))
            log.info("opened edge store %s (%d-d)", self.path, stored)
            dim = stored
        else:
            if dim is None:
                raise ConfigError(f"creating a new store at {self.path} needs dim", key="dim")
            config = qe.EdgeConfig(
                vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
                sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
                wal_enabled=True,
            )
            with self._engine("create"):
                shard = qe.EdgeShard.create(str(shard_dir), config)
            log.info("created edge store %s (%d-d)", self.path, dim)
        try:
            self._ensure_indexes(shard)
        except BaseException:
            shard.close()
            raise
        return shard, dim

    def _stored_dim(self, config_file: Path) -> int:
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
            dense = config["vectors"][DENSE]
            sparse = config["sparse_vectors"][SPARSE]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BackendError(
                f"{config_file} is not an amem edge store (expected vectors {DENSE!r} and {SPARSE!r}): {exc}"
            ) from exc
        if str(dense.get("distance", "")).lower() != "cosine" or str(sparse.get("modifier", "")).lower() != "idf":
            raise BackendError(f"{config_file}: {DENSE!r} must be cosine and {SPARSE!r} must use IDF")
        return int(dense["size"])

    def _ensure_indexes(self, shard: qe.EdgeShard) -> None:
        # Indexes live in the segments and survive a reload; only missing ones are created.
        existing = set(shard.info().payload_schema)
        wanted: list[tuple[str, Any]] = [
            (name, qe.KeywordIndexParams(is_tenant=name == "agent_id",
                                         on_disk=name in ON_DISK_INDEXES or None))
            for name in KEYWORD_INDEXES
        ]
        wanted += [(name, qe.BoolIndexParams(on_disk=True) if name in ON_DISK_INDEXES
                    else qe.PayloadSchemaType.Bool) for name in BOOL_INDEXES]
        wanted += [(name, qe.PayloadSchemaType.Float) for name in FLOAT_INDEXES]
        for name, schema in wanted:
            if name not in existing:
                with self._engine(f"create index {name}"):
                    shard.update(qe.UpdateOperation.create_field_index(name, schema))

    @contextmanager
    def _engine(self, op: str) -> Iterator[None]:
        """Turn the engine's untyped exceptions into our error tree."""
        try:
            with self._gate:
                yield
        except AmemError:
            raise
        except Exception as exc:  # the binding raises plain Exception for engine errors
            text = str(exc)
            if "WouldBlock" in text:  # another opener without our lock holds the WAL
                raise StoreLockedError(locked_message(self.path, None), path=str(self.path)) from exc
            raise BackendError(f"qdrant-edge {op} failed on {self.path}: {text}") from exc

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
        batch, pids = [], []
        for point in points:
            pid, dense, (idx, val), payload = c.check_point(point, self.dim)
            batch.append(qe.Point(pid, {DENSE: dense, SPARSE: qe.SparseVector(idx, val)}, payload))
            pids.append(pid)
        if batch:
            with self._engine("upsert"):
                self.shard.update(qe.UpdateOperation.upsert_points(batch))
                self._touch(pids)

    def set_payload(self, point_id: str, payload: dict[str, Any]) -> None:
        """Merge ``payload`` into one point's payload; :class:`NotFoundError` if it is missing."""
        pid = c.check_id(point_id)
        if not isinstance(payload, dict):
            raise ValidationError("payload must be a dict", field="payload")
        try:
            with self._engine("set_payload"):
                self._touch([pid])
                self.shard.update(qe.UpdateOperation.set_payload([pid], payload))
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
        if SPARSE in vectors:
            idx, val = vectors[SPARSE]
            vectors[SPARSE] = qe.SparseVector(idx, val)
        flt = to_edge(c.point_where(pid, where))
        assert flt is not None  # a Where with a condition always translates to a filter
        # The gate makes the check and the writes one step for every thread of this process.
        with self._engine("update point"):
            if not self.shard.count(qe.CountRequest(exact=True, filter=flt)):
                return False
            self._touch([pid])
            if payload:
                self.shard.update(qe.UpdateOperation.set_payload_by_filter(flt, payload))
            if vectors:
                self.shard.update(qe.UpdateOperation.update_vectors([qe.PointVectors(pid, vectors)]))
        return True

    def delete(self, ids: Sequence[str]) -> None:
        """Hard-delete points; unknown ids are ignored."""
        checked = c.check_ids(ids)
        if checked:
            with self._engine("delete"):
                self._touch(checked)
                self.shard.update(qe.UpdateOperation.delete_points(list[Any](checked)))
            if self._idf is None:
                log.debug("hard delete in %s: IDF now counted over live points until reopen", self.path)
                self._idf = qe.SearchParams(idf=qe.IdfParams(corpus=qe.Filter()))

    def _touch(self, ids: Iterable[str]) -> None:
        if self.touched is not None:
            self.touched.update(ids)

    # -- reads -------------------------------------------------------------------------------

    @staticmethod
    def _hit(p: Any, with_vectors: bool) -> Hit:
        score = float(getattr(p, "score", 0.0))
        dense = c.as_array((p.vector or {}).get(DENSE)) if with_vectors else None
        return Hit(id=str(p.id), score=score, payload=dict(p.payload or {}), dense=dense)

    def retrieve(self, ids: Sequence[str], *, with_vectors: bool = False,
                 with_payload: bool = True) -> list[Hit]:
        """The existing points among ``ids``, in the order asked."""
        checked = c.check_ids(ids)
        if not checked:
            return []
        with self._engine("retrieve"):
            records = self.shard.retrieve(list[Any](checked), with_payload=bool(with_payload),
                                          with_vector=[DENSE] if with_vectors else False)
        found = {str(r.id): self._hit(r, with_vectors) for r in records}
        return [found[i] for i in checked if i in found]

    def _query(self, request: qe.QueryRequest, op: str, with_vectors: bool = False) -> list[Hit]:
        with self._engine(op):
            points = self.shard.query(request)
        return [self._hit(p, with_vectors) for p in points]

    def dense_search(
        self, vector: np.ndarray, where: Where | None, limit: int, *, with_vectors: bool = False,
        exact: bool = False, fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Nearest points by cosine, best first (``exact`` bypasses the HNSW index)."""
        request = qe.QueryRequest(
            limit=c.check_limit(limit),
            query=qe.Query.Nearest(c.dense_list(vector, self.dim, "vector"), using=DENSE),
            filter=to_edge(where),
            with_payload=c.payload_fields(fields),
            with_vector=[DENSE] if with_vectors else False,
            params=qe.SearchParams(exact=True) if exact else None,
        )
        return self._query(request, "dense search", with_vectors)

    def sparse_search(self, vector: SparseVector, where: Where | None, limit: int, *,
                      fields: Sequence[str] | None = None) -> list[Hit]:
        """Points sharing a term with ``vector``, by IDF-weighted dot product."""
        idx, val = c.sparse_lists(vector, "vector")
        limit = c.check_limit(limit)
        flt = to_edge(where)
        selector = c.payload_fields(fields)
        if not idx:
            return []
        request = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(qe.SparseVector(idx, val), using=SPARSE),
            filter=flt, with_payload=selector, params=self._idf,
        )
        return self._query(request, "sparse search")

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
        return [self._hit(r, with_vectors) for r in records], None if nxt is None else str(nxt)

    def iterate(self, where: Where | None = None, *, with_vectors: bool = False,
                batch: int = 256) -> Iterator[Hit]:
        """Every matching point, page by page."""
        return c.iterate_pages(self.scroll, where, with_vectors=with_vectors, batch=batch)

    def count(self, where: Where | None = None) -> int:
        """The exact number of matching points."""
        with self._engine("count"):
            return int(self.shard.count(qe.CountRequest(exact=True, filter=to_edge(where))))

    # -- meta and lifecycle ------------------------------------------------------------------

    def read_meta(self) -> dict[str, Any]:
        """The contents of ``meta.json`` ({} for a new store)."""
        return read_object(self.path / META_FILE)

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
        """
        started = time.perf_counter()
        with self._engine("optimize"):
            if in_process:
                outcome = "changed" if self.shard.optimize() else "optimal"
            else:
                outcome = self._optimize_in_child()
        log.info("optimized %s in %.1f s (%s)", self.path, time.perf_counter() - started, outcome)

    def _optimize_in_child(self) -> str:
        shard_dir = str(self.path / SHARD_DIR)
        shard = self.shard
        shard.flush()
        shard.close()  # frees the engine's WAL lock for the child; our LOCK stays held
        self._handle.shard = None
        try:
            child = subprocess.run(
                [sys.executable, "-c", _OPTIMIZE_CHILD, shard_dir], capture_output=True, text=True,
            )
        finally:
            self._handle.shard = qe.EdgeShard.load(shard_dir)
        if child.returncode != 0:
            tail = child.stderr.strip().splitlines()[-3:]
            raise BackendError(f"optimizing {self.path} in a child process failed: {' | '.join(tail)}")
        return child.stdout.strip()

    def optimize_on_copy(self) -> str:
        """Build the index on a copy while this store serves (``amem.backends._edge_build``):
        calls wait only for the copy and the swap; changes made meanwhile are replayed."""
        return _edge_build.build_on_copy(self, SHARD_DIR, _OPTIMIZE_CHILD)

    def flush(self) -> None:
        """Write every acknowledged change to the segments (the WAL already has them)."""
        with self._engine("flush"):
            self.shard.flush()

    def close(self) -> None:
        """Flush, close the shard, release the lock; a temporary store is deleted. Idempotent."""
        self._finalizer.detach()
        child = self.build_child
        if child is not None:  # an index build on a copy: dropped, the live shard is complete
            child.kill()
        try:
            with self._engine("close"):
                shard, self._handle.shard = self._handle.shard, None
                if shard is not None:
                    shard.flush()
                    shard.close()
        finally:
            self._lock.release()
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def __enter__(self) -> EdgeBackend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle.shard is None else f"{self.dim}-d"
        return f"EdgeBackend({str(self.path)!r}, {state})"
