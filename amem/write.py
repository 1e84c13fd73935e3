"""The write path: ``add`` = dedup, near-duplicate fold, enrichment, save, links, evolution.

1. Exact dedup: a content-hash match (the note's own hash or one folded into it) returns the
   existing note, marked ``deduplicated``; nothing is written, no LLM is called.
2. Near-duplicate fold, on content alone (``amem.nearduplicate``): the new content's vector
   against the current content of the engine's nearest notes. Cosine >= ``fold_threshold``
   folds the new text into the best one (no LLM is called); ``pending_threshold`` <= cosine
   < ``fold_threshold`` stores the note flagged ``pending_merge`` for the nightly consolidation.
3. Note construction by the enricher (LLM when configured, offline otherwise): only for a note
   that will be stored, so the LLM never decides what is a duplicate.
4. Save the note.
5. Links: the ``link_candidates`` nearest notes, verified (``amem.linking``); the back-links
   are written after the note, so a kill in between leaves no link to a missing note.
6. Evolution of up to ``evolve_max`` linked notes (context and tags), recorded.

Every change to a stored note (fold, back-link, evolution, re-embedding) is a field update of
that note (``MemoryStore.update_note_fields``), never a rewrite from a snapshot, and runs under
the store's one write lock: a note deleted meanwhile stays deleted.

A note is stored with its content's vector; when its enrichment adds words (an LLM's context),
or a fold or an evolution changes what it embeds, it is marked ``vector_stale`` and re-embedded
once when the add or the batch ends (``amem.refresh``): a note that changes several times in
one batch is embedded once, in one encoder call. A bulk import (``deferred_reembed``) waits
longer, until ``import_reembed_every`` notes wait or it ends. Folds never read those vectors.

``enrich=False`` is the episodic fast path: stored as given (hash dedup only), for bulk logs.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import numpy as np

from .backends.base import Hit, Point, Where
from .dedup import exact_duplicates
from .drafts import Draft, make_draft, split_item
from .errors import ValidationError
from .fold import fold_into
from .linking import choose_links, view_of
from .nearduplicate import ContentVectors, best_match, content_cosines
from .notefields import unsaved_fields
from .notes import Note, now_iso, point_id, unique
from .refresh import FIELD as STALE_FIELD
from .refresh import StaleVectors, mend

if TYPE_CHECKING:
    from .enrich import Enrichment, NoteView
    from .store import MemoryStore

log = logging.getLogger(__name__)

#: ``rejected`` only comes from bulk adds (an id clash skips that item, not the batch)
STATUSES = ("created", "deduplicated", "folded", "pending_merge", "rejected")


@dataclass
class AddResult:
    """What ``add`` did."""

    status: str
    id: str
    links: list[str] = field(default_factory=list)
    evolved: list[str] = field(default_factory=list)
    enriched_by: str = "none"
    neighbour: str | None = None
    similarity: float | None = None
    warnings: list[str] = field(default_factory=list)
    #: older notes this one replaced (``amem.supersede``)
    supersedes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Writer:
    """Runs the add pipeline for one store, under the store's write lock."""

    def __init__(self, store: "MemoryStore", *, llm: Any = None) -> None:
        self.store = store
        self._llm = llm
        self._enricher: Any = None
        self._lock = store.write_lock
        self._adds = 0
        self._stale = StaleVectors(store)
        self._content = ContentVectors(store.embed_passages)

    @property
    def lock(self) -> Any:
        """The store's write lock (held while a note is placed)."""
        return self._lock

    @property
    def enricher(self) -> Any:
        """Built on first use: the episodic fast path never loads keyword models or LLMs."""
        if self._enricher is None:
            from .enrich import build_enricher

            self._enricher = build_enricher(self._llm)
        return self._enricher

    def _draft(self, text: Any, subjects: Any, **fields: Any) -> Draft:
        """Check every field before anything is written; the first bad one raises."""
        return make_draft(text, subjects, max_chars=self.store.config.max_text_chars,
                          agent_of=self.store.agent, now=self.store.clock.now(), **fields)

    def _enrich(self, draft: Draft) -> list[str]:
        """Fill keywords/tags/context/category unless the caller gave them; return warnings."""
        note = draft.note
        if not draft.enrich:
            note.enriched_by = "given" if draft.given_enrichment else "none"
            return []
        if draft.given_enrichment:
            note.enriched_by = "given"
            return []
        result: "Enrichment" = self.enricher.enrich(note.content)
        note.keywords = list(result.keywords)
        note.tags = list(result.tags)
        note.context = result.context
        note.category = result.category
        if note.note_type == "memory" and result.note_type == "knowledge" and not note.topics:
            note.note_type = "knowledge"
        note.topics = note.topics or list(result.topics)
        note.enriched_by = result.enriched_by
        note.warnings = list(result.warnings)
        return list(result.warnings)

    # ------------------------------------------------------------------ the pipeline

    def add(self, text: Any, subjects: Any = (), **options: Any) -> AddResult:
        draft = self._draft(text, subjects, **options)
        with self._lock:
            self._stale.repair_once()
            early = self._dedup(draft)
            if early is not None:
                return _kept_fields(early, draft.note)
            vector = self._content.embed([draft.note])[0]
            stale: set[str] = set()  # a single add re-embeds before it returns
            result = _kept_fields(self._place(draft, vector, stale), draft.note)
            self._stale.refresh(stale, [result])
            return result

    @contextmanager
    def deferred_reembed(self) -> Iterator[list[str]]:
        """Inside the block, ``add_many`` batches leave changed notes waiting for their vector
        until ``import_reembed_every`` wait, then re-embed them in one call; the rest are
        re-embedded when the block ends. A note folded into in many batches of an import is
        embedded once instead of once per batch. Yields the list of refresh warnings.

        Until then such a note is found by its new text in BM25 and by its previous vector
        (marked ``vector_stale``, counted by ``info``). An interrupt (Ctrl-C) skips the final
        refresh: the marks stay and the next write re-embeds them.
        """
        with self._lock:
            opened = self._stale.open_window()
            problems = self._stale.problems
        if not opened:  # nested: the outer block refreshes
            yield problems
            return
        interrupted = False
        try:
            yield problems
        except BaseException as exc:
            interrupted = not isinstance(exc, Exception)
            raise
        finally:
            with self._lock:
                self._stale.close_window(interrupted=interrupted)

    def add_many(self, items: Iterable[dict[str, Any]], *, enrich: bool = True,
                 agent_id: str | None = None, batch: int | None = None) -> list[AddResult]:
        """Bulk add: validate, dedup and enrich per item, embed per batch, place per item.

        Items are dicts with ``text`` and the optional fields of ``add``. A bad item raises
        ``ValidationError`` before its batch writes anything; callers that must skip bad
        items (the importer) validate with ``draft`` first.
        """
        size = batch or self.store.config.embed_batch
        results: list[AddResult] = []
        pending: list[dict[str, Any]] = []
        for item in items:
            pending.append(item)
            if len(pending) >= size:
                results.extend(self._add_batch(pending, enrich, agent_id))
                pending = []
        if pending:
            results.extend(self._add_batch(pending, enrich, agent_id))
        return results

    def draft(self, item: dict[str, Any], *, enrich: bool = True,
              agent_id: str | None = None) -> Draft:
        """Validate one bulk item (raises ``ValidationError`` naming the field)."""
        text, subjects, fields = split_item(item, enrich=enrich, agent_id=agent_id)
        return self._draft(text, subjects, **fields)

    def _add_batch(self, items: Sequence[dict[str, Any]], enrich: bool,
                   agent_id: str | None) -> list[AddResult]:
        """One result per item, in order. An id clash rejects that item only (``rejected``)."""
        drafts = [self.draft(item, enrich=enrich, agent_id=agent_id) for item in items]
        with self._lock:
            self._stale.repair_once()
            out: list[AddResult | None] = self._dedup_many(drafts)
            todo = [i for i, r in enumerate(out) if r is None]
            vectors = self._content.embed([drafts[i].note for i in todo])
            fast = []
            stale = self._stale.batch_set()
            for row, i in enumerate(todo):
                # One by one, as single adds would: a later note may fold into or link to an
                # earlier one, and the outcome does not depend on where a batch starts.
                if drafts[i].enrich:
                    out[i] = self._place(drafts[i], vectors[row], stale)
                else:  # the episodic fast path, written in one call for the batch
                    warnings = self._enrich(drafts[i])
                    fast.append(self._new_point(drafts[i].note, vectors[row], stale))
                    out[i] = AddResult("created", drafts[i].note.id,
                                       enriched_by=drafts[i].note.enriched_by, warnings=warnings)
            if fast:
                self.store.write_points(fast)
            # a repeat of a text folded earlier in this batch names the note it went into
            placed = {drafts[i].note.id: out[i] for i in todo}
            for result in out:
                first = placed.get(result.id) if result is not None else None
                if result is not None and result.status == "deduplicated" and first is not None:
                    result.id = first.id
            results = [_kept_fields(r, drafts[i].note) for i, r in enumerate(out)
                       if r is not None]
            self._stale.batch_done(stale, results)
        return results

    def _new_point(self, note: Note, vector: np.ndarray, stale: set[str]) -> Point:
        """A new note's point with its content's vector, marked stale when it embeds more."""
        more = note.embed_text() != note.content
        if more:
            stale.add(point_id(note.agent_id, note.id))
        return self.store.make_point(note, vector, stale=more)

    def _dedup_many(self, drafts: Sequence[Draft]) -> list[AddResult | None]:
        """Exact dedup of a batch (``amem.dedup``), as add results."""
        return [None if k is None else AddResult(
                    k.status, k.id, enriched_by=k.enriched_by,
                    warnings=[k.warning] if k.warning else [])
                for k in exact_duplicates(self.store.backend, [d.note for d in drafts],
                                          now=self.store.clock.now())]

    def _dedup(self, draft: Draft) -> AddResult | None:
        """The batch dedup for one note; an id clash is an error here, not a skipped line."""
        result = self._dedup_many([draft])[0]
        if result is not None and result.status == "rejected":
            raise ValidationError(
                f"a note with id {draft.note.id!r} already exists with different content; "
                f"delete it first or give another id", field="id")
        return result

    def _place(self, draft: Draft, vector: np.ndarray, stale: set[str]) -> AddResult:
        """Fold or store the note around its content's ``vector``; then links and evolution.

        Notes whose embedded text changed keep their vector for now, marked stale, and their
        point ids go into ``stale`` for the caller to refresh.
        """
        store, cfg, note = self.store, self.store.config, draft.note
        if not draft.enrich:  # episodic fast path: stored as given (hash dedup only)
            warnings = self._enrich(draft)
            store.write_points([self._new_point(note, vector, stale)])
            return AddResult("created", note.id, enriched_by=note.enriched_by, warnings=warnings)
        where = Where(must=tuple(store.tenant_filter(note.agent_id)))
        hits = store.backend.dense_search(vector, where, max(cfg.link_candidates, 1),
                                          with_vectors=True)
        hits = [h for h in hits if h.payload.get("id") != note.id]
        # 1. the fold decision: contents only (see amem.nearduplicate), before any LLM call
        same = [store.similarity(c) for c in content_cosines(vector, hits, self._content)]
        self._lend_fresh(hits)
        best = best_match([str(h.payload["id"]) for h in hits], same)
        if best is not None and same[best] >= cfg.fold_threshold:
            folded = self._fold(note, hits[best], same[best], stale)
            if folded is not None:
                return folded
        status = "created"
        if best is not None and same[best] >= cfg.pending_threshold:
            note.pending_merge = True
            status = "pending_merge"
        # 2. the note is built (by the LLM when configured) only now that it will be stored
        warnings = self._enrich(draft)
        # the nearest notes go to the verifier unfiltered: LLM yes/no, else amem.linking's rule
        linked, link_warnings = choose_links(
            view_of(note.to_payload()),
            [view_of(h.payload, store.similarity(h.score)) for h in hits[:cfg.link_candidates]],
            self.enricher, llm=self._llm is not None, floor=cfg.link_floor)
        warnings.extend(link_warnings)
        note.links = unique(linked)
        # 3. the note first: a kill before its back-links leaves no link to a missing note
        store.write_points([self._new_point(note, vector, stale)])
        self._adds += 1
        evolved = self._link_back(note, linked, {h.payload["id"]: h for h in hits}, warnings,
                                  stale)
        return AddResult(status, note.id, links=note.links, evolved=evolved,
                         enriched_by=note.enriched_by,
                         neighbour=hits[best].payload["id"] if best is not None else None,
                         similarity=round(same[best], 6) if best is not None else None,
                         warnings=warnings)

    def _lend_fresh(self, hits: Sequence[Hit]) -> None:
        """A stale note that embeds only its content was just embedded for the fold decision:
        that is its fresh vector, so it is stored now and the deferred refresh skips it."""
        for hit in hits:
            note = Note.from_payload(hit.payload)
            fresh = self._content.fresh.get(note.hash)
            if fresh is not None and note.vector_stale and note.embed_text() == note.content:
                mend(self.store, note, fresh)

    def _link_back(self, note: Note, linked: list[str], by_id: dict[str, Hit],
                   warnings: list[str], stale: set[str]) -> list[str]:
        """Back-links from each linked note, and the evolution of up to ``evolve_max`` of them.

        Field updates of the linked notes as they are stored now (the add holds the write
        lock, so ``by_id`` is current); returns the ids of the evolved notes.
        """
        cfg = self.store.config
        updates = {}
        if cfg.evolve_max > 0 and self._adds % cfg.evolve_every == 0 and linked:
            views = [_view(Note.from_payload(by_id[n].payload)) for n in linked[:cfg.evolve_max]]
            decision = self.enricher.evolve(_view(note), views)
            warnings.extend(getattr(decision, "warnings", []))
            updates = {u.id: u for u in decision if u.id in by_id}
        evolved: list[str] = []
        for nid in linked:
            other = Note.from_payload(by_id[nid].payload)
            other.links = unique([*other.links, note.id])
            changes: dict[str, Any] = {"links": other.links}
            update = updates.get(nid)
            if update is not None:
                embedded = other.embed_text()
                self._apply_evolution(other, note.id, update)
                changes.update(context=other.context, tags=other.tags,
                               evolution_history=other.evolution_history)
                self._mark_changed(other, embedded, changes, stale)
            if self.store.update_note_fields(nid, note.agent_id, changes,
                                             terms_of=other if update is not None else None):
                if update is not None:
                    evolved.append(nid)
            else:  # cannot happen under the write lock; say so rather than link to a ghost
                warnings.append(f"linked note {nid!r} is gone; its back-link was not written")
        return evolved

    def _apply_evolution(self, other: Note, trigger: str, update: Any) -> None:
        other.evolution_history = [*other.evolution_history, {
            "triggered_by": trigger, "at": now_iso(self.store.clock.now()), "action": "evolve",
            "old_context": other.context, "new_context": update.context,
            "old_tags": list(other.tags), "new_tags": list(update.tags)}]
        other.context = update.context
        other.tags = list(update.tags)

    @staticmethod
    def _mark_changed(note: Note, embedded: str, changes: dict[str, Any], stale: set[str]) -> None:
        """Mark ``note`` stale when the text its vector embeds changed from ``embedded``.

        Offline evolution mostly tags words the note already holds, which the embedded text
        leaves out: then the stored vector is still this note's vector (or stays as stale as
        an earlier change left it).
        """
        if note.embed_text() != embedded:
            changes[STALE_FIELD] = True
        if note.vector_stale or note.embed_text() != embedded:
            stale.add(point_id(note.agent_id, note.id))

    def _fold(self, note: Note, top: Hit, score: float, stale: set[str]) -> AddResult | None:
        """Fold the new text into its near-duplicate, as a field update of the target.

        None when the target is no longer there to fold into (the caller stores the note).
        """
        target = Note.from_payload(top.payload)
        embedded = target.embed_text()
        changes = fold_into(target, note, round(score, 6), now_iso(self.store.clock.now()))
        probe: set[str] = set()
        self._mark_changed(target, embedded, changes, probe)
        if not self.store.update_note_fields(target.id, target.agent_id, changes,
                                             terms_of=target):
            log.warning("fold target %r vanished; storing the note instead", target.id)
            return None
        if probe and target.embed_text() == target.content:
            # Its vector is its content's: embedded now, so the next fold decision's engine
            # search reads no stale vector and the outcome cannot depend on when a deferred
            # refresh runs (the decision would embed this content anyway). If the encoder
            # fails, the note stays marked and the refresh tries again (and reports it).
            try:
                mend(self.store, target, self._content.embed([target])[0])
            except Exception as exc:  # the fold itself is saved: never lose it to the encoder
                log.warning("fold into %r: re-embedding deferred: %s: %s", target.id,
                            type(exc).__name__, exc)
                stale |= probe
        else:
            stale |= probe
        return AddResult("folded", target.id, links=list(target.links),
                         enriched_by=note.enriched_by, neighbour=target.id,
                         similarity=round(score, 6))


def _kept_fields(result: AddResult, note: Note) -> AddResult:
    """A text that went into a stored note leaves its event time, metadata and expiry behind
    (the stored note keeps its own): say so rather than drop them silently."""
    if result.status in ("deduplicated", "folded"):
        lost = unsaved_fields(note)
        if lost:
            result.warnings.append(
                f"the text went into stored note {result.id!r}, which keeps its own "
                f"{', '.join(lost)}; the ones given were not stored")
    return result


def _view(note: Note) -> "NoteView":
    from .enrich import NoteView

    return NoteView(id=note.id, content=note.content, context=note.context,
                    keywords=tuple(note.keywords), tags=tuple(note.tags))
