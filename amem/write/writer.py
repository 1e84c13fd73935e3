"""The write path: ``add`` = dedup, near-duplicate fold, enrichment, save, links, evolution.

1. Exact dedup: a content-hash match (the note's own hash or one folded into it) returns the
   existing note, marked ``deduplicated``; no LLM is called, and nothing is written but the
   given tags the stored note lacks (``amem.write.tagjoin``).
2. Near-duplicate fold, on content alone (``amem.write.nearduplicate``): the new content's vector
   against the current content of the engine's nearest notes. Cosine >= ``fold_threshold``
   folds the new text into the best one (no LLM is called) when both tell an event of the same
   day (``placer.same_event_day``: the same words on another day are another event);
   ``pending_threshold`` <= cosine
   < ``fold_threshold`` stores the note flagged ``pending_merge`` for the nightly consolidation.
3. Note construction by the enricher (LLM when configured, offline otherwise): only for a note
   that will be stored, so the LLM never decides what is a duplicate.
4. Save the note.
5. Links: candidates verified (``amem.write.linking``): with an LLM the ``link_candidates``
   nearest notes, offline the notes sharing the most of its terms, other days first
   (``amem.write.candidates``); the back-links are written after the note, so a kill in
   between leaves no link to a missing note, and the note owes them (``links_owed``) until
   they are all written: the next write finishes what a killed one owed (``amem.backlinks``).
6. Evolution of up to ``evolve_max`` linked notes (context and tags), recorded.

Every change to a stored note (fold, back-link, evolution, re-embedding) is a field update of
that note (``NoteIndex.update_note_fields``), never a rewrite from a snapshot, and runs under
the store's one write lock: a note deleted meanwhile stays deleted.

A note is stored with its content's vector; when its enrichment adds words (an LLM's context),
or a fold or an evolution changes what it embeds, it is marked ``vector_stale`` and re-embedded
once when the add or the batch ends (``amem.refresh``): a note that changes several times in
one batch is embedded once, in one encoder call. A bulk import (``deferred_reembed``) waits
longer, until ``import_reembed_every`` notes wait or it ends. Folds never read those vectors.

``enrich=False`` is the episodic fast path: stored as given (hash dedup only), for bulk logs.

Steps 2 to 6 for one note are ``amem.write.placer``; this module checks the input, dedups,
embeds (per batch) and refreshes what the placements marked stale. Around a single add, an
expired note holding the id given is swept first and the stored note is judged for
supersession (``amem.supersede``); ``amem.write.bulk`` does the same around batches.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

from ..config import AmemConfig
from ..errors import ValidationError
from ..index import NoteIndex
from ..notes import check_agent
from ..purge import sweep_ids
from ..backlinks import OwedLinks
from ..refresh import StaleVectors
from ..supersede import Superseder
from .dedup import exact_duplicates
from .drafts import Draft, make_draft, split_item
from .enrichment import EnricherSlot, enrich_draft
from .nearduplicate import ContentVectors
from .placer import Placer
from .result import NEW_STATUSES, AddResult, kept_fields
from .tagjoin import join_tags

log = logging.getLogger(__name__)


class Writer:
    """Runs the add pipeline for one store, under the store's write lock."""

    def __init__(self, index: NoteIndex, config: AmemConfig, enricher: EnricherSlot,
                 superseder: Superseder, *, agent_id: str) -> None:
        self._index = index
        self._config = config
        self._enricher = enricher
        self._superseder = superseder
        self._agent_id = agent_id
        self._lock = index.lock
        self._stale = StaleVectors(index)
        self._owed = OwedLinks(index)
        self._content = ContentVectors(index.embed_passages)
        self._placer = Placer(index, config, enricher, self._content)

    @property
    def placer(self) -> Placer:
        """The step that stores a new note, linked (``amem.separate`` stores through it)."""
        return self._placer

    @property
    def lock(self) -> threading.RLock:
        """The store's write lock (held while a note is placed)."""
        return self._lock

    def agent(self, agent_id: Any) -> str:
        """The tenant of a write: the one named (checked), else the store's default."""
        return self._agent_id if agent_id is None else check_agent(agent_id)

    def _draft(self, text: Any, subjects: Any, **fields: Any) -> Draft:
        """Check every field before anything is written; the first bad one raises."""
        return make_draft(text, subjects, max_chars=self._config.max_text_chars,
                          agent_of=self.agent, now=self._index.clock.now(), **fields)

    # ------------------------------------------------------------------ the pipeline

    def add(self, text: Any, subjects: Any = (), **options: Any) -> AddResult:
        """One note through the pipeline; a stored note that replaces an older one's fact
        marks it ``superseded_by`` (``amem.supersede``)."""
        with self._lock:
            swept: dict[str, str] = {}
            if isinstance(options.get("id"), str):  # an expired note does not hold its id
                swept = sweep_ids(self._index, self.agent(options.get("agent_id")), [options["id"]])
            result = self._add(text, subjects, **options)
            was = swept.get(result.id)
            if was is not None and result.status in NEW_STATUSES:  # as add_many says it
                result.warnings.append(f"replaced note {result.id!r} of the same id, which "
                                       f"expired at {was} and was not swept yet")
            if result.status in NEW_STATUSES and options.get("enrich", True):
                self._supersede_new(result, self.agent(options.get("agent_id")))
            return result

    def _supersede_new(self, result: AddResult, agent_id: str) -> None:
        note, vector = self._index.load(result.id, agent_id, with_vector=True)
        if vector is None:
            return
        outcome = self._superseder.check(note, vector)
        result.supersedes = outcome.superseded
        result.warnings.extend(outcome.warnings)

    def _add(self, text: Any, subjects: Any = (), **options: Any) -> AddResult:
        draft = self._draft(text, subjects, **options)
        with self._lock:
            self._stale.repair_once()
            self._owed.repair_once()  # back-links a killed add left unwritten
            early, brought = self._dedup(draft)
            if early is not None:
                joined: set[str] = set()
                join_tags(self._index, [(draft.note, early)] if brought else [], joined)
                self._stale.refresh(joined, [early])
                return kept_fields(early, draft.note)
            text = self.fast_text(draft)
            vector = (self._content.embed([draft.note])[0] if text is None
                      else self._index.embed_passages([text])[0])
            stale: set[str] = set()  # a single add re-embeds before it returns
            with self._owed.watch():
                placed = self._placer.place(draft, vector, stale, embeds_text=text is not None)
            result = kept_fields(placed, draft.note)
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

    def fast_text(self, draft: Draft) -> str | None:
        """The text a fast-path note's vector embeds when it is more than its content (given
        subjects or keywords the content lacks); None otherwise.

        Such a note makes no fold decision, so it needs no vector of its content alone:
        embedding its whole text at once costs one encoder pass where the content's vector and
        then the stale-vector refresh cost two (a document import's chunks, each given its
        title, are such notes). Enriched notes keep their content's vector for the fold.
        """
        if draft.enrich:
            return None
        enrich_draft(self._enricher, draft)  # the fast path's: who enriched, nothing else
        text = draft.note.embed_text()
        return None if text == draft.note.content else text

    def add_many(self, items: Iterable[dict[str, Any]], *, enrich: bool = True,
                 agent_id: str | None = None, batch: int | None = None) -> list[AddResult]:
        """Bulk add: validate, dedup and enrich per item, embed per batch, place per item.

        Items are dicts with ``text`` and the optional fields of ``add``. A bad item raises
        ``ValidationError`` before its batch writes anything; callers that must skip bad
        items (the importer) validate with ``draft`` first.
        """
        size = batch or self._config.embed_batch
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

    def embed_ahead(self, items: Sequence[dict[str, Any]], *, enrich: bool = True,
                    agent_id: str | None = None) -> int:
        """Embed the contents of the enriched notes among ``items`` that are not stored yet,
        in one encoder call, without the write lock; how many were embedded.

        A bulk write calls it over several chunks before writing them (``amem.write.bulk``):
        the encoder's length-sorted batches pad less over more texts (an enriched import of
        2,000 notes: -13% CPU against embedding each chunk of 32 under the lock), and other writers are not kept waiting
        while a chunk embeds. Each chunk then takes its vectors from the content cache
        (``ContentVectors``); what is decided about a note (dedup, fold, links) is still
        decided under the lock, by the chunk. An item that does not validate is left to the
        chunk, which reports it as before; a note found stored here is not embedded.
        """
        drafts: list[Draft] = []
        for item in items:
            try:
                draft = self.draft(item, enrich=enrich, agent_id=agent_id)
            except ValidationError:
                continue
            if draft.enrich:  # fast-path notes may embed their whole text instead (fast_text)
                drafts.append(draft)
        if not drafts:
            return 0
        known = exact_duplicates(self._index.backend, [d.note for d in drafts],
                                 now=self._index.clock.now())
        return self._content.ahead([d.note for d, k in zip(drafts, known) if k is None])

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
            self._owed.repair_once()  # back-links a killed add left unwritten
            deduped, brought = self._dedup_many(drafts)
            out: list[AddResult | None] = deduped
            todo = [i for i, r in enumerate(out) if r is None]
            texts = {i: self.fast_text(drafts[i]) for i in todo}
            whole = {i: text for i, text in texts.items() if text is not None}
            content = [i for i in todo if i not in whole]
            vectors = dict(zip(content, self._content.embed([drafts[i].note for i in content])))
            if whole:  # fast-path notes with subjects: their whole text, embedded once
                vectors.update(zip(whole, self._index.embed_passages(list(whole.values()))))
            fast = []
            stale = self._stale.batch_set()
            for i in todo:
                # One by one, as single adds would: a later note may fold into or link to an
                # earlier one, and the outcome does not depend on where a batch starts.
                if drafts[i].enrich:
                    with self._owed.watch():
                        out[i] = self._placer.place(drafts[i], vectors[i], stale)
                else:  # the episodic fast path, written in one call for the batch
                    warnings = enrich_draft(self._enricher, drafts[i])
                    fast.append(self._placer.new_point(drafts[i].note, vectors[i], stale,
                                                       embeds_text=i in whole))
                    out[i] = AddResult("created", drafts[i].note.id,
                                       enriched_by=drafts[i].note.enriched_by, warnings=warnings)
            if fast:
                self._index.write_points(fast)
            # a repeat of a text folded earlier in this batch names the note it went into
            placed = {drafts[i].note.id: out[i] for i in todo}
            for result in out:
                first = placed.get(result.id) if result is not None else None
                if result is not None and result.status == "deduplicated" and first is not None:
                    result.id = first.id
            # a duplicate's given tags join the note it went into, now that every note is stored
            join_tags(self._index, [(drafts[i].note, r) for i, r in enumerate(out)
                                    if r is not None and i in brought], stale)
            results = [kept_fields(r, drafts[i].note) for i, r in enumerate(out)
                       if r is not None]
            self._stale.batch_done(stale, results)
        return results

    def _dedup_many(self, drafts: Sequence[Draft]) -> tuple[list[AddResult | None], set[int]]:
        """Exact dedup of a batch (``amem.write.dedup``), as add results; and the rows of the
        duplicates given tags their note lacks (``amem.write.tagjoin`` adds them), or given
        tags under a caller's id the note's history has not seen (the join notes it)."""
        known = exact_duplicates(self._index.backend, [d.note for d in drafts],
                                 now=self._index.clock.now())
        return ([None if k is None else AddResult(
                    k.status, k.id, enriched_by=k.enriched_by,
                    warnings=[k.warning] if k.warning else []) for k in known],
                {i for i, k in enumerate(known) if k is not None
                 and (k.new_tags or (k.unseen and drafts[i].given_id))})

    def _dedup(self, draft: Draft) -> tuple[AddResult | None, bool]:
        """The batch dedup for one note (and whether it brings tags its note lacks); an id
        clash is an error here, not a skipped line."""
        results, brought = self._dedup_many([draft])
        result = results[0]
        if result is not None and result.status == "rejected":
            raise ValidationError(
                f"a note with id {draft.note.id!r} already exists with different content; "
                f"delete it first or give another id", field="id")
        return result, bool(brought)


__all__ = ["AddResult", "Writer"]
