"""``MemoryStore``: the entry class of the note store (reads, writes, lifecycle)."""

from __future__ import annotations

import builtins
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from . import bm25
from .backends.base import Hit, Match, Point, VectorBackend, Where
from .clock import Clock, SystemClock
from .config import AmemConfig, load_config
from .errors import EmbedderMismatchError, NotFoundError, ValidationError
from .index_build import IndexBuilder
from .notefields import is_expired, not_expired
from .notes import (POINT_ID_FORMAT, Note, check_agent, check_id, check_limit, check_text,
                    point_id)
from .pointids import META_KEY as POINT_IDS
from .pointids import move_points
from .purge import index_old_notes
from .refresh import FIELD as STALE_FIELD
from .refresh import count_stale, refresh_vectors
from .similarity import calibration_for, note_cosine, note_similarity, query_similarity
from .text import TOKENIZER_VERSION
from .usage import FIELD as USAGE_FIELD
from .usage import RecentSearches, with_query
from .visibility import count_expired, visible_links

if TYPE_CHECKING:
    from .embed.base import Embedder
    from .purge import SweepReport
    from .search import SearchResult
    from .update import UpdateResult
    from .write import AddResult, Writer

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MEMORY = ":memory:"
#: seconds a get waits for the write lock to record usage heat before it gives up (amem.usage)
OPEN_LOCK_WAIT_S = 0.25


@dataclass(frozen=True)
class StoreInfo:
    """What ``status`` reports about the note store."""

    backend: str
    location: str
    embedder: str
    dim: int
    points: int
    active_notes: int
    agents: int | None
    #: notes whose vector embeds an earlier text (an interrupted write; see ``amem.refresh``)
    stale_vectors: int = 0
    #: the engine's index build: state, points written since, last run (``amem.index_build``)
    index_build: dict[str, Any] | None = None
    #: notes past their ``expires_at`` (invisible, not in ``active_notes``) the sweep will delete
    expired_pending_sweep: int = 0


