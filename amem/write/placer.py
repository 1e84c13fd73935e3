"""Where a new note goes: folded into its near-duplicate, or stored, linked and evolved.

Steps 2 to 6 of the write path (``amem.write.writer``) for one note whose content vector is
known: the fold decision on contents alone (``amem.write.nearduplicate``), the enrichment
(only for a note that will be stored), the links (candidates from ``amem.write.candidates``,
verified by ``amem.write.linking``), the note itself (marked as owing its back-links,
``amem.backlinks``), then the back-links and the evolution of the linked notes, then the mark
cleared. Every change to a stored note is a
field update under the write lock the caller holds.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from ..backends.base import Hit, Point
from ..backlinks import OWED_FIELD
from ..config import AmemConfig
from ..index import STALE_FIELD, NoteIndex, note_terms_of
from ..notes import Note, about_the_same, now_iso, point_id, unique
from ..refresh import mend
from . import candidates
from .drafts import Draft
from .enrichment import EnricherSlot, enrich_draft, view_of_note
from .fold import fold_into
from .linking import choose_links, view_of
from .nearduplicate import ContentVectors, best_match, content_cosines
from .result import AddResult
from .together import Apart, kept_apart, labels_kept, same_expiry
from .values import state_different_values

log = logging.getLogger(__name__)


def same_event_day(mine: str, theirs: object) -> bool:
    """Whether two notes' events fall on one (UTC) day, or either has no event time.

    The same words on another day tell another event: "I'm having an art show next month" said
    in two sessions weeks apart are two shows to a later question about either date. Folding
    them lost one of the days (LoCoMo dev, offline enrichment: 17 such turns folded, R@10
    0.7147 against 0.7166 with folding off; docs/retrieval-next.md). Such a pair is stored
    apart, still flagged ``pending_merge`` when that alike.
    """
    if not mine or not isinstance(theirs, str) or not theirs:
        return True
    return mine[:10] == theirs[:10]  # stored UTC ISO: "2025-05-08T..." (amem.notefields.iso)


class Placer:
    """Places new notes of one store (the writer calls it under the write lock)."""

    def __init__(self, index: NoteIndex, config: AmemConfig, enricher: EnricherSlot,
                 content: ContentVectors) -> None:
        self._index = index
        self._config = config
        self._enricher = enricher
        self._content = content
        self._adds = 0

    def new_point(self, note: Note, vector: np.ndarray, stale: set[str], *,
                  embeds_text: bool = False) -> Point:
        """A new note's point with its content's vector, marked stale when it embeds more;
        ``embeds_text``: ``vector`` already embeds ``note.embed_text()`` (never stale)."""
        more = not embeds_text and note.embed_text() != note.content
        if more:
            stale.add(point_id(note.agent_id, note.id))
        return self._index.make_point(note, vector, stale=more)

    def place(self, draft: Draft, vector: np.ndarray, stale: set[str], *,
              embeds_text: bool = False) -> AddResult:
        """Fold or store the note around its content's ``vector``; then links and evolution.

        Notes whose embedded text changed keep their vector for now, marked stale, and their
        point ids go into ``stale`` for the caller to refresh. On the fast path ``vector`` may
        embed the note's whole text already (``embeds_text``, see ``Writer.fast_text``).
        """
        index, cfg, note = self._index, self._config, draft.note
        if not draft.enrich:  # episodic fast path: stored as given (hash dedup only)
            warnings = enrich_draft(self._enricher, draft)
            index.write_points([self.new_point(note, vector, stale, embeds_text=embeds_text)])
            return AddResult("created", note.id, enriched_by=note.enriched_by, warnings=warnings)
        assert not embeds_text, "the fold decision needs the content's vector"
        hits = self.nearest(note, vector)
        # 1. the fold decision: contents only (see amem.write.nearduplicate), before any LLM call
        same = [index.similarity(c) for c in content_cosines(vector, hits, self._content)]
        self._lend_fresh(hits)
        # a note about someone else is never its near-duplicate (amem.notes.about_the_same),
        # nor one stating another value: "Server B has 16 GB" beside server A's is another
        # fact, however alike (amem.write.values); nor one expiring at another time or
        # lacking a label the new note carries (amem.write.together): a fold keeps the
        # target's; the result still names the nearest
        ours = [k for k, h in enumerate(hits)
                if about_the_same(note.subjects, h.payload.get("subjects") or ())]
        chosen = best_match([str(hits[k].payload["id"]) for k in ours], [same[k] for k in ours])
        nearest = None if chosen is None else ours[chosen]
        mine = Apart(note.id, note.hash)
        # only a candidate close enough to fold or be marked pending can matter (reading each
        # candidate's values made an enriched import 0.94x)
        ours = [k for k in ours
                if same[k] >= min(cfg.pending_threshold, cfg.fold_threshold)
                and same_expiry(note.expires_at, hits[k].payload.get("expires_at"))
                and labels_kept(note.metadata, hits[k].payload.get("metadata"))
                and not state_different_values(note.content, str(hits[k].payload.get("content", "")))
                # a person separated this text from that note (amem.separate): never again
                and not kept_apart(mine, Apart.of(hits[k].payload))]
        chosen = best_match([str(hits[k].payload["id"]) for k in ours], [same[k] for k in ours])
        best = None if chosen is None else ours[chosen]
        if (best is not None and same[best] >= cfg.fold_threshold
                and same_event_day(note.event_time, hits[best].payload.get("event_time"))):
            folded = self._fold(note, hits[best], same[best], stale)
            if folded is not None:
                return folded
        status = "created"
        if best is not None and same[best] >= cfg.pending_threshold:
            note.pending_merge = True
            status = "pending_merge"
        # 2. the note is built (by the LLM when configured) only now that it will be stored
        warnings = enrich_draft(self._enricher, draft)
        evolved = self.store_linked(note, vector, hits, stale, warnings)
        return AddResult(status, note.id, links=note.links, evolved=evolved,
                         enriched_by=note.enriched_by,
                         neighbour=hits[nearest].payload["id"] if nearest is not None else None,
                         similarity=round(same[nearest], 6) if nearest is not None else None,
                         warnings=warnings)

    def nearest(self, note: Note, vector: np.ndarray) -> list[Hit]:
        """The engine's ``link_candidates`` nearest live notes of the note's agent (whole, with
        their vectors), the note itself left out: the fold decision's and the links' pool."""
        index, cfg = self._index, self._config
        hits = index.read_tenant(note.agent_id, lambda where: index.backend.dense_search(
            vector, where, max(cfg.link_candidates, 1), with_vectors=True))
        return [h for h in hits if h.payload.get("id") != note.id]

    def store_linked(self, note: Note, vector: np.ndarray, hits: Sequence[Hit],
                     stale: set[str], warnings: list[str], *, embeds_text: bool = False,
                     evolve: bool = True) -> list[str]:
        """Steps 3 to 6 for an enriched note that will be stored: its links chosen, the note
        written (owing its back-links), the back-links and the evolution of linked notes
        (``evolve``), the mark cleared; the ids of the evolved notes. ``hits``: its nearest
        notes (:meth:`nearest`). ``amem.separate`` stores a text made its own note again
        through it, so it is linked as an add would link it."""
        index, cfg = self._index, self._config
        # the candidates go to the verifier unfiltered: an LLM's yes/no on the nearest notes,
        # else the linking rule on the notes sharing the note's terms (amem.write.candidates)
        llm = self._enricher.llm_configured
        offer, keep = candidates.offered(index, cfg, note, vector, hits, llm=llm)
        linked, link_warnings = choose_links(
            view_of(note.to_payload()),
            [view_of(h.payload, index.similarity(h.score)) for h in offer],
            self._enricher.get(), llm=llm, floor=cfg.link_floor, keep=keep)
        warnings.extend(link_warnings)
        note.links = unique(linked)
        # 3. the note first: a kill before its back-links leaves no link to a missing note.
        # It is marked as owing them in the same write, so a kill before they are all written
        # leaves a mark the next write or the nightly job finishes from (amem.backlinks).
        point = self.new_point(note, vector, stale, embeds_text=embeds_text)
        if note.links:
            point.payload[OWED_FIELD] = True
        index.write_points([point])
        if evolve:
            self._adds += 1
        # the dense hits are whole notes; a term candidate that was linked is read whole now
        by_id = candidates.whole(index, note.agent_id, linked,
                                 {h.payload["id"]: h for h in hits})
        evolved = self._link_back(note, linked, by_id, warnings, stale, evolve=evolve)
        if note.links:  # every back-link is written: nothing is owed
            index.update_note_fields(note.id, note.agent_id, {OWED_FIELD: False},
                                     active_only=False)
        return evolved

    def _lend_fresh(self, hits: Sequence[Hit]) -> None:
        """A stale note that embeds only its content was just embedded for the fold decision:
        that is its fresh vector, so it is stored now and the deferred refresh skips it."""
        for hit in hits:
            note = Note.from_payload(hit.payload)
            fresh = self._content.fresh.get(note.hash)
            if fresh is not None and note.vector_stale and note.embed_text() == note.content:
                mend(self._index, note, fresh)

    def _link_back(self, note: Note, linked: list[str], by_id: dict[str, Hit],
                   warnings: list[str], stale: set[str], *, evolve: bool = True) -> list[str]:
        """Back-links from each linked note, and the evolution of up to ``evolve_max`` of them.

        Field updates of the linked notes as they are stored now (the add holds the write
        lock, so ``by_id`` is current); returns the ids of the evolved notes.
        """
        cfg = self._config
        updates = {}
        if evolve and cfg.evolve_max > 0 and self._adds % cfg.evolve_every == 0 and linked:
            views = [view_of_note(Note.from_payload(by_id[n].payload))
                     for n in linked[:cfg.evolve_max]]
            decision = self._enricher.get().evolve(view_of_note(note), views)
            warnings.extend(getattr(decision, "warnings", []))
            updates = {u.id: u for u in decision if u.id in by_id}
        evolved: list[str] = []
        for nid in linked:
            other = Note.from_payload(by_id[nid].payload)
            other.links = unique([*other.links, note.id])
            changes: dict[str, Any] = {"links": other.links}
            update = updates.get(nid)
            were = None  # the terms change only with an evolution: counted for it alone
            if update is not None:
                were = len(note_terms_of(other))
                embedded = other.embed_text()
                self._apply_evolution(other, note.id, update)
                changes.update(context=other.context, tags=other.tags,
                               evolution_history=other.evolution_history)
                _mark_changed(other, embedded, changes, stale)
            if self._index.update_note_fields(nid, note.agent_id, changes,
                                              terms_of=other if update is not None else None,
                                              terms_were=were):
                if update is not None:
                    evolved.append(nid)
            else:  # cannot happen under the write lock; say so rather than link to a ghost
                warnings.append(f"linked note {nid!r} is gone; its back-link was not written")
        return evolved

    def _apply_evolution(self, other: Note, trigger: str, update: Any) -> None:
        other.evolution_history = [*other.evolution_history, {
            "triggered_by": trigger, "at": now_iso(self._index.clock.now()), "action": "evolve",
            "old_context": other.context, "new_context": update.context,
            "old_tags": list(other.tags), "new_tags": list(update.tags)}]
        other.context = update.context
        other.tags = list(update.tags)

    def _fold(self, note: Note, top: Hit, score: float, stale: set[str]) -> AddResult | None:
        """Fold the new text into its near-duplicate, as a field update of the target.

        None when the target is no longer there to fold into (the caller stores the note).
        """
        target = Note.from_payload(top.payload)
        embedded, were = target.embed_text(), len(note_terms_of(target))
        changes = fold_into(target, note, round(score, 6), now_iso(self._index.clock.now()))
        probe: set[str] = set()
        _mark_changed(target, embedded, changes, probe)
        if not self._index.update_note_fields(target.id, target.agent_id, changes,
                                              terms_of=target, terms_were=were):
            log.warning("fold target %r vanished; storing the note instead", target.id)
            return None
        if probe and target.embed_text() == target.content:
            # Its vector is its content's: embedded now, so the next fold decision's engine
            # search reads no stale vector and the outcome cannot depend on when a deferred
            # refresh runs (the decision would embed this content anyway). If the encoder
            # fails, the note stays marked and the refresh tries again (and reports it).
            try:
                mend(self._index, target, self._content.embed([target])[0])
            except Exception as exc:  # the fold itself is saved: never lose it to the encoder
                log.warning("fold into %r: re-embedding deferred: %s: %s", target.id,
                            type(exc).__name__, exc)
                stale |= probe
        else:
            stale |= probe
        return AddResult("folded", target.id, links=list(target.links),
                         enriched_by=note.enriched_by, neighbour=target.id,
                         similarity=round(score, 6))


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


__all__ = ["Placer"]
