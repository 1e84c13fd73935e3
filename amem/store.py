"""``MemoryStore``: the entry class of the note store (reads, writes, lifecycle)."""

from __future__ import annotations

import builtins
import logging
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np

from .backends import open_for_store
from .backends.base import VectorBackend
from .config import AmemConfig
from .errors import ValidationError
from .index import NoteIndex
from .kernel.clock import Clock, SystemClock
from .kernel.llm import LLM
from .notes import Note, check_agent, check_id, check_limit
from .search import Searcher, SearchResult, UsageRecorder
from .search.visibility import visible_links
from .storeopen import (OpeningProcess, check_arguments, configured_embedder, configured_llm,
                        settings_from_environment)
from .storeparts import OnFirstUse
from .storeparts import WriteParts as _WriteParts  # its name when it was defined here
from .storeupkeep import IndexUpkeep
from .storeupkeep import StoreInfo as StoreInfo  # what ``info`` returns, importable from here
from .upgrades import upgrade

if TYPE_CHECKING:
    from .consolidate import ConsolidationReport, Consolidator, Progress
    from .embed.base import Embedder
    from .purge import SweepReport
    from .separate import SeparateResult, Separator
    from .supersede import Superseder
    from .write import AddResult, BulkWriter, DeleteResult, UpdateResult, Updater, Writer

log = logging.getLogger(__name__)


