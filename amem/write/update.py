"""Editing a note in place: new content and/or subjects, re-enriched, re-embedded, re-linked.

``MemoryStore.update`` runs these steps under the store's one write lock:

1. check the input like ``add`` does (text, subjects), then load the caller's own active note
   (another agent's id is ``not_found``, worded as for a missing note: no oracle);
2. a text another live note of the agent already holds (its hash, or one folded into it) is
   refused with ``invalid_argument`` naming that note; nothing is written;
3. the note is rebuilt: enriched again as ``add`` would (unless its enrichment was given by the
   caller or skipped, which is kept and said), its previous content and subjects recorded in
   ``evolution_history``, its folded hashes dropped (exact dedup must not send the old text
   to a note that no longer holds it), and the BM25 statistics moved from the old terms to the
   new ones;
4. its links are verified again by the write path's rule (``amem.write.linking``) over the write
   path's candidates (``amem.write.candidates``) and its current links: links that no longer
   pass are dropped on both sides, new ones added on both sides (the note is marked
   ``links_owed`` until the other sides are written: a kill between leaves a mark the next
   write finishes, ``amem.backlinks``);
5. written as one field update with its new vector and terms, marked ``vector_stale`` until a
   second write clears the mark (as ``amem.refresh.mend`` does): a process killed between the
   two leaves the new text with a mark the next write repairs, never a silent mismatch;
6. supersession is judged again. The older notes it replaced are released *before* step 5
   (``amem.supersede.release``), and the new text is then judged afresh
   (``amem.supersede.check``): a process killed in between leaves those facts visible,
   never hidden by a text that no longer replaces them. ``supersedes`` and ``released`` of
   the result say what changed (an older note judged replaced again is in neither).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from ..backends.base import Match, MatchAny, Where
from ..backlinks import OWED_FIELD, settle_if_owed
from ..config import AmemConfig
from ..errors import ValidationError
from ..index import STALE_FIELD, NoteIndex, note_terms_of
from ..notes import (Note, check_id, check_str_list, check_tags, check_text, content_hash, now_iso,
                     point_id)
from ..supersede import Superseder
from . import candidates
from .enrichment import EnricherSlot, enrich_edit
from .linking import LinkView, choose_links, view_of

#: the fields an update may change on the edited note (a field update, never a rewrite)
FIELDS = ("content", "hash", "folded_hashes", "keywords", "tags", "context", "category",
          "enriched_by", "warnings", "subjects", "links", "evolution_history")


@dataclass
class UpdateResult:
    """What ``update`` did."""

    id: str
    status: str  # "updated" or "unchanged"
    changed: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    links_added: list[str] = field(default_factory=list)
    links_removed: list[str] = field(default_factory=list)
    supersedes: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    enriched_by: str = "none"
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Updater:
    """Edits notes of one store in place (see the module docstring)."""

    def __init__(self, index: NoteIndex, config: AmemConfig, enricher: EnricherSlot,
                 superseder: Superseder) -> None:
        self._index = index
        self._config = config
        self._enricher = enricher
        self._superseder = superseder

    def update(self, note_id: Any, agent: str, *, content: Any = None,
               subjects: Any = None, tags: Any = None) -> UpdateResult:
        """Edit one note of ``agent`` in place. New ``tags`` replace its tags (``[]`` clears
        them): how a user takes back a tag a default added (``amem.write.tagjoin``)."""
        index = self._index
        nid = check_id(note_id)
        if content is None and subjects is None and tags is None:
            raise ValidationError("nothing to update: give a new text, new subjects or new "
                                  "tags", field="text")
        text = (check_text(content, field="text", max_chars=self._config.max_text_chars)
                if content is not None else None)
        subs = check_str_list(subjects, field="subjects") if subjects is not None else None
        labels = check_tags(tags) if tags is not None else None
        with index.lock:
            note, vector = index.load(nid, agent, with_vector=True)
            new_text = text is not None and text != note.content
            new_subjects = subs is not None and subs != note.subjects
            new_tags = labels is not None and labels != note.tags
            if not new_text and not new_subjects and not new_tags:
                return UpdateResult(note.id, "unchanged", links=list(note.links),
                                    enriched_by=note.enriched_by)
            settle_if_owed(index, note)  # so the links it keeps are two-way before it relinks
            if new_text:
                assert text is not None
                self._refuse_duplicate(note, content_hash(text))
            old_terms, embedded = len(note_terms_of(note)), note.embed_text()
            warnings: list[str] = []
            entry: dict[str, Any] = {"action": "update", "at": now_iso(index.clock.now())}
            if new_text:
                assert text is not None
                entry["old_content"] = note.content
                note.content, note.hash, note.folded_hashes = text, content_hash(text), []
                warnings += enrich_edit(self._enricher, note)
            if new_subjects:
                assert subs is not None
                entry["old_subjects"] = list(note.subjects)
                note.subjects = subs
            if new_tags:  # after a new text's enrichment: the caller's tags are the ones kept
                assert labels is not None
                # both sides: what a user took out is read back from here (amem.write.takenback)
                entry["old_tags"], entry["new_tags"] = list(note.tags), list(labels)
                note.tags = labels
            note.evolution_history = [*note.evolution_history, entry]
            # subjects reach the embedded text ("Subjects: ..."), so new ones may change it too
            if new_text or vector is None or note.vector_stale or note.embed_text() != embedded:
                vector = index.embed_passages([note.embed_text()])[0]
            assert vector is not None
            before = list(note.links)
            linked, link_warnings = self._relink(note, vector)
            warnings += link_warnings
            note.links = linked
            freed = self._superseder.release(note, reason="edited") if note.supersedes else []
            changes = {name: getattr(note, name) for name in FIELDS}
            changes[STALE_FIELD] = True  # cleared by the second write below
            if set(linked) != set(before):  # the other sides follow: owed until then (amem.backlinks)
                changes[OWED_FIELD] = True
            if not index.update_note_fields(note.id, agent, changes, dense=vector,
                                            terms_of=note, terms_were=old_terms):
                raise ValidationError(f"note {nid!r} changed while it was updated", field="id")
            index.update_note_fields(note.id, agent, {STALE_FIELD: False})
            added = [n for n in linked if n not in before]
            removed = [n for n in before if n not in linked]
            warnings += self._back_links(note, added, removed)
            if added or removed:  # the other sides are in step: nothing is owed
                index.update_note_fields(note.id, agent, {OWED_FIELD: False})
            outcome = self._superseder.check(note, vector)
            warnings += outcome.warnings
        changed = ((["text"] if new_text else []) + (["subjects"] if new_subjects else [])
                   + (["tags"] if new_tags else []))
        return UpdateResult(note.id, "updated", changed=changed, links=list(note.links),
                            links_added=added, links_removed=removed,
                            supersedes=[n for n in outcome.superseded if n not in freed],
                            released=[n for n in freed if n not in outcome.superseded],
                            enriched_by=note.enriched_by, warnings=warnings)

    def _refuse_duplicate(self, note: Note, digest: str) -> None:
        """Another live note of the agent already holds this text: say which, change nothing."""
        where = Where(must=(Match("agent_id", note.agent_id), Match("is_active", True)),
                      should=(MatchAny("hash", (digest,)), MatchAny("folded_hashes", (digest,))))
        for hit in self._index.backend.iterate(where):
            other = str(hit.payload.get("id"))
            if other != note.id:
                raise ValidationError(
                    f"note {other!r} already holds this text; edit or delete that note instead",
                    field="text")

    def _relink(self, note: Note, vector: np.ndarray) -> tuple[list[str], list[str]]:
        """The write path's link decision over its candidates (``amem.write.candidates``), then
        over the current links: a link that still passes is kept, whatever the candidates."""
        index, cfg = self._index, self._config
        llm = self._enricher.llm_configured
        hits = index.read_tenant(note.agent_id, lambda where: index.backend.dense_search(
            vector, where, max(cfg.link_candidates, 1) + 1))
        hits = [h for h in hits if h.payload.get("id") != note.id]
        offer, keep = candidates.offered(index, cfg, note, vector, hits, llm=llm)
        views = {str(h.payload["id"]): view_of(h.payload, index.similarity(h.score))
                 for h in offer}
        current: list[LinkView] = []
        wanted = [n for n in note.links if n not in views and n != note.id]
        if wanted:
            for hit in index.backend.retrieve([point_id(note.agent_id, n) for n in wanted],
                                              with_vectors=True):
                payload = hit.payload
                if (payload.get("agent_id") == note.agent_id and payload.get("is_active", True)
                        and hit.dense is not None):
                    cos = float(np.dot(vector, hit.dense))
                    current.append(view_of(payload, index.similarity(cos)))
        mine, enricher = view_of(note.to_payload()), self._enricher.get()
        if keep is None:  # one verdict over both (one LLM call)
            linked, warnings = choose_links(mine, [*views.values(), *current], enricher, llm=llm,
                                            floor=cfg.link_floor)
        else:  # the offline rule: the first ``keep`` new candidates, and every current link
            linked, warnings = choose_links(mine, list(views.values()), enricher, llm=llm,
                                            floor=cfg.link_floor, keep=keep)
            linked += choose_links(mine, current, enricher, llm=llm, floor=cfg.link_floor)[0]
        return list(dict.fromkeys(linked)), warnings

    def _back_links(self, note: Note, added: Sequence[str],
                    removed: Sequence[str]) -> list[str]:
        """Keep the other side of every added or dropped link in step (field updates)."""
        warnings = []
        for other_id, add in [*((n, True) for n in added), *((n, False) for n in removed)]:
            try:
                other, _ = self._index.load(other_id, note.agent_id)
            except Exception:  # noqa: BLE001 - deleted or merged since: nothing to keep in step
                continue
            links = [n for n in other.links if n != note.id] + ([note.id] if add else [])
            if links != other.links and not self._index.update_note_fields(
                    other_id, note.agent_id, {"links": links}):
                warnings.append(f"linked note {other_id!r} is gone; its back-link was not "
                                "changed")
        return warnings


__all__ = ["UpdateResult", "Updater"]
