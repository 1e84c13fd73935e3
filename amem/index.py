"""``NoteIndex``: the notes as points in the vector engine, and everything the stages share.

The store's pipeline stages (``amem.write``, ``amem.search``, ``amem.consolidate``, ...) all
read and write notes through one object over the engine (``VectorBackend``) and the embedder:

* **points**: a note's point is its vector, its BM25 terms (saturated on the client against
  the corpus statistics kept here) and its payload; ``write_points`` counts what it wrote for
  the index build and saves the metadata every 1,000 points;
* **tenant filters**: every query of a stage is scoped to one agent's live notes;
* **calibrated similarity**: the embedder's two cosine scales (``amem.similarity``);
* **load / iterate** notes of one agent (or of all agents);
* **field updates** of one stored note, never a whole-point rewrite, under the write lock;
* **metadata** (``meta.json`` in the engine): the embedder that made the vectors (a store
  refuses another), the BM25 statistics, the index-build state.

It imports no stage and no store: the stages are given it, and the store builds it.
"""

from __future__ import annotations

import builtins
import logging
import threading
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

from . import bm25
from .backends.base import (LIVE_KEY, NOTHING_KNOWN, Condition, Hit, IsEmpty, Match, MatchAny,
                            Point, StoreFacts, VectorBackend, Where, live_keys)
from .config import AmemConfig
from .embed.base import Embedder
from .errors import (BackendError, EmbedderMismatchError, NotFoundError, StoreTooNewError,
                     ValidationError)
from .index_build import META_KEY as BUILD_META_KEY, IndexBuilder
from .kernel.clock import Clock
from .kernel.errors import DiskFullError
from .notefields import (ASKS, SUBJECT_KEYS, TAG_KEYS, is_expired, not_expired, subject_keys,
                         tag_keys)
from .notes import POINT_ID_FORMAT, Note, point_id
from .pointids import META_KEY as POINT_IDS
from .similarity import (calibration_for, note_cosine, note_similarities, note_similarity,
                         query_similarity)
from .text import question_share

log = logging.getLogger(__name__)

T = TypeVar("T")

#: the store format this code reads and writes (``meta.json``'s ``schema``); a store of a
#: higher one is refused at open (``StoreTooNewError``). Raise it with a one-time upgrade
#: (``amem.upgrades``) that code without the upgrade would undo by writing: an older amem
#: then refuses the store instead of writing notes that upgrade already passed over.
SCHEMA_VERSION = 1
#: the payload field saying a note's vector embeds an earlier text of it (``amem.refresh``)
STALE_FIELD = "vector_stale"
#: points written between two saves of the metadata (BM25 statistics, index-build count)
SAVE_EVERY = 1000


def note_terms_of(note: Note) -> list[str]:
    """A note's BM25 field as the store indexes it (``amem.bm25.note_terms`` of its fields)."""
    return bm25.note_terms(note.content, note.keywords, note.tags, note.subjects)


