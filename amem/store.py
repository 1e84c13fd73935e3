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
from .backends import open_backend
from .backends.base import Point, VectorBackend, Where
from .clock import Clock, SystemClock
from .config import AmemConfig, load_config
from .errors import ValidationError
from .index import NoteIndex
from .index_build import IndexBuilder
from .notes import Note, check_agent, check_id, check_limit
from .refresh import count_stale, refresh_vectors
from .upgrades import upgrade
from .search import Searcher, SearchResult, UsageRecorder
from .search.visibility import count_expired, visible_links
from .supersede import Superseder, judge_for

if TYPE_CHECKING:
    from .embed.base import Embedder
    from .purge import SweepReport
    from .update import UpdateResult
    from .write import AddResult, Writer

log = logging.getLogger(__name__)

MEMORY = ":memory:"


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
        engine, self.location, self.backend_kind = self._open_backend(path, backend)
        #: the notes in the engine: points, filters, similarity, metadata (``amem.index``)
        self.index = NoteIndex(engine, embedder, config=config, clock=self.clock,
                               lock=self._lock, location=self.location)
        upgrade(self.index)  # once per store: tokenizer, point ids, event times
        self._llm = llm if llm is not None else self._llm_from_config()
        #: supersession marks, judged by the LLM when one is configured (amem.supersede)
        self.superseder = Superseder(self.index, judge_for(self._llm))
        self._writer: Writer | None = None  # built on first write (imports the enrichers lazily)
        #: usage heat: each agent's last searches, and what a get records (amem.search.usage)
        self.usage = UsageRecorder(self.index)
        #: the read path (amem.search)
        self.searcher = Searcher(self.index, config, self.usage.recent)

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
        """The engine, where it lives, and its kind: the one given, a Qdrant server when the
        config names one and no path is given, else the embedded engine at the path."""
        if backend is not None:
            return backend, type(backend).__name__, type(backend).__name__
        cfg, dim = self.config, self.embedder.dim
        if path is None and cfg.backend == "qdrant":
            assert cfg.qdrant_url is not None  # checked by the config
            return (open_backend("qdrant", url=cfg.qdrant_url, api_key=cfg.qdrant_api_key,
                                 collection=cfg.collection, dim=dim), cfg.qdrant_url, "qdrant")
        where = MEMORY if str(path) == MEMORY else (
            str(Path(path).expanduser()) if path is not None else str(self.config.store_path))
        return open_backend("edge", path=where, dim=dim), where, "edge"

    def close(self) -> None:
        """Persist metadata and release the engine (and its lock). Safe to call twice."""
        self.index.build.cancel()  # outside the lock: the build thread takes it to record its end
        self.index.close()

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_open(self) -> None:
        self.index.ensure_open()

    # ------------------------------------------------------------------ helpers for stages

    @property
    def backend(self) -> VectorBackend:
        return self.index.backend

    @property
    def _meta(self) -> dict[str, Any]:
        return self.index.meta

    @property
    def _closed(self) -> bool:
        return self.index.closed

    @property
    def calibration(self) -> Any:
        return self.index.calibration

    @property
    def similarity_baseline(self) -> float:
        return self.index.calibration.note_baseline

    def agent(self, agent_id: str | None) -> str:
        """The tenant of a call: the one named, else the store's default."""
        return self.agent_id if agent_id is None else check_agent(agent_id)

    def tenant_filter(self, agent_id: str, *, active_only: bool = True) -> list[Any]:
        return self.index.tenant_filter(agent_id, active_only=active_only)

    def similarity(self, cosine: float) -> float:
        return self.index.similarity(cosine)

    def query_similarity(self, cosine: float) -> float:
        return self.index.query_similarity(cosine)

    def raw_cosine(self, similarity: float) -> float:
        return self.index.raw_cosine(similarity)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.index.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.index.embed_query(text)

    def make_point(self, note: Note, vector: np.ndarray, *, count_stats: bool = True,
                   stale: bool = False) -> Point:
        return self.index.make_point(note, vector, count_stats=count_stats, stale=stale)

    def write_points(self, points: Sequence[Point]) -> None:
        self.index.write_points(points)

    @property
    def write_lock(self) -> threading.RLock:
        """The one lock every change to the store takes: adds, deletes, folds, evolutions,
        link updates, re-embedding, consolidation. A change never interleaves with another."""
        return self._lock

    def update_note_fields(self, note_id: str, agent_id: str, changes: dict[str, Any], *,
                           dense: np.ndarray | None = None, terms_of: Note | None = None,
                           active_only: bool = True) -> bool:
        return self.index.update_note_fields(note_id, agent_id, changes, dense=dense,
                                             terms_of=terms_of, active_only=active_only)

    def update_note(self, note: Note, vector: np.ndarray | None = None) -> bool:
        return self.index.update_note(note, vector)

    def load(self, note_id: str, agent_id: str, *, with_vector: bool = False,
             include_inactive: bool = False) -> tuple[Note, np.ndarray | None]:
        return self.index.load(note_id, agent_id, with_vector=with_vector,
                               include_inactive=include_inactive)

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
        note, vector = self.index.load(result.id, agent_id, with_vector=True)
        if vector is None:
            return
        outcome = self.superseder.check(note, vector)
        result.supersedes = outcome.superseded
        result.warnings.extend(outcome.warnings)

    def add_many(self, items: Sequence[dict[str, Any]], **options: Any) -> list["AddResult"]:
        """Store many notes with batched embedding (bulk import); then, when
        ``optimize_after`` points have accumulated, the index is built in the background.

        As ``add``: a note that replaces an older fact marks it (``supersedes``), and an item
        naming the id of an expired, not yet swept note replaces it (``amem.bulkwrite``)."""
        from .bulkwrite import add_batch

        results = add_batch(self, list(items), **options).results
        self.index.build.maybe_build(background=True)
        return results

    @property
    def index_build(self) -> IndexBuilder:
        """The engine's index-build state and trigger (see ``amem.index_build``)."""
        return self.index.build

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
        self._ensure_open()
        return self.searcher.search(query, limit=limit, topics_filter=topics_filter, subject=subject,
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
        # until the sweep or consolidation drops it (``amem.search.visibility``).
        note.links = visible_links(self.index, note)
        if note.is_active:
            self.usage.opened(note.id, self.agent(agent_id))
        return note

    def delete(self, note_id: str, *, agent_id: str | None = None) -> Note:
        """Soft-delete: the note stays in the engine with ``is_active: false``."""
        self._ensure_open()
        agent = self.agent(agent_id)
        with self._lock:
            note, _ = self.load(check_id(note_id), agent)
            self.update_note_fields(note.id, agent, {"is_active": False})
            if note.supersedes:  # the facts it replaced are current again
                self.superseder.release(note)
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
        yield from self.index.iter_notes(None if all_agents else self.agent(agent_id),
                                         include_inactive=include_inactive,
                                         with_vectors=with_vectors)

    def agents(self) -> builtins.list[str]:
        """Every agent id with at least one note (active or not)."""
        return self.index.agents()

    def save_note(self, note: Note, vector: np.ndarray | None = None) -> None:
        """Write a whole note as given (a new one; a stored one is ``update_note``'s job);
        re-embeds it when no vector is given."""
        self.index.save_note(note, vector)

    def update_payload(self, note_id: str, agent_id: str, changes: dict[str, Any]) -> bool:
        """Set fields of a stored note of ``agent_id``, active or not (False when absent)."""
        return self.index.update_payload(note_id, agent_id, changes)

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
        for agent, part in report.agents.items():
            outcome = self.superseder.sweep(agent)
            report.superseded += len(outcome.superseded)
            part.warnings.extend(outcome.warnings)

    def optimize(self) -> None:
        """Build the engine's indexes (HNSW). Minutes on 100k notes: maintenance only."""
        self._ensure_open()
        with self._lock:
            started = time.perf_counter()
            self.index.backend.optimize()
            self.index.build.optimized(time.perf_counter() - started)

    def flush(self) -> None:
        self.index.flush()

    def info(self) -> StoreInfo:
        self._ensure_open()
        return StoreInfo(
            backend=self.backend_kind, location=self.location, embedder=self.embedder.model_id,
            dim=self.embedder.dim, points=self.index.backend.count(None),
            active_notes=self.index.backend.count(self.index.live_where()),
            agents=None, stale_vectors=count_stale(self), index_build=self.index.build.to_dict(),
            expired_pending_sweep=count_expired(self.index))

    @property
    def bm25_stats(self) -> bm25.CorpusStats:
        return self.index.stats

    @property
    def bm25_params(self) -> bm25.Bm25Params:
        return self.index.bm25_params
