"""The scale-out backend: a Qdrant server or cluster through ``qdrant-client``.

The same logical schema as the embedded engine: one collection with a named cosine vector
``dense`` and a named sparse vector ``bm25`` with the IDF modifier, keyword payload indexes
(``agent_id`` as the tenant key), and a sibling collection ``<collection>__meta`` holding the
store's metadata as the payload of one point. ``qdrant-client``'s local mode (``":memory:"``
or a directory) speaks the same API and is what the tests and small setups use.
"""

from __future__ import annotations

import gc
import logging
import warnings
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Iterator, Sequence

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

from amem.backends import _common as c
from amem.backends._common import ties_by_id as _ties_by_id
from amem.backends._filters import to_client
from amem.kernel.files import private_dir
from amem.backends.base import (
    BOOL_INDEXES, DENSE, FLOAT_INDEXES, KEYWORD_INDEXES, NOTHING_KNOWN, ON_DISK_INDEXES, SPARSE,
    Hit, Legs, Point, SparseVector, StoreFacts, Where,
)
from amem.errors import (
    AmemError, BackendError, ConfigError, EmbedderMismatchError, NotFoundError, StoreLockedError,
    ValidationError,
)

log = logging.getLogger(__name__)

META_SUFFIX = "__meta"
# The one point of the meta collection; any fixed UUID would do.
META_POINT_ID = "00000000-0000-0000-0000-00000000a3e7"