class NoteIndex:
    """Notes as engine points: build, write, filter, score, load and update them.

    Args:
        backend: the open engine (its metadata is checked against ``embedder`` at once).
        embedder: makes the passage and query vectors.
        config: the store's settings (calibration, BM25, index-build threshold).
        clock: "now" for expiry filters.
        lock: the store's one write lock; every field update here takes it.
        location: where the engine lives (messages only).

    Raises:
        EmbedderMismatchError: the engine holds another embedder's vectors (it is closed).
    """

    def __init__(self, backend: VectorBackend, embedder: Embedder, *, config: AmemConfig,
                 clock: Clock, lock: threading.RLock, location: str) -> None:
        self.backend = backend
        self.embedder = embedder
        self.config = config
        self.clock = clock
        self.lock = lock
        self.location = location
        self.closed = False
        self.meta: dict[str, Any] = self._check_meta()
        #: the index-build state and trigger (``amem.index_build``); counts ``write_points``
        self.build = IndexBuilder(self)
        #: the embedder's two cosine scales, note to note and query to note (amem.similarity)
        self.calibration = calibration_for(
            embedder, note_baseline=config.similarity_baseline,
            query_baseline=config.query_baseline, query_top=config.query_top)
        self.stats = self._engine_stats(bm25.CorpusStats(**self.meta.get("bm25_stats", {})))
        self.bm25_params = bm25.Bm25Params(config.bm25_k1, config.bm25_b)
        self._writes_since_meta = 0

    # ------------------------------------------------------------------ metadata

    def _check_meta(self) -> dict[str, Any]:
        """Record the embedder on a new store; refuse to mix models on an old one."""
        meta = self.backend.read_meta()
        given = self.embedder.model_id
        if not meta:
            points = self.backend.count(None)
            if points:  # not new: its record was lost, and adopting ours would mix models
                self.backend.close()
                raise BackendError(
                    f"the store at {self.location} holds {points:,} points but no record of the "
                    "embedder that wrote them (its metadata was deleted or damaged). Restore "
                    "it from a backup, or move the store aside and import the notes again "
                    "into a new store")
            meta = {"schema": SCHEMA_VERSION, "embedder": given, "dim": self.embedder.dim,
                    POINT_IDS: POINT_ID_FORMAT,
                    "bm25_stats": {"docs": 0, "tokens": 0}}
            self.backend.write_meta(meta)
            return meta
        schema = meta.get("schema", SCHEMA_VERSION)
        if isinstance(schema, int) and schema > SCHEMA_VERSION:
            self.backend.close()
            raise StoreTooNewError(
                f"the store at {self.location} has format {schema}, written by a newer amem; "
                f"this one reads format {SCHEMA_VERSION} and would write notes its upgrades "
                "missed: upgrade amem on this host (the store is intact)",
                schema=schema, supported=SCHEMA_VERSION)
        stored = meta.get("embedder")
        if stored != given or meta.get("dim") != self.embedder.dim:
            self.backend.close()
            raise EmbedderMismatchError(
                f"the store at {self.location} holds vectors of {stored!r} (dim {meta.get('dim')}) "
                f"but was opened with {given!r} (dim {self.embedder.dim}); open it with the same "
                f"embedder, or rebuild its vectors with `amem reembed --embedder NAME`",
                stored=str(stored), given=given)
        return meta

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
        self.meta["bm25_stats"] = {"docs": fixed.docs, "tokens": fixed.tokens}
        self.backend.write_meta(self.meta)
        return fixed

    def write_meta(self) -> None:
        """Write the metadata as held now (a one-time upgrade records itself this way)."""
        self.backend.write_meta(self.meta)

    def save_meta(self) -> None:
        """Write the metadata with the current BM25 statistics."""
        self.meta["bm25_stats"] = {"docs": self.stats.docs, "tokens": self.stats.tokens}
        self.meta[BUILD_META_KEY] = self.build.to_dict()  # the moves counted since, above all
        self.backend.write_meta(self.meta)
        self._writes_since_meta = 0

    def flush(self) -> None:
        """Persist the engine's pending writes, then the metadata: the engine's flush writes
        the retrieval counts held in memory, and the points they move are counted in it."""
        with self.lock:
            try:
                self.backend.flush()
            finally:  # the metadata even when the engine's flush fails
                self.save_meta()

    def close(self) -> None:
        """Persist and release the engine (and its lock). Safe to call twice."""
        with self.lock:
            if self.closed:
                return
            self.flush()
            self.backend.close()
            self.closed = True

    def ensure_open(self) -> None:
        if self.closed:
            raise ValidationError("the store is closed", field="store")

    # ------------------------------------------------------------------ filters and scales

    def tenant_filter(self, agent_id: str, *, active_only: bool = True, current: bool = False,
                      facts: StoreFacts = NOTHING_KNOWN) -> list[Condition]:
        """The conditions of ``agent_id``'s notes (live ones: active and not expired; with
        ``current``, not superseded either).

        ``facts`` leaves out the conditions they make vacuous (the tenant of the agent owning
        every point, ``is_active`` when every point is active, the expiry while no point's has
        come, supersession when no point has a successor): only for a reader that checks their
        epoch after its reads (:meth:`read_as_tenant`). When every point carries its live key
        and two or more of the tenant, ``is_active``, supersession and a biting expiry are
        left, the key says them in one condition (``backends.base.LIVE_KEY``): the tenant
        beside any other condition doubles the engine's scan of a plain segment. The key
        covers the expiry once the notes whose expiry came carry the lapsed key
        (``StoreFacts.key_hides_expired``, :meth:`read_as_tenant` has them keyed).
        """
        clock = self.clock.now()
        now = clock.timestamp()
        tenant = facts.sole_agent != agent_id
        active = active_only and not facts.all_active
        replaced = not facts.none_superseded  # some point may have a successor
        expiry = active_only and not facts.expiry_vacuous(now)  # some note may have expired
        key_expiry = facts.key_hides_expired(now)
        must: list[Condition]
        if facts.key_usable(now) and active_only and (
                tenant + active + (current and replaced) >= 2 or (expiry and key_expiry)):
            # no superseded note: the current notes' key alone names every active one
            keys = live_keys(agent_id, current=current or not replaced)
            must = [Match(LIVE_KEY, keys[0]) if len(keys) == 1 else MatchAny(LIVE_KEY, keys)]
            expiry = expiry and not key_expiry
        else:
            must = [Match("agent_id", agent_id)] if tenant else []
            if active:
                must.append(Match("is_active", True))
            if current and replaced:
                must.append(IsEmpty("superseded_by"))
        if expiry:
            must.append(not_expired(clock))  # an expired note is gone at once
        return must

    def tenant_where(self, agent_id: str) -> Where:
        """``agent_id``'s live notes as one filter."""
        return Where(must=tuple(self.tenant_filter(agent_id)))

    def read_as_tenant(self, agent_id: str, read: Callable[[StoreFacts], T]) -> T:
        """``read(facts)``: ``facts`` what holds for every point now (``backend.store_facts``),
        so the reads may leave out the conditions they make vacuous (on a plain segment the
        engine checks every condition against every point it scans, and the tenant beside
        another doubles the scan). When a write during them ended a fact, that answer is
        dropped and ``read(NOTHING_KNOWN)`` made. ``read`` must change nothing: a dropped
        answer is never seen. (The live key needs no check: every write keeps it.) When an
        expiry came since the backend last keyed the notes whose expiry came, it keys them
        first (``backend.lapse``: its own key only, no note changes)."""
        facts = self.backend.store_facts()
        now = self.clock.now().timestamp()
        if facts.key_usable(now) and not facts.key_hides_expired(now):
            # an expiry came: its notes get the lapsed key, so the key leaves them out alone
            self.backend.lapse(now)
            facts = self.backend.store_facts()
        if facts.sole_agent == agent_id or facts.all_active or facts.none_superseded \
                or facts.keyed or facts.expiry_vacuous(now):
            out = read(facts)
            if self.backend.store_facts().epoch == facts.epoch:
                return out
        return read(NOTHING_KNOWN)

    def read_tenant(self, agent_id: str, read: Callable[[Where], T], *,
                    current: bool = False) -> T:
        """``read(where)`` over ``agent_id``'s live notes (``current``: and not superseded),
        each condition said only when it must be (:meth:`read_as_tenant`)."""
        return self.read_as_tenant(agent_id, lambda facts: read(
            Where(must=tuple(self.tenant_filter(agent_id, current=current, facts=facts)))))

    def live_where(self) -> Where:
        """Every agent's live notes (active, not expired)."""
        return Where(must=(Match("is_active", True), not_expired(self.clock.now())))

    def similarity(self, cosine: float) -> float:
        """A note-to-note cosine on the calibrated scale (0 = unrelated, 1 = identical)."""
        return note_similarity(cosine, self.calibration.note_baseline)

    def similarities(self, cosines: np.ndarray) -> np.ndarray:
        """:meth:`similarity` of every cosine of an array (a table of note pairs)."""
        return note_similarities(cosines, self.calibration.note_baseline)

    def query_similarity(self, cosine: float) -> float:
        """A query-to-note cosine on the query scale (0 = unrelated, 1 = a typical answer)."""
        return query_similarity(cosine, self.calibration.query_baseline, self.calibration.query_top)

    def raw_cosine(self, similarity: float) -> float:
        """The raw note-to-note cosine at which ``similarity`` is reached (engine cut-offs)."""
        return note_cosine(similarity, self.calibration.note_baseline)

    # ------------------------------------------------------------------ vectors and points

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed(list(texts), kind="passage")

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.embedder.embed([text], kind="query")[0], dtype=np.float32)

    def sparse_of(self, note: Note) -> Any:
        """The BM25 vector of a note's text, at today's average document length."""
        terms = note_terms_of(note)
        return bm25.doc_vector(terms, self.stats.avgdl, self.bm25_params)

    def make_point(self, note: Note, vector: np.ndarray, *, count_stats: bool = True,
                   stale: bool = False) -> Point:
        """The engine point of a note: its vector, its BM25 terms, its payload.

        ``stale`` says ``vector`` embeds an earlier text of the note (``amem.refresh``); the
        payload's mark always comes from this argument, so a fresh vector clears it.
        """
        terms = note_terms_of(note)
        if count_stats:
            self.stats.add(len(terms))
        sparse = bm25.doc_vector(terms, self.stats.avgdl, self.bm25_params)
        payload = note.to_payload()
        payload[STALE_FIELD] = stale
        return Point(point_id(note.agent_id, note.id), np.asarray(vector, dtype=np.float32),
                     sparse, payload)

    def write_points(self, points: Sequence[Point]) -> None:
        """Upsert points; counted for the index build, the metadata saved now and then."""
        try:
            self.backend.upsert(points)
        except DiskFullError:
            # refused before the engine took any: the BM25 statistics counted them when they
            # were built, so they go back to the engine's count (as at open after a kill)
            self.stats = self.stats.resized(self.backend.count(None))
            raise
        self.build.written(len(points))
        self._writes_since_meta += len(points)
        if self._writes_since_meta >= SAVE_EVERY:
            self.save_meta()

    def remove_points(self, hits: Sequence[Hit]) -> None:
        """Hard-delete the points of ``hits``, each taking its terms out of the BM25 counts."""
        self.backend.delete([h.id for h in hits])
        for hit in hits:
            p = hit.payload
            self.stats.remove(len(bm25.payload_terms(p)))

    def save_note(self, note: Note, vector: np.ndarray | None = None) -> None:
        """Write a whole note as given (a new one; a stored one is ``update_note``'s job);
        re-embeds it when no vector is given."""
        if vector is None:
            vector = self.embed_passages([note.embed_text()])[0]
        self.write_points([self.make_point(note, vector, count_stats=False)])

    # ------------------------------------------------------------------ field updates

    def note_where(self, note_id: str, agent_id: str, *, active_only: bool = True) -> Where:
        """The stored note ``note_id`` of ``agent_id`` (and active), whatever its point id says."""
        must: list[Condition] = [Match("agent_id", agent_id), Match("id", note_id)]
        if active_only:
            must.append(Match("is_active", True))
        return Where(must=tuple(must))

    def update_note_fields(self, note_id: str, agent_id: str, changes: dict[str, Any], *,
                           dense: np.ndarray | None = None, terms_of: Note | None = None,
                           terms_were: int | None = None, active_only: bool = True) -> bool:
        """Change named fields (and optionally the vectors) of one stored note, in place.

        Only the note of this agent, active unless ``active_only`` is false, is touched; a
        missing, deleted or foreign one is left alone and the answer is False. ``terms_of``
        rebuilds the BM25 vector from that note's text, and the corpus token total follows
        it: from ``terms_were`` (the stored note's term count, which a caller holding the
        note passes) or, without it, from the stored payload read first. A fold or an
        evolution that changed a note's terms left the total behind (a fold: 6 counted for 13
        stored), and every later note's BM25 vector was built with the wrong average length.
        Never a whole-point rewrite: a field nobody named (``is_active`` above all) keeps what
        is stored now.
        """
        terms = None
        if terms_of is not None:
            terms = note_terms_of(terms_of)
        if "content" in changes:  # the question share derived from the text follows it
            changes = {**changes, ASKS: question_share(str(changes["content"]))}
        if "subjects" in changes:  # and the subjects' keys the subject filter reads
            changes = {**changes, SUBJECT_KEYS: subject_keys(changes["subjects"])}
        if "tags" in changes:  # and the tags' keys the tags filter reads
            changes = {**changes, TAG_KEYS: tag_keys(changes["tags"])}
        pid = point_id(agent_id, note_id)
        with self.lock:
            if terms is not None and terms_were is None:
                stored = self.backend.retrieve([pid])
                terms_were = len(bm25.payload_terms(stored[0].payload)) if stored else None
            sparse = None if terms is None else bm25.doc_vector(terms, self.stats.avgdl, self.bm25_params)
            done = self.backend.update_point(pid, changes, dense=dense, sparse=sparse,
                                             where=self.note_where(note_id, agent_id, active_only=active_only))
            if done and terms is not None and terms_were is not None and terms_were != len(terms):
                self.stats.remove(terms_were)
                self.stats.add(len(terms))
            return done

    def update_payload(self, note_id: str, agent_id: str, changes: dict[str, Any]) -> bool:
        """Set fields of a stored note of ``agent_id``, active or not (False when absent)."""
        return self.update_note_fields(note_id, agent_id, changes, active_only=False)

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

    # ------------------------------------------------------------------ reads

    def load(self, note_id: str, agent_id: str, *, with_vector: bool = False,
             include_inactive: bool = False) -> tuple[Note, np.ndarray | None]:
        """One note of ``agent_id`` (``NotFoundError`` when absent, foreign, deleted or
        expired, unless ``include_inactive``) and its vector when asked."""
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

    def iter_notes(self, agent_id: str | None, *, include_inactive: bool = False,
                   with_vectors: bool = False) -> Iterator[tuple[Note, np.ndarray | None]]:
        """Every note of ``agent_id`` (of every agent when None), with its vector when asked."""
        must: list[Condition] = [] if agent_id is None else [Match("agent_id", agent_id)]
        if not include_inactive:
            must.append(Match("is_active", True))
            must.append(not_expired(self.clock.now()))
        for hit in self.backend.iterate(Where(must=tuple(must)), with_vectors=with_vectors):
            yield Note.from_payload(hit.payload), hit.dense

    def page(self, agent_id: str, *, limit: int, offset: str | int | None
             ) -> tuple[builtins.list[Note], str | None]:
        """One page of ``agent_id``'s live notes and the cursor of the next; ``offset`` is a
        cursor or a count of notes to skip (skipping walks the pages between)."""
        where = self.tenant_where(agent_id)
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

    def agents(self) -> builtins.list[str]:
        """Every agent id with at least one note (active or not)."""
        seen: dict[str, None] = {}
        for hit in self.backend.iterate(None):
            seen.setdefault(str(hit.payload.get("agent_id")), None)
        return sorted(seen)


__all__ = ["NoteIndex", "SCHEMA_VERSION", "STALE_FIELD", "note_terms_of"]