class MemoryStore:
    """A-MEM notes in Qdrant: ``add``, ``search``, ``get``, ``delete``, ``count``.

    Build it from a directory (the embedded qdrant-edge engine; one process owns it),
    ``":memory:"`` (a throwaway embedded store), or an open ``backend`` (for example a Qdrant
    server through ``QdrantServerBackend``). Every call works for one tenant, ``agent_id``:
    the store's default or the one a call names; one agent never sees another's notes.

    Without ``config`` the settings come from the environment exactly as the ``amem`` CLI
    reads them (``AMEM_CONFIG``, ``AMEM_HOME``, ``AMEM_EMBEDDER``, ..., ``AMEM_AGENT``):
    ``MemoryStore()`` opens the CLI's store. An explicit ``config`` reads no environment.

    A facade: it builds its parts once, each with what it needs (the write path and the
    maintenance on first use, so a process that only reads never loads them), and the parts
    never call back into it. ``index`` (``amem.index.NoteIndex``) holds the notes in the engine; the
    stages work over it: ``writer``, ``bulk`` and ``updater`` (``amem.write``), ``searcher``
    and ``usage`` (``amem.search``), ``superseder`` (``amem.supersede``),
    ``consolidator`` (``amem.consolidate``) and ``separator``, which undoes a fold or a merge
    (``amem.separate``).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        config: AmemConfig | None = None,
        embedder: "Embedder | None" = None,
        backend: VectorBackend | None = None,
        llm: LLM | None = None,
        clock: Clock | None = None,
        agent_id: str | None = None,
    ) -> None:
        check_arguments(path, config=config, embedder=embedder, backend=backend, llm=llm)
        if config is None:
            config, agent_id = settings_from_environment(agent_id)
        self.config = config
        self.clock: Clock = clock or SystemClock()
        # "" is a bad agent id, refused by name, not the configured one chosen in its place
        self.agent_id = check_agent(self.config.agent_id if agent_id is None else agent_id)
        self.embedder = embedder if embedder is not None else configured_embedder(config)
        self._lock = threading.RLock()
        if backend is not None:
            engine, self.location, self.backend_kind = (backend, type(backend).__name__,
                                                        type(backend).__name__)
        else:
            engine, self.location, self.backend_kind = open_for_store(config, path,
                                                                      self.embedder.dim)
        #: the process that opened the store: a forked child may not use the embedded engine
        self._opener = OpeningProcess(self.location)
        #: the notes in the engine: points, filters, similarity, metadata (``amem.index``)
        self.index = NoteIndex(engine, self.embedder, config=config, clock=self.clock,
                               lock=self._lock, location=self.location)
        upgrade(self.index)  # once per store: point ids, event times, subjects, tokenizer
        self._llm = llm if llm is not None else configured_llm(config)
        # the write path and the nightly maintenance are built on first use
        # (``amem.storeparts``): a command that only reads (list, get, search, status) never
        # imports them, a third of its start
        self._parts = OnFirstUse(self.index, config, self._llm, self.agent_id, self._lock)
        #: usage heat: each agent's last searches, and what a get records (amem.search.usage)
        self.usage = UsageRecorder(self.index)
        #: the read path (amem.search)
        self.searcher = Searcher(self.index, config, self.usage.recent)
        #: when the index is built, the ranking fields kept, what ``info`` reports
        self._upkeep = IndexUpkeep(self.index, config, self._lock)

    # ------------------------------------------------------------------ the parts

    @property
    def llm(self) -> LLM | None:
        """The LLM client in use, or None (offline)."""
        return self._llm

    # the write path's and the maintenance's parts are built on first use (``amem.storeparts``)

    @property
    def superseder(self) -> "Superseder":
        """Supersession marks, judged by the LLM when one is configured (``amem.supersede``)."""
        return self._parts.writes().superseder

    @property
    def writer(self) -> "Writer":
        """The write path (``amem.write``): single adds and the drafts of batches."""
        return self._parts.writes().writer

    @property
    def bulk(self) -> "BulkWriter":
        """Batches and imports (``amem.write.bulk``)."""
        return self._parts.writes().bulk

    @property
    def updater(self) -> "Updater":
        """Edits of stored notes (``amem.write``)."""
        return self._parts.writes().updater

    @property
    def separator(self) -> "Separator":
        """Undoing a fold or a merge (``amem.separate``)."""
        return self._parts.writes().separator

    @property
    def consolidator(self) -> "Consolidator":
        """The nightly maintenance (``amem.consolidate``)."""
        return self._parts.consolidator()

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Persist metadata and release the engine (and its lock). Safe to call twice. In a
        process forked after the open it does nothing: the engine is the parent's to close."""
        if self._opener.is_elsewhere(self.index.backend):
            return
        self.index.build.cancel()  # outside the lock: the build thread takes it to record its end
        self.index.close()

    def __enter__(self) -> "MemoryStore":
        return self

    def __reduce__(self) -> Any:
        # Without this, pickling (multiprocessing's spawn, a pool's arguments) failed on an
        # internal lock, naming nothing the caller holds.
        raise TypeError("a MemoryStore cannot be pickled or sent to another process: open the "
                        "store in that process (an embedded store is owned by one process at a "
                        "time; close it here first)")

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_open(self) -> None:
        self.index.ensure_open()
        self._opener.check(self.index.backend)

    def _agent(self, agent_id: str | None) -> str:
        """The tenant of a call: the one named, else the store's default."""
        return self.agent_id if agent_id is None else check_agent(agent_id)

    # ------------------------------------------------------------------ public API

    def add(self, text: str, subjects: Sequence[str] = (), *, id: str | None = None,
            timestamp: str | datetime | None = None, enrich: bool = True,
            keywords: Sequence[str] | None = None, tags: Sequence[str] | None = None,
            category: str | None = None, context: str | None = None,
            note_type: str | None = None, topics: Sequence[str] | None = None,
            event_time: str | datetime | None = None, metadata: Mapping[str, Any] | None = None,
            expires_at: str | datetime | None = None, ttl: float | None = None,
            agent_id: str | None = None) -> "AddResult":
        """Store one note through the write pipeline (see ``amem.write``); a stored note that
        replaces an older one's fact marks it ``superseded_by`` (``amem.supersede``).

        Args:
            text: the note's content.
            subjects: who or what it is about (searched as keywords are).
            id: the note's id (a new UUID when left out).
            timestamp: when it was written (ISO 8601; now when left out).
            enrich: False is the episodic fast path: stored as given, no LLM, no links.
            keywords, tags, category, context, note_type, topics: fields enrichment would
                fill; given ones are the note's enrichment (none is drawn) and are
                embedded with its content.
            event_time: when what it tells happened (the timestamp when left out).
            metadata: scalar values by key, filterable in ``search``.
            expires_at, ttl: when it expires (an ISO time, or seconds from now; not both).
            agent_id: the tenant (the store's when left out).

        Raises:
            ValidationError: a bad argument; ``field`` names it. Nothing is stored.
        """
        self._ensure_open()
        result = self.writer.add(text, subjects, id=id, timestamp=timestamp, enrich=enrich,
                                 keywords=keywords, tags=tags, category=category, context=context,
                                 note_type=note_type, topics=topics, event_time=event_time,
                                 metadata=metadata, expires_at=expires_at, ttl=ttl,
                                 agent_id=agent_id)
        self._upkeep.build_when_due()
        return result

    def add_many(self, items: Sequence[dict[str, Any]], *, enrich: bool = True,
                 agent_id: str | None = None, batch: int | None = None,
                 supersede: bool = True) -> list["AddResult"]:
        """Store many notes with batched embedding (bulk import); then, when
        ``optimize_after`` points have accumulated, the index is built in the background.

        As ``add``: a note that replaces an older fact marks it (``supersedes``), and an item
        naming the id of an expired, not yet swept note replaces it (``amem.write.bulk``).

        Every item is checked before any is written: a bad one raises ``ValidationError``
        naming it (``items[35].metadata.k``) and nothing is stored (the items went in 32 at a
        time, so a bad 36th left the first 32 stored). An item whose id another note holds
        is not an error here: its result is ``rejected`` with a warning, as an import skips it.
        """
        self._ensure_open()
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise ValidationError("items must be a list of objects with 'text'", field="items")
        items = list(items)
        from .write.bulk import check_batch

        check_batch(batch, f"the store's embed_batch ({self.config.embed_batch})")
        for i, item in enumerate(items):
            try:
                self.writer.draft(item, enrich=enrich, agent_id=agent_id)
            except ValidationError as exc:
                raise ValidationError(f"item {i}: {exc}", field=f"items[{i}].{exc.field or 'item'}") from None
        results = self.bulk.add_batch(items, enrich=enrich, agent_id=agent_id, batch=batch,
                                      supersede=supersede).results
        self.index.build.maybe_build(background=True)
        return results

    def search(self, query: str, limit: int = 5, topics_filter: Sequence[str] | None = None,
               subject: str | None = None, *, agent_id: str | None = None,
               expand_links: bool | None = None, heat: bool | None = None,
               min_similarity: float | None = None,
               include_superseded: bool = False, since: str | None = None,
               before: str | None = None,
               metadata: dict[str, Any] | None = None,
               record_usage: bool = True,
               tags: Sequence[str] | None = None) -> list["SearchResult"]:
        """Hybrid search (BM25 + dense fused by z-scores, heat, 2-hop links); see ``amem.search``.

        ``min_similarity`` (off by default) drops results below that query similarity, so a
        search for something the store does not hold returns nothing. Notes a newer note
        superseded (``amem.supersede``) are left out unless ``include_superseded``; then each
        follows the note that replaced it and carries ``superseded_by``. ``since`` (inclusive) and
        ``before`` (exclusive) bound the notes' event time; ``metadata`` keeps notes whose
        metadata has each key at the value given (a list: any of them); see ``amem.notefields``.
        ``tags`` keeps notes holding any of the tags given, case-insensitive and with or
        without a leading ``#`` (``amem.notefields.tag_key``: "morning" finds "Morning").

        ``record_usage=False`` makes the search a pure read: no retrieval count, no access
        time, no entry among the agent's recent searches (so a later ``get`` records no usage
        heat from it). For a person looking (the inspector), not an agent using its memory.
        """
        self._ensure_open()
        if not isinstance(record_usage, bool):
            raise ValidationError("record_usage must be true or false", field="record_usage")
        results = self.searcher.search(
            query, limit=limit, topics_filter=topics_filter, subject=subject,
            agent_id=self._agent(agent_id), expand_links=expand_links, heat=heat,
            min_similarity=min_similarity, include_superseded=include_superseded,
            since=since, before=before, metadata=metadata, record_usage=record_usage,
            tags=tags)
        if record_usage:
            # its retrieval counts move the notes it returned out of the index
            self._upkeep.build_when_due(wait=False)
        return results

    def get(self, note_id: str, *, agent_id: str | None = None,
            include_inactive: bool = False, record_usage: bool = True) -> Note:
        """One note by id (``NotFoundError`` when absent, deleted, or another agent's).

        ``record_usage=False`` makes the get a pure read, as ``search``'s: the note records no
        usage heat from the agent's recent searches (a read-only key, a person looking)."""
        if not isinstance(record_usage, bool):
            raise ValidationError("record_usage must be true or false", field="record_usage")
        self._ensure_open()
        note, _ = self.index.load(check_id(note_id), self._agent(agent_id),
                                  include_inactive=include_inactive)
        # Only links a caller can follow: an expired or deleted target stays in the payload
        # until the sweep or consolidation drops it (``amem.search.visibility``).
        note.links = visible_links(self.index, note)
        if note.is_active and record_usage:
            self.usage.opened(note.id, self._agent(agent_id))
            # the usage write moves the note out of the index
            self._upkeep.build_when_due(wait=False)
        return note

    def delete(self, note_id: str, *, agent_id: str | None = None) -> DeleteResult:
        """Soft-delete: the note stays in the engine with ``is_active: false``.

        The facts it had replaced are released first (``amem.supersede.release``), then it is
        deactivated with its ``supersedes`` emptied in one write: a kill in between leaves
        them visible, never hidden behind a deleted note. The result names them
        (``released``, as ``update`` says them): they are current again."""
        from .write import DeleteResult

        self._ensure_open()
        agent = self._agent(agent_id)
        with self._lock:
            note, _ = self.index.load(check_id(note_id), agent)
            released = self.superseder.release(note, reason="deleted")
            self.index.update_note_fields(note.id, agent, {"is_active": False,
                                                           "supersedes": []})
        self._upkeep.build_when_due()
        note.is_active = False
        return DeleteResult(note.id, note, released)

    def update(self, note_id: str, *, content: str | None = None,
               subjects: Sequence[str] | None = None, tags: Sequence[str] | None = None,
               agent_id: str | None = None) -> "UpdateResult":
        """Edit a note in place: new text, subjects and/or tags (each replacing the old),
        re-enriched, re-embedded, links and supersession checked again, the previous version
        kept in ``evolution_history`` (see ``amem.write.update``). ``NotFoundError`` for a
        missing, deleted or foreign note."""
        self._ensure_open()
        result = self.updater.update(note_id, self._agent(agent_id), content=content,
                                     subjects=subjects, tags=tags)
        self._upkeep.build_when_due()
        return result

    def history(self, note_id: str, *, agent_id: str | None = None) -> builtins.list[dict[str, Any]]:
        """The supersession chain of a note, oldest first: the notes it replaced and those
        that replaced it, deleted ones included (``amem.supersede.history``)."""
        self._ensure_open()
        return self.superseder.chain(self._agent(agent_id), check_id(note_id))

    def unsupersede(self, note_id: str, *, agent_id: str | None = None) -> dict[str, Any]:
        """Show a fact hidden wrongly again, and keep it so: the pair is remembered and no
        judge hides it behind that note again (``amem.supersede.keep``). ``ValidationError``
        when the note is not superseded, ``NotFoundError`` when it does not exist."""
        self._ensure_open()
        agent = self._agent(agent_id)
        by = self.superseder.keep(agent, check_id(note_id))
        return {"id": note_id, "was_superseded_by": by, "restored": True}

    def separate(self, note_id: str, part_id: str, *,
                 agent_id: str | None = None) -> SeparateResult:
        """Undo a fold or a merge: the text ``part_id`` joined into ``note_id`` is its own
        current note again, and the two are kept apart for good (``amem.separate``).

        ``part_id`` is what ``history`` shows for the join: a fold's ``triggered_by`` (the id
        the folded text would have had), a merge's ``merged`` note. A merged note comes back
        as it was; a folded text becomes a note of that id. ``note_id`` loses the sentences,
        hashes, keywords, tags, subjects and topics only that part gave it; when its text
        changed since so that the sentences cannot be taken out exactly, it keeps its text
        and the result's ``warnings`` say so (``text_restored`` is False).

        Raises:
            NotFoundError: no live note ``note_id`` of this agent.
            ValidationError: ``note_id`` never received ``part_id``, or it was separated
                already (``field`` is ``part``).
        """
        self._ensure_open()
        result = self.separator.separate(note_id, part_id, self._agent(agent_id))
        self._upkeep.build_when_due()
        return result

    def delete_all(self, *, agent_id: str | None = None) -> int:
        """Hard-delete every note of one agent (``amem.purge``); how many points went.

        Irreversible, and only that agent's: other agents' notes and links are untouched.
        """
        from .purge import delete_all

        self._ensure_open()
        return delete_all(self.index, self._agent(agent_id))

    def sweep_expired(self, *, agent_id: str | None = None,
                      all_agents: bool = False) -> "SweepReport":
        """Hard-delete the notes whose ``expires_at`` passed (they are already invisible)."""
        from .purge import sweep_expired

        self._ensure_open()
        return sweep_expired(self.index, None if all_agents else [self._agent(agent_id)])

    def count(self, *, agent_id: str | None = None) -> int:
        """Active notes of the agent."""
        self._ensure_open()
        return self.index.backend.count(self.index.tenant_where(self._agent(agent_id)))

    def list(self, *, agent_id: str | None = None, limit: int = 50,
             offset: str | int | None = None) -> tuple[builtins.list[Note], str | None]:
        """One page of the agent's active notes and the offset of the next page.

        ``offset`` is the cursor the previous page returned, or a number of notes to skip
        (``amem list --offset 100``: people page by count; skipping walks the pages between).
        """
        self._ensure_open()
        check_limit(limit, maximum=1000)
        return self.index.page(self._agent(agent_id), limit=limit, offset=offset)

    def iter_notes(self, *, agent_id: str | None = None, include_inactive: bool = False,
                   all_agents: bool = False, with_vectors: bool = False
                   ) -> Iterator[tuple[Note, np.ndarray | None]]:
        """Every note (of one agent, or of all agents), with its vector when asked."""
        self._ensure_open()
        yield from self.index.iter_notes(None if all_agents else self._agent(agent_id),
                                         include_inactive=include_inactive,
                                         with_vectors=with_vectors)

    def consolidate(self, *, agent_id: str | None = None, all_agents: bool = False,
                    progress: Progress | None = None) -> ConsolidationReport:
        """Merge near-duplicate notes and resolve ``pending_merge`` (see ``amem.consolidate``)."""
        self._ensure_open()
        return self.consolidator.run(None if all_agents else [self._agent(agent_id)],
                                     progress=progress)

    def optimize(self) -> None:
        """Build the engine's indexes (HNSW). Minutes on 100k notes: maintenance only."""
        self._ensure_open()
        self._upkeep.optimize()

    def keep_ranking_fields(self, *, wait: float = 0.0) -> bool:
        """For a long-running process: keep every note's ranking fields in RAM (up to the
        ``rank_table`` setting's number of notes), read by a background thread now and after
        each index build, so a search reads payload pages only for notes written since
        (``amem.backends._edge_table``). False when the setting is 0 or the backend keeps
        nothing (a Qdrant server). ``wait``: seconds to wait for the first fill to end (a
        benchmark's; a server starts serving at once). A one-shot command should not call
        it: the fill reads the whole store."""
        self._ensure_open()
        return self._upkeep.keep_ranking_fields(wait)

    def keep_index_built(self) -> None:
        """For a long-running process: single writes (adds, and payload writes that move
        indexed points out of the index) start the index build in the background when enough
        have piled up, as a bulk write does between its chunks
        (``amem.index_build``; the embedded engine only: a Qdrant server indexes by itself).

        Without it single writes are only counted, and their points are searched by brute
        force until a bulk write or the nightly job builds: a server taking only single adds
        and no nightly job never built, and a day of them slowed every search (10k notes
        indexed: search p50 x1.6-1.9 with 25k more written since; benchmarks/RESULTS.md). A
        one-shot command should not call it: closing the store stops a build it started.
        """
        self._ensure_open()
        self._upkeep.builds_after_writes = True

    def flush(self) -> None:
        """Persist the metadata and the engine's pending writes."""
        self._ensure_open()
        self.index.flush()

    def info(self) -> StoreInfo:
        """What ``status`` reports: engine, embedder, counts, index build, pending work."""
        self._ensure_open()
        return self._upkeep.info(self.backend_kind, self.location, self.embedder)