class QdrantServerBackend:
    """A :class:`~amem.backends.base.VectorBackend` on one collection of a Qdrant deployment.

    Args:
        client: A connected client (server URL or local mode). The caller keeps ownership
            unless ``owns_client`` is true, in which case :meth:`close` closes it.
        collection: The collection name; ``<collection>__meta`` holds the metadata.
        dim: The dense vector size. Required when the collection does not exist yet; when it
            does, None means "whatever it holds" and any other value must match.
        owns_client: Close ``client`` on :meth:`close` (set by :meth:`from_url` / :meth:`local`).
        location: Where the data lives (a URL or a directory), for error messages.
    """

    def __init__(
        self, client: QdrantClient, collection: str, dim: int | None = None, *, owns_client: bool = False,
        location: str | None = None,
    ) -> None:
        if not isinstance(collection, str) or not collection or collection.endswith(META_SUFFIX):
            raise ConfigError(f"collection must be a non-empty name not ending in {META_SUFFIX!r}", key="collection")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ConfigError(f"dim must be a positive integer, got {dim!r}", key="dim")
        self.client: QdrantClient | None = client
        self.collection = collection
        self.meta_collection = collection + META_SUFFIX
        self._owns_client = owns_client
        self.location = location or "Qdrant"  # for error messages: the URL or local directory
        self._is_local = self.location.startswith("local mode")
        try:
            self.dim = self._ensure_schema(dim)
        except BaseException:
            if owns_client:
                client.close()
            raise

    @classmethod
    def from_url(
        cls, url: str, api_key: str | None = None, collection: str = "amem", dim: int | None = None,
        *, timeout: int | None = None,
    ) -> QdrantServerBackend:
        """Connect to a Qdrant server or cluster at ``url``."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"Qdrant url must start with http:// or https://, got {url!r}", key="url")
        # The client's version check runs in a background thread and only warns; an unreachable
        # or incompatible server fails the first real call instead, as a BackendError naming
        # the URL. Hybrid RRF with an explicit k needs a server that accepts `rrf: {k}`
        # (Qdrant 1.16+, the release that introduced it in the clients).
        client = QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)
        return cls(client, collection, dim, owns_client=True, location=url)

    @classmethod
    def local(cls, location: str | Path = ":memory:", collection: str = "amem",
              dim: int | None = None) -> QdrantServerBackend:
        """qdrant-client's local mode: in memory (``":memory:"``) or persisted in a directory."""
        locked = False
        # A client refused by the lock leaves its lock file open and drops it when the error is
        # released; keep that ResourceWarning from surfacing as someone else's problem.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            try:
                if str(location) == ":memory:":
                    client = QdrantClient(location=":memory:")
                else:
                    # 0700 before the client writes in it: its files (made with the umask)
                    # are then out of others' reach (amem.kernel.files)
                    private_dir(Path(location).expanduser())
                    client = QdrantClient(path=str(location))
            except RuntimeError as exc:
                if "already accessed" not in str(exc):  # local mode locks its directory (portalocker)
                    raise
                locked = True
            if locked:
                gc.collect()
        if locked:
            raise StoreLockedError(
                f"the local Qdrant store at {location} is in use by another client or process; "
                "run `amem serve` there and connect through it, or use a Qdrant server "
                "(AMEM_QDRANT_URL) for shared access",
                path=str(location),
            )
        return cls(client, collection, dim, owns_client=True, location=f"local mode {location}")

    # -- schema ------------------------------------------------------------------------------

    def _ensure_schema(self, dim: int | None) -> int:
        client = self.live
        with self._engine("open collection"):
            exists = client.collection_exists(self.collection)
        if exists:
            dim = self._check_existing(dim)
            self._create_indexes(self._indexed())  # fields indexed by a later version
        else:
            if dim is None:
                raise ConfigError(f"creating collection {self.collection!r} needs dim", key="dim")
            with self._engine("create collection"):
                client.create_collection(
                    self.collection,
                    vectors_config={DENSE: qm.VectorParams(size=dim, distance=qm.Distance.COSINE)},
                    sparse_vectors_config={SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
                )
            self._create_indexes()
            log.info("created collection %s (%d-d)", self.collection, dim)
        with self._engine("open meta collection"):
            if not client.collection_exists(self.meta_collection):
                client.create_collection(self.meta_collection, vectors_config={})
        return dim

    def _check_existing(self, dim: int | None) -> int:
        with self._engine("read collection"):
            params = self.live.get_collection(self.collection).config.params
        vectors = params.vectors if isinstance(params.vectors, dict) else {}
        sparse = params.sparse_vectors or {}
        dense = vectors.get(DENSE)
        if dense is None or dense.distance != qm.Distance.COSINE or SPARSE not in sparse \
                or sparse[SPARSE].modifier != qm.Modifier.IDF:
            raise BackendError(
                f"collection {self.collection!r} is not an amem collection: it needs a cosine "
                f"vector {DENSE!r} and a sparse vector {SPARSE!r} with the IDF modifier"
            )
        if dim is not None and dim != dense.size:
            raise EmbedderMismatchError(
                f"collection {self.collection!r} holds {dense.size}-d vectors, the embedder gives "
                f"{dim}-d; use its own embedder or rebuild the vectors (amem reembed)",
                stored=f"dim={dense.size}", given=f"dim={dim}",
            )
        return int(dense.size)

    def _indexed(self) -> set[str]:
        with self._engine("read collection"):
            return set(self.live.get_collection(self.collection).payload_schema or {})

    def _create_indexes(self, existing: set[str] | None = None) -> None:
        wanted: list[tuple[str, Any]] = [
            (name, qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=name == "agent_id",
                                         on_disk=name in ON_DISK_INDEXES or None))
            for name in KEYWORD_INDEXES
        ]
        wanted += [(name, qm.BoolIndexParams(type=qm.BoolIndexType.BOOL, on_disk=True)
                    if name in ON_DISK_INDEXES else qm.PayloadSchemaType.BOOL) for name in BOOL_INDEXES]
        wanted += [(name, qm.PayloadSchemaType.FLOAT) for name in FLOAT_INDEXES]
        wanted = [(name, schema) for name, schema in wanted if name not in (existing or set())]
        with warnings.catch_warnings():
            # Local mode accepts and ignores payload indexes with a UserWarning; a server uses them.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
            for name, schema in wanted:
                with self._engine(f"create index {name}"):
                    self.live.create_payload_index(self.collection, name, field_schema=schema, wait=True)

    @contextmanager
    def _engine(self, op: str) -> Iterator[None]:
        """Turn client and transport exceptions into our error tree."""
        try:
            yield
        except AmemError:
            raise
        except Exception as exc:
            raise BackendError(
                f"Qdrant {op} failed ({self.location}, collection {self.collection!r}): {exc}"
            ) from exc

    @property
    def live(self) -> QdrantClient:
        """The client (raises once closed)."""
        if self.client is None:
            raise BackendError(f"the backend for collection {self.collection!r} is closed")
        return self.client

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, points: Sequence[Point]) -> None:
        """Insert or replace whole points (checked first: nothing is written on bad input)."""
        batch = []
        for point in points:
            pid, dense, (idx, val), payload = c.check_point(point, self.dim)
            vector: dict[str, Any] = {DENSE: dense, SPARSE: qm.SparseVector(indices=idx, values=val)}
            batch.append(qm.PointStruct(id=pid, vector=vector, payload=payload))
        if batch:
            with self._engine("upsert"):
                self.live.upsert(self.collection, batch, wait=True)

    def set_payload(self, point_id: str, payload: dict[str, Any]) -> None:
        """Merge ``payload`` into one point's payload; :class:`NotFoundError` if it is missing."""
        pid = c.check_id(point_id)
        if not isinstance(payload, dict):
            raise ValidationError("payload must be a dict", field="payload")
        try:
            self.live.set_payload(self.collection, payload, points=[pid], wait=True)
        except KeyError as exc:  # local mode
            raise NotFoundError(f"no point {pid} in collection {self.collection!r}", id=pid) from exc
        except UnexpectedResponse as exc:
            if exc.status_code == 404:
                raise NotFoundError(f"no point {pid} in collection {self.collection!r}", id=pid) from exc
            raise BackendError(f"Qdrant set_payload failed: {exc}") from exc
        except Exception as exc:
            raise BackendError(f"Qdrant set_payload failed: {exc}") from exc

    def update_point(
        self, point_id: str, payload: dict[str, Any], *, where: Where | None = None,
        dense: np.ndarray | None = None, sparse: SparseVector | None = None,
    ) -> bool:
        """Change named parts of one existing point matching ``where``; False if there is none.

        The payload goes through a filter selector, so the server applies it only if the point
        still matches; the vectors follow (update_vectors never creates a point).
        """
        pid, parts = c.check_update(point_id, payload, self.dim, dense, sparse)
        vectors: dict[str, Any] = {}
        if DENSE in parts:
            vectors[DENSE] = parts[DENSE]
        if SPARSE in parts:
            idx, val = parts[SPARSE]
            vectors[SPARSE] = qm.SparseVector(indices=idx, values=val)
        flt = to_client(c.point_where(pid, where))
        assert flt is not None  # a Where with a condition always translates to a filter
        with self._engine("update point"):
            if not self.live.count(self.collection, count_filter=flt, exact=True).count:
                return False
            if payload:
                self.live.set_payload(self.collection, payload, points=flt, wait=True)
            if vectors:
                self.live.update_vectors(self.collection, [qm.PointVectors(id=pid, vector=vectors)],
                                         wait=True)
        return True

    def delete(self, ids: Sequence[str]) -> None:
        """Hard-delete points; unknown ids are ignored."""
        checked = c.check_ids(ids)
        if checked:
            with self._engine("delete"):
                self.live.delete(self.collection, qm.PointIdsList(points=list(checked)), wait=True)

    # -- reads -------------------------------------------------------------------------------

    @staticmethod
    def _hit(p: Any, with_vectors: bool) -> Hit:
        vector = p.vector if isinstance(p.vector, dict) else {}
        dense = c.as_array(vector.get(DENSE)) if with_vectors else None
        return Hit(id=str(p.id), score=float(getattr(p, "score", 0.0)), payload=dict(p.payload or {}), dense=dense)

    def retrieve(self, ids: Sequence[str], *, with_vectors: bool = False,
                 with_payload: bool = True) -> list[Hit]:
        """The existing points among ``ids``, in the order asked."""
        checked = c.check_ids(ids)
        if not checked:
            return []
        with self._engine("retrieve"):
            records = self.live.retrieve(
                self.collection, list(checked), with_payload=bool(with_payload),
                with_vectors=[DENSE] if with_vectors else False,
            )
        found = {str(r.id): self._hit(r, with_vectors) for r in records}
        return [found[i] for i in checked if i in found]

    def _query(self, op: str, *, keep_vectors: bool = False, fields: Sequence[str] | None = None,
               **kwargs: Any) -> list[Hit]:
        selector = c.payload_fields(fields)
        with self._engine(op):
            points = self.live.query_points(self.collection, with_payload=selector, **kwargs).points
        return [self._hit(p, keep_vectors) for p in points]

    def dense_search(
        self, vector: np.ndarray, where: Where | None, limit: int, *, with_vectors: bool = False,
        exact: bool = False, fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Nearest points by cosine, best first (``exact`` bypasses the HNSW index)."""
        return self._query(
            "dense search", keep_vectors=with_vectors, fields=fields, query=c.dense_list(vector, self.dim, "vector"), using=DENSE,
            query_filter=to_client(where), limit=c.check_limit(limit),
            with_vectors=[DENSE] if with_vectors else False,
            # local mode is always exact and warns about search params, so send none there
            search_params=qm.SearchParams(exact=True) if exact and not self._is_local else None,
        )

    def search_legs(self, dense: np.ndarray, sparse: SparseVector | None, where: Where | None,
                    limit: int, *, fields: Sequence[str] | None = None,
                    sparse_hits: Sequence[Hit] | None = None) -> Legs:
        """Both rankings and the sparse hits' cosines in one ``query_batch_points`` (one
        request to a server instead of three): the dense query, the sparse query, and the
        sparse query again as a prefetch rescored by the dense vector.

        ``sparse_hits``: the BM25 ranking already read (``sparse_search`` while the query was
        embedded): the batch holds the dense query and the dense vector over the ids of those
        that do not carry their vectors (the others are scored here)."""
        limit = c.check_limit(limit)
        if sparse_hits is not None and sparse is not None:
            raise ValidationError("search_legs takes a sparse vector or the sparse hits, "
                                  "not both", field="sparse")
        flt = to_client(where)
        selector = c.payload_fields(fields)
        nearest = c.dense_list(dense, self.dim, "dense")
        requests = [qm.QueryRequest(query=nearest, using=DENSE, filter=flt, limit=limit,
                                    with_payload=selector)]
        idx, val = c.sparse_lists(sparse, "sparse") if sparse is not None else ([], [])
        if idx:
            terms = qm.SparseVector(indices=idx, values=val)
            requests.append(qm.QueryRequest(query=terms, using=SPARSE, filter=flt, limit=limit,
                                            with_payload=selector))
            requests.append(qm.QueryRequest(
                query=nearest, using=DENSE, limit=limit, with_payload=False,
                prefetch=[qm.Prefetch(query=terms, using=SPARSE, filter=flt, limit=limit)]))
        unscored = [h.id for h in sparse_hits or () if h.dense is None]
        if unscored:
            requests.append(qm.QueryRequest(
                query=nearest, using=DENSE, limit=len(unscored), with_payload=False,
                filter=qm.Filter(must=[qm.HasIdCondition(has_id=list[Any](unscored))])))
        with self._engine("search legs"):
            answers = self.live.query_batch_points(self.collection, requests)
        dense_hits = [self._hit(p, False) for p in answers[0].points]
        if sparse_hits is not None:
            scored: dict[str, float] = {}
            c.carried_cosines(dense, sparse_hits, scored)
            if unscored:
                scored.update((str(p.id), float(p.score)) for p in answers[1].points)
            return Legs(sparse=list(sparse_hits), dense=dense_hits,
                        sparse_cosines={h.id: scored[h.id] for h in sparse_hits if h.id in scored})
        if not idx:
            return Legs(sparse=[], dense=dense_hits, sparse_cosines={})
        return Legs(sparse=[self._hit(p, False) for p in answers[1].points], dense=dense_hits,
                    sparse_cosines={str(p.id): float(p.score) for p in answers[2].points})

    def keep_fields(self, fields: Sequence[str], limit: int) -> bool:
        """Nothing (False): other processes write a server's points, so nothing read is kept."""
        return False

    def field_table(self, wait: float = 0.0) -> None:
        return None

    def store_facts(self) -> StoreFacts:
        """Nothing known: other processes may write the collection, so every read says its
        tenant and every live condition."""
        return NOTHING_KNOWN

    def lapse(self, now: float) -> bool:
        """Nothing (False): this backend writes no live key (``store_facts`` knows nothing)."""
        return False

    def generation(self) -> None:
        """None: other processes may write the same collection, so no read is kept."""
        return None

    def sparse_search(self, vector: SparseVector, where: Where | None, limit: int, *,
                      fields: Sequence[str] | None = None, with_vectors: bool = False
                      ) -> list[Hit]:
        """Points sharing a term with ``vector``, by IDF-weighted dot product (``with_vectors``:
        in the same request)."""
        idx, val = c.sparse_lists(vector, "vector")
        limit = c.check_limit(limit)
        flt = to_client(where)
        c.payload_fields(fields)  # checked even when there is nothing to search
        if not idx:
            return []
        return self._query(
            "sparse search", keep_vectors=with_vectors, fields=fields,
            query=qm.SparseVector(indices=idx, values=val), using=SPARSE, query_filter=flt,
            limit=limit, with_vectors=[DENSE] if with_vectors else False,
        )

    def hybrid_rrf(
        self, dense: np.ndarray, sparse: SparseVector, where: Where | None, limit: int,
        prefetch: int, k: int = 60, *, weights: tuple[float, float] | None = None,
    ) -> list[Hit]:
        """The engine's RRF of a dense and a sparse prefetch; scores are sum 1/(k + rank), rank from 1.

        ``weights=(dense, sparse)`` asks for Qdrant's weighted RRF, which divides the rank:
        each list adds 1/(k + rank / weight), so weight 2 makes rank 2 count like rank 1.
        """
        flt = to_client(where)
        prefetch = c.check_limit(prefetch, "prefetch")
        stages = [qm.Prefetch(query=c.dense_list(dense, self.dim), using=DENSE, filter=flt, limit=prefetch)]
        idx, val = c.sparse_lists(sparse)
        fusion_weights = c.rrf_weights(weights, bool(idx))
        if idx:  # a query without terms has no sparse ranking, only the dense one
            stages.append(qm.Prefetch(
                query=qm.SparseVector(indices=idx, values=val), using=SPARSE, filter=flt, limit=prefetch,
            ))
        return _ties_by_id(self._query(
            "hybrid query", prefetch=stages, query=qm.RrfQuery(rrf=qm.Rrf(k=c.engine_rrf_k(k), weights=fusion_weights)),
            query_filter=flt, limit=c.check_limit(limit),
        ))

    def scroll(
        self, where: Where | None, *, limit: int = 256, offset: str | None = None,
        with_vectors: bool = False, fields: Sequence[str] | None = None,
    ) -> tuple[list[Hit], str | None]:
        """One page in id order and the id that starts the next page (None at the end)."""
        selector = c.payload_fields(fields)
        with self._engine("scroll"):
            records, nxt = self.live.scroll(
                self.collection, scroll_filter=to_client(where), limit=c.check_limit(limit),
                offset=None if offset is None else c.check_id(offset, "offset"),
                with_payload=selector, with_vectors=[DENSE] if with_vectors else False,
            )
        return [self._hit(r, with_vectors) for r in records], None if nxt is None else str(nxt)

    def times(self, where: Where | None, field: str, limit: int, *,
              start: float | None = None) -> list[tuple[str, float]]:
        """Matching points and their ``field`` values, by the field's index (no payload read),
        read from ``start`` on."""
        with self._engine("times"):
            records, _ = self.live.scroll(
                self.collection, scroll_filter=to_client(where), limit=c.check_limit(limit),
                with_payload=False, with_vectors=False,
                order_by=qm.OrderBy(key=field, direction=qm.Direction.ASC,
                                    start_from=c.check_start(start)),
            )
        return [(str(r.id), float(r.order_value)) for r in records if r.order_value is not None]

    def iterate(self, where: Where | None = None, *, with_vectors: bool = False,
                batch: int = 256) -> Iterator[Hit]:
        """Every matching point, page by page."""
        return c.iterate_pages(self.scroll, where, with_vectors=with_vectors, batch=batch)

    def count(self, where: Where | None = None) -> int:
        """The exact number of matching points."""
        with self._engine("count"):
            return int(self.live.count(self.collection, count_filter=to_client(where), exact=True).count)

    # -- meta and lifecycle ------------------------------------------------------------------

    def read_meta(self) -> dict[str, Any]:
        """The payload of the meta point ({} for a new store)."""
        with self._engine("read meta"):
            records = self.live.retrieve(self.meta_collection, [META_POINT_ID], with_payload=True)
        return dict(records[0].payload or {}) if records else {}

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Replace the metadata (one point upsert: the old payload is replaced whole)."""
        if not isinstance(meta, dict):
            raise ValidationError("meta must be a dict", field="meta")
        with self._engine("write meta"):
            self.live.upsert(
                self.meta_collection, [qm.PointStruct(id=META_POINT_ID, vector={}, payload=meta)], wait=True,
            )

    def optimize(self) -> None:
        """Nothing to do: a Qdrant server runs its optimizers by itself."""
        log.debug("optimize() is a no-op for a Qdrant server collection %s", self.collection)

    def flush(self) -> None:
        """Nothing to do: every write is sent with ``wait=True`` and is durable on return."""

    def close(self) -> None:
        """Close the client if this backend owns it. Idempotent."""
        client, self.client = self.client, None
        if client is not None and self._owns_client:
            client.close()

    def __enter__(self) -> QdrantServerBackend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"QdrantServerBackend(collection={self.collection!r}, dim={self.dim})"