class MemoryStore:
    """A-MEM notes in Qdrant: ``add``, ``search``, ``get``, ``delete``, ``count``.

    Build it from a directory (the embedded qdrant-edge engine; one process owns it),
    ``":memory:"`` (a throwaway embedded store), or an open ``backend`` (for example a Qdrant
    server through ``QdrantServerBackend``). Every call works for one tenant, ``agent_id``:
    the store's default or the one a call names; one agent never sees another's notes.

    Without ``config`` the settings come from the environment exactly as the ``amem`` CLI
    reads them (``AMEM_CONFIG``, ``AMEM_HOME``, ``AMEM_EMBEDDER``, ..., ``AMEM_AGENT``):
    ``MemoryStore()`` opens the CLI's store. An explicit ``config`` reads no environment.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        config: AmemConfig | None = None,
        embedder: "Embedder | None" = None,
        backend: VectorBackend | None = None,
        llm: Any = None,
        clock: Clock | None = None,
        agent_id: str | None = None,
    ) -> None:
        if path is not None and backend is not None:
            raise ValueError("give either a path or an open backend, not both")
        if config is None:
            # Resolved as the CLI resolves it (AMEM_CONFIG, AMEM_HOME, AMEM_EMBEDDER, ...,
            # AMEM_AGENT), so a script and `amem` open the same store; config= reads no env.
            config = load_config(os.environ.get("AMEM_CONFIG") or None, env=os.environ)
            agent_id = agent_id or os.environ.get("AMEM_AGENT") or None
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.agent_id = check_agent(agent_id or self.config.agent_id)
        if embedder is None:
            from .embed import make_embedder

            # The converted model (e5-small) lives with this store's home, not the environment's.
            embedder = make_embedder(self.config.embedder, threads=self.config.embed_threads,
                                     cache_dir=Path(self.config.home) / "models")
        self.embedder = embedder
        self._lock = threading.RLock()
        self._closed = False
        self.backend, self.location, self.backend_kind = self._open_backend(path, backend)
        self._meta = self._check_meta()
        self._index = IndexBuilder(self)  # before anything below writes points
        #: the embedder's two cosine scales, note to note and query to note (amem.similarity)
        self.calibration = calibration_for(
            self.embedder, note_baseline=self.config.similarity_baseline,
            query_baseline=self.config.query_baseline, query_top=self.config.query_top)
        self.similarity_baseline = self.calibration.note_baseline
        self._stats = self._engine_stats(bm25.CorpusStats(**self._meta.get("bm25_stats", {})))
        self._bm25 = bm25.Bm25Params(self.config.bm25_k1, self.config.bm25_b)
        self._writes_since_meta = 0
        self._retokenize()
        self._move_point_ids()
        index_old_notes(self, self._meta)  # once: stores written before event times
        self._llm = llm if llm is not None else self._llm_from_config()
        self._writer: Writer | None = None  # built on first write (imports the enrichers lazily)
        #: each agent's last searches, so a get can record the query that led to it (amem.usage)
        self.recent_searches = RecentSearches()

    # ------------------------------------------------------------------ lifecycle

    def _llm_from_config(self) -> Any:
        """An LLM client when ``llm_base_url`` is configured; None means offline enrichment."""
        cfg = self.config
        if not cfg.llm_base_url:
            return None
        from .llm import PLACEHOLDER_API_KEY, LLMClient, LLMConfig

        return LLMClient(LLMConfig(base_url=cfg.llm_base_url, model=cfg.llm_model,
                                   api_key=cfg.llm_api_key or PLACEHOLDER_API_KEY,
                                   connect_timeout=cfg.llm_connect_timeout,
                                   read_timeout=cfg.llm_read_timeout, deadline=cfg.llm_deadline_s,
                                   max_reply_bytes=cfg.llm_max_reply_bytes))

    @property
    def llm(self) -> Any:
        """The LLM client in use, or None (offline)."""
        return self._llm

    def _open_backend(self, path: str | Path | None,
                      backend: VectorBackend | None) -> tuple[VectorBackend, str, str]:
        if backend is not None:
            return backend, type(backend).__name__, type(backend).__name__
        from .backends import EdgeBackend

        dim = self.embedder.dim
        if path is None and self.config.backend == "qdrant":
            from .backends.qdrant import QdrantServerBackend  # heavy: only for a server

            assert self.config.qdrant_url is not None  # checked by the config
            server = QdrantServerBackend.from_url(self.config.qdrant_url,
                                                  api_key=self.config.qdrant_api_key,
                                                  collection=self.config.collection, dim=dim)
            return server, self.config.qdrant_url, "qdrant"
        if str(path) == MEMORY:
            return EdgeBackend.temporary(dim), MEMORY, "edge"
        where = Path(path).expanduser() if path is not None else self.config.store_path
        return EdgeBackend(where, dim), str(where), "edge"

    def _check_meta(self) -> dict[str, Any]:
        """Record the embedder on a new store; refuse to mix models on an old one."""
        meta = self.backend.read_meta()
        given = self.embedder.model_id
        if not meta:
            meta = {"schema": SCHEMA_VERSION, "embedder": given, "dim": self.embedder.dim,
                    POINT_IDS: POINT_ID_FORMAT,
                    "bm25_stats": {"docs": 0, "tokens": 0}}
            self.backend.write_meta(meta)
            return meta
        stored = meta.get("embedder")
        if stored != given or meta.get("dim") != self.embedder.dim:
            self.backend.close()
            raise EmbedderMismatchError(
                f"the store at {self.location} holds vectors of {stored!r} (dim {meta.get('dim')}) "
                f"but was opened with {given!r} (dim {self.embedder.dim}); open it with the same "
                f"embedder, or rebuild its vectors with `amem reembed --embedder NAME`",
                stored=str(stored), given=given)
        return meta

    def _retokenize(self) -> None:
        """BM25 vectors written by another tokenizer (a stemmer change) are rebuilt, once."""
        if not bm25.terms_outdated(self._meta):
            return
        rebuilt = bm25.rebuild_sparse(self.backend, self._stats.avgdl, self._bm25)
        if rebuilt:
            log.warning("rebuilt the BM25 vectors of %d notes of %s for tokenizer version %d",
                        rebuilt, self.location, TOKENIZER_VERSION)
        self._meta[bm25.TOKENIZER_KEY] = TOKENIZER_VERSION
        self.backend.write_meta(self._meta)

    def _engine_stats(self, saved: bm25.CorpusStats) -> bm25.CorpusStats:
        """BM25 statistics whose document count is the engine's (one count query at open).

        Every point counts (deletes are soft and keep their terms), so the engine's point
        count is the document count; ``meta.json`` is only saved every 1,000 writes and at
        close, and a SIGKILL left it up to ~600 documents behind for good.
        """
        points = self.backend.count(None)
        if points == saved.docs:
            return saved
        log.warning("BM25 statistics of %s counted %d documents, the engine holds %d; "
                    "corrected (a process was probably killed before saving them)",
                    self.location, saved.docs, points)
        fixed = saved.resized(points)
        self._meta["bm25_stats"] = {"docs": fixed.docs, "tokens": fixed.tokens}
        self.backend.write_meta(self._meta)
        return fixed

    def _move_point_ids(self) -> None:
        """A store written with an older point-id format is moved to the current one, once."""
        if self._meta.get(POINT_IDS) == POINT_ID_FORMAT:
            return
        moved = move_points(self.backend, self._moved_point)
        if moved:
            log.warning("moved %d notes of %s to point-id format %d", moved, self.location,
                        POINT_ID_FORMAT)
        self._meta[POINT_IDS] = POINT_ID_FORMAT
        self.backend.write_meta(self._meta)

    def _moved_point(self, hit: Hit) -> Point:
        """A stored note under its current point id: its payload and vector as they were."""
        assert hit.dense is not None  # move_points reads with vectors and skips vectorless points
        point = self.make_point(Note.from_payload(hit.payload), hit.dense, count_stats=False,
                                stale=bool(hit.payload.get(STALE_FIELD)))
        point.payload = dict(hit.payload)
        return point

    def close(self) -> None:
        """Persist metadata and release the engine (and its lock). Safe to call twice."""
        self._index.cancel()  # outside the lock: the build thread takes it to record its end
        with self._lock:
            if self._closed:
                return
            self._save_meta()
            self.backend.flush()
            self.backend.close()
            self._closed = True

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _save_meta(self) -> None:
        self._meta["bm25_stats"] = {"docs": self._stats.docs, "tokens": self._stats.tokens}
        self.backend.write_meta(self._meta)
        self._writes_since_meta = 0

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValidationError("the store is closed", field="store")

    # ------------------------------------------------------------------ helpers for stages

    def agent(self, agent_id: str | None) -> str:
        """The tenant of a call: the one named, else the store's default."""
        return self.agent_id if agent_id is None else check_agent(agent_id)

    def tenant_filter(self, agent_id: str, *, active_only: bool = True) -> list[Any]:
        must: list[Any] = [Match("agent_id", agent_id)]
        if active_only:
            must.append(Match("is_active", True))
            must.append(not_expired(self.clock.now()))  # an expired note is gone at once
        return must

    def similarity(self, cosine: float) -> float:
        """A note-to-note cosine on the calibrated scale (0 = unrelated, 1 = identical)."""
        return note_similarity(cosine, self.calibration.note_baseline)

    def query_similarity(self, cosine: float) -> float:
        """A query-to-note cosine on the query scale (0 = unrelated, 1 = a typical answer)."""
        return query_similarity(cosine, self.calibration.query_baseline, self.calibration.query_top)

    def raw_cosine(self, similarity: float) -> float:
        """The raw note-to-note cosine at which ``similarity`` is reached (engine cut-offs)."""
        return note_cosine(similarity, self.calibration.note_baseline)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed(list(texts), kind="passage")

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.embedder.embed([text], kind="query")[0], dtype=np.float32)

    def make_point(self, note: Note, vector: np.ndarray, *, count_stats: bool = True,
                   stale: bool = False) -> Point:
        """The engine point of a note: its vector, its BM25 terms, its payload.

        ``stale`` says ``vector`` embeds an earlier text of the note (``amem.refresh``); the
        payload's mark always comes from this argument, so a fresh vector clears it.
        """
        terms = bm25.note_terms(note.content, note.keywords, note.tags)
        if count_stats:
            self._stats.add(len(terms))
        sparse = bm25.doc_vector(terms, self._stats.avgdl, self._bm25)
        payload = note.to_payload()
        payload[STALE_FIELD] = stale
        return Point(point_id(note.agent_id, note.id), np.asarray(vector, dtype=np.float32),
                     sparse, payload)

    def write_points(self, points: Sequence[Point]) -> None:
        self.backend.upsert(points)
        self._index.written(len(points))
        self._writes_since_meta += len(points)
        if self._writes_since_meta >= 1000:
            self._save_meta()

    @property
    def write_lock(self) -> threading.RLock:
        """The one lock every change to the store takes: adds, deletes, folds, evolutions,
        link updates, re-embedding, consolidation. A change never interleaves with another."""
        return self._lock

    def note_where(self, note_id: str, agent_id: str, *, active_only: bool = True) -> Where:
        """The stored note ``note_id`` of ``agent_id`` (and active), whatever its point id says."""
        must: list[Any] = [Match("agent_id", agent_id), Match("id", note_id)]
        if active_only:
            must.append(Match("is_active", True))
        return Where(must=tuple(must))

    def update_note_fields(self, note_id: str, agent_id: str, changes: dict[str, Any], *,
                           dense: np.ndarray | None = None, terms_of: Note | None = None,
                           active_only: bool = True) -> bool:
        """Change named fields (and optionally the vectors) of one stored note, in place.

        Only the note of this agent, active unless ``active_only`` is false, is touched; a
        missing, deleted or foreign one is left alone and the answer is False. ``terms_of``
        rebuilds the BM25 vector from that note's text. Never a whole-point rewrite: a field
        nobody named (``is_active`` above all) keeps what is stored now.
        """
        sparse = None
        if terms_of is not None:
            terms = bm25.note_terms(terms_of.content, terms_of.keywords, terms_of.tags)
            sparse = bm25.doc_vector(terms, self._stats.avgdl, self._bm25)
        with self._lock:
            return self.backend.update_point(
                point_id(agent_id, note_id), changes, dense=dense, sparse=sparse,
                where=self.note_where(note_id, agent_id, active_only=active_only))

    def update_note(self, note: Note, vector: np.ndarray | None = None) -> bool:
        """Rewrite a stored, active note's fields, terms and vector (re-embedded when None).

        ``is_active`` is left as stored: a note deleted meanwhile stays deleted (False).
        """
        if vector is None:
            vector = self.embed_passages([note.embed_text()])[0]
        changes = note.to_payload()
        changes.pop("is_active")
        changes[STALE_FIELD] = False
        return self.update_note_fields(note.id, note.agent_id, changes, dense=vector,
                                       terms_of=note)

    def load(self, note_id: str, agent_id: str, *, with_vector: bool = False,
             include_inactive: bool = False) -> tuple[Note, np.ndarray | None]:
        hits = self.backend.retrieve([point_id(agent_id, note_id)], with_vectors=with_vector)
        if not hits or hits[0].payload.get("agent_id") != agent_id \
                or hits[0].payload.get("id") != note_id:
            raise NotFoundError(f"no note {note_id!r} for agent {agent_id!r}", id=note_id)
        note = Note.from_payload(hits[0].payload)
        if not include_inactive and note.is_active and is_expired(note.expires_at,
                                                                  self.clock.now()):
            raise NotFoundError(f"note {note_id!r} expired at {note.expires_at}", id=note_id)
        if not note.is_active and not include_inactive:
            raise NotFoundError(f"note {note_id!r} was deleted or merged"
                                + (f" into {note.merged_into!r}" if note.merged_into else ""),
                                id=note_id)
        return note, hits[0].dense

    # ------------------------------------------------------------------ public API

    def add(self, text: str, subjects: Sequence[str] = (), **options: Any) -> "AddResult":
        """Store one note through the write pipeline (see ``amem.write``); a stored note that
        replaces an older one's fact marks it ``superseded_by`` (``amem.supersede``)."""
        with self._lock:
            if isinstance(options.get("id"), str):  # an expired note does not hold its id
                from .purge import sweep_ids

                sweep_ids(self, self.agent(options.get("agent_id")), [options["id"]])
            result = self.writer.add(text, subjects, **options)
            if result.status in ("created", "pending_merge") and options.get("enrich", True):
                self._supersede_new(result, self.agent(options.get("agent_id")))
            return result

    def _supersede_new(self, result: "AddResult", agent_id: str) -> None:
        from . import supersede

        note, vector = self.load(result.id, agent_id, with_vector=True)
        if vector is None:
            return
        outcome = supersede.check(self, note, vector, supersede.judge_for(self._llm))
        result.supersedes = outcome.superseded
        result.warnings.extend(outcome.warnings)

    def add_many(self, items: Sequence[dict[str, Any]], **options: Any) -> list["AddResult"]:
        """Store many notes with batched embedding (bulk import); then, when
        ``optimize_after`` points have accumulated, the index is built in the background.

        As ``add``: a note that replaces an older fact marks it (``supersedes``), and an item
        naming the id of an expired, not yet swept note replaces it (``amem.bulkwrite``)."""
        from .bulkwrite import add_batch

        results = add_batch(self, list(items), **options).results
        self._index.maybe_build(background=True)
        return results

    @property
    def index_build(self) -> IndexBuilder:
        """The engine's index-build state and trigger (see ``amem.index_build``)."""
        return self._index

    @property
    def writer(self) -> "Writer":
        with self._lock:
            if self._writer is None:
                from .write import Writer

                self._writer = Writer(self, llm=self._llm)
            return self._writer

    def search(self, query: str, limit: int = 5, topics_filter: Sequence[str] | None = None,
               subject: str | None = None, *, agent_id: str | None = None,
               expand_links: bool | None = None, heat: bool | None = None,
               min_similarity: float | None = None,
               include_superseded: bool = False, since: str | None = None,
               before: str | None = None,
               metadata: dict[str, Any] | None = None) -> list["SearchResult"]:
        """Hybrid search (BM25 + dense fused by z-scores, heat, 2-hop links); see ``amem.search``.

        ``min_similarity`` (off by default) drops results below that query similarity, so a
        search for something the store does not hold returns nothing. Notes a newer note
        superseded (``amem.supersede``) are left out unless ``include_superseded``; then each
        follows the note that replaced it and carries ``superseded_by``. ``since`` (inclusive) and
        ``before`` (exclusive) bound the notes' event time; ``metadata`` keeps notes whose
        metadata has each key at the value given (a list: any of them); see ``amem.notefields``.
        """
        from .search import run_search

        self._ensure_open()
        return run_search(self, query, limit=limit, topics_filter=topics_filter, subject=subject,
                          agent_id=self.agent(agent_id), expand_links=expand_links, heat=heat,
                          min_similarity=min_similarity, include_superseded=include_superseded,
                          since=since, before=before, metadata=metadata)

    def get(self, note_id: str, *, agent_id: str | None = None,
            include_inactive: bool = False) -> Note:
        """One note by id (``NotFoundError`` when absent, deleted, or another agent's)."""
        self._ensure_open()
        note, _ = self.load(check_id(note_id), self.agent(agent_id),
                            include_inactive=include_inactive)
        # Only links a caller can follow: an expired or deleted target stays in the payload
        # until the sweep or consolidation drops it (``amem.visibility``).
        note.links = visible_links(self, note)
        if note.is_active:
            self._record_open(note.id, self.agent(agent_id))
        return note

    def _record_open(self, note_id: str, agent_id: str) -> None:
        """Keep on the note the query of the agent's recent search that returned it (usage heat,
        ``amem.usage``); a note no recent search of this agent returned records nothing."""
        query = self.recent_searches.opened(agent_id, note_id)
        if query is None:
            return
        # Read and append as one change (two opens must not lose one), but a read never waits
        # behind maintenance holding the lock for minutes (consolidation): then it is not kept.
        if not self._lock.acquire(timeout=OPEN_LOCK_WAIT_S):
            log.info("usage heat: note %s opened while the store was busy; not recorded", note_id)
            return
        try:
            hits = self.backend.retrieve([point_id(agent_id, note_id)])
            if not hits or hits[0].payload.get("id") != note_id:
                return
            value = with_query(hits[0].payload.get(USAGE_FIELD), self.embedder.model_id, query)
            if value is not None:
                self.update_note_fields(note_id, agent_id, {USAGE_FIELD: value})
        finally:
            self._lock.release()

    def delete(self, note_id: str, *, agent_id: str | None = None) -> Note:
        """Soft-delete: the note stays in the engine with ``is_active: false``."""
        self._ensure_open()
        agent = self.agent(agent_id)
        with self._lock:
            note, _ = self.load(check_id(note_id), agent)
            self.update_note_fields(note.id, agent, {"is_active": False})
            if note.supersedes:  # the facts it replaced are current again
                from .supersede import release

                release(self, note)
        note.is_active = False
        return note

    def update(self, note_id: str, *, content: str | None = None,
               subjects: Sequence[str] | None = None,
               agent_id: str | None = None) -> "UpdateResult":
        """Edit a note in place: new text and/or subjects, re-enriched, re-embedded, links and
        supersession checked again, the previous version kept in ``evolution_history``
        (see ``amem.update``). ``NotFoundError`` for a missing, deleted or foreign note."""
        from .update import update_note

        return update_note(self, note_id, content=content, subjects=subjects, agent_id=agent_id)

    def delete_all(self, *, agent_id: str | None = None) -> int:
        """Hard-delete every note of one agent (``amem.purge``); how many points went.

        Irreversible, and only that agent's: other agents' notes and links are untouched.
        """
        from .purge import delete_all

        self._ensure_open()
        return delete_all(self, self.agent(agent_id))

    def sweep_expired(self, *, agent_id: str | None = None,
                      all_agents: bool = False) -> "SweepReport":
        """Hard-delete the notes whose ``expires_at`` passed (they are already invisible)."""
        from .purge import sweep_expired

        self._ensure_open()
        return sweep_expired(self, None if all_agents else [self.agent(agent_id)])

    def count(self, *, agent_id: str | None = None) -> int:
        """Active notes of the agent."""
        self._ensure_open()
        return self.backend.count(Where(must=tuple(self.tenant_filter(self.agent(agent_id)))))

    def list(self, *, agent_id: str | None = None, limit: int = 50,
             offset: str | int | None = None) -> tuple[builtins.list[Note], str | None]:
        """One page of the agent's active notes and the offset of the next page.

        ``offset`` is the cursor the previous page returned, or a number of notes to skip
        (``amem list --offset 100``: people page by count; skipping walks the pages between).
        """
        self._ensure_open()
        check_limit(limit, maximum=1000)
        where = Where(must=tuple(self.tenant_filter(self.agent(agent_id))))
        if isinstance(offset, int) or (isinstance(offset, str) and offset.isdigit()):
            skip, offset = int(offset), None
            if skip:
                offset = self._skip(where, skip)
                if offset is None:
                    return [], None
        hits, nxt = self.backend.scroll(where, limit=limit, offset=offset)
        return [Note.from_payload(h.payload) for h in hits], nxt

    def _skip(self, where: Where, count: int) -> str | None:
        """The cursor ``count`` (> 0) notes into ``where``'s order (``None``: past the end)."""
        if count < 0:
            raise ValidationError("offset must be a cursor or a count of 0 or more",
                                  field="offset")
        cursor: str | None = None
        while count > 0:
            hits, cursor = self.backend.scroll(where, limit=min(count, 1000), offset=cursor)
            count -= len(hits)
            if cursor is None:
                return None
        return cursor

    def iter_notes(self, *, agent_id: str | None = None, include_inactive: bool = False,
                   all_agents: bool = False, with_vectors: bool = False
                   ) -> Iterator[tuple[Note, np.ndarray | None]]:
        """Every note (of one agent, or of all agents), with its vector when asked."""
        self._ensure_open()
        must: list[Any] = [] if all_agents else [Match("agent_id", self.agent(agent_id))]
        if not include_inactive:
            must.append(Match("is_active", True))
            must.append(not_expired(self.clock.now()))
        for hit in self.backend.iterate(Where(must=tuple(must)), with_vectors=with_vectors):
            yield Note.from_payload(hit.payload), hit.dense

    def agents(self) -> builtins.list[str]:
        """Every agent id with at least one note (active or not)."""
        seen: dict[str, None] = {}
        for hit in self.backend.iterate(None):
            seen.setdefault(str(hit.payload.get("agent_id")), None)
        return sorted(seen)

    def save_note(self, note: Note, vector: np.ndarray | None = None) -> None:
        """Write a whole note as given (a new one; a stored one is ``update_note``'s job);
        re-embeds it when no vector is given."""
        if vector is None:
            vector = self.embed_passages([note.embed_text()])[0]
        self.write_points([self.make_point(note, vector, count_stats=False)])

    def update_payload(self, note_id: str, agent_id: str, changes: dict[str, Any]) -> bool:
        """Set fields of a stored note of ``agent_id``, active or not (False when absent)."""
        return self.update_note_fields(note_id, agent_id, changes, active_only=False)

    def consolidate(self, *, agent_id: str | None = None, all_agents: bool = False,
                    progress: Any = None) -> Any:
        """Merge near-duplicate notes and resolve ``pending_merge`` (see ``amem.consolidate``)."""
        from .consolidate import consolidate

        self._ensure_open()
        agents = None if all_agents else [self.agent(agent_id)]
        # Hold the writer's lock too: an add linking to a note mid-merge would dangle.
        with self._lock, self.writer.lock:
            # Expired notes go first: none is merged into a survivor that outlives it.
            expired = self.sweep_expired(agent_id=agent_id, all_agents=all_agents)
            # Pairs are found by vector: first mend any a killed writer left stale.
            refreshed = refresh_vectors(self)
            report = consolidate(self, agent_ids=agents, progress=progress, llm=self._llm)
            report.vectors_refreshed = refreshed
            report.expired_deleted = expired.expired_deleted
            self._sweep_supersessions(report)
            return report

    def _sweep_supersessions(self, report: Any) -> None:
        """The nightly pass for supersessions the write path missed (``amem.supersede``)."""
        from .supersede import judge_for, sweep

        judge = judge_for(self._llm)
        for agent, part in report.agents.items():
            outcome = sweep(self, agent, judge)
            report.superseded += len(outcome.superseded)
            part.warnings.extend(outcome.warnings)

    def optimize(self) -> None:
        """Build the engine's indexes (HNSW). Minutes on 100k notes: maintenance only."""
        self._ensure_open()
        with self._lock:
            started = time.perf_counter()
            self.backend.optimize()
            self._index.optimized(time.perf_counter() - started)

    def flush(self) -> None:
        with self._lock:
            self._save_meta()
            self.backend.flush()

    def info(self) -> StoreInfo:
        self._ensure_open()
        return StoreInfo(
            backend=self.backend_kind, location=self.location, embedder=self.embedder.model_id,
            dim=self.embedder.dim, points=self.backend.count(None),
            active_notes=self.backend.count(Where(must=(Match("is_active", True),
                                                        not_expired(self.clock.now())))),
            agents=None, stale_vectors=count_stale(self), index_build=self._index.to_dict(),
            expired_pending_sweep=count_expired(self))

    @property
    def bm25_stats(self) -> bm25.CorpusStats:
        return self._stats

    @property
    def bm25_params(self) -> bm25.Bm25Params:
        return self._bm25
