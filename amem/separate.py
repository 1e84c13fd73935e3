"""``amem separate NOTE PART``: a text a fold or a merge joined into a note is its own note again.

A fold (at ``add``) and a nightly merge each join one text into a note and record it
(``amem.joins``); ``amem history NOTE`` lists those parts. Separating one, under the store's
write lock:

1. the part becomes its own current note again: a merged note is brought back as it was
   (un-deleted, same id, times, enrichment and vector), with what the merge moved to the note
   besides the text (its marks, heat and links: ``amem.separate_moved``); a folded text,
   which was never stored on its own, becomes a note with the id, times, subjects and labels
   the fold recorded (the id left free; a fold recorded before 2026-12-06 kept only the text
   and the tags it added, and the result says what was not recorded), enriched as an add
   would enrich it, and linked as an add links a new note (``Placer.store_linked``);
2. the note loses what the join put into it: the paragraph of sentences it appended (taken
   out only when that is exact, else the text is kept and the result says why, see
   ``amem.joins``), the part's hashes from ``folded_hashes`` (exact dedup then sends the text
   to its own note), and the keywords, tags, subjects and topics only the part gave it; it is
   re-embedded and its BM25 terms follow its text;
3. both notes record the separation in their history and name each other in ``kept_apart``:
   no fold and no merge joins them again (``amem.write.together.kept_apart``);
4. a new note is judged against older facts as an add judges one (``amem.supersede``), now
   that the note it left no longer holds its text.

Write order, so that a process killed between any two writes loses neither text: the part's
note first (both texts are then whole twice over, the pair already kept apart on its side),
then the note it leaves. A separation run again after such a kill finds the part's note by
its record (``separated_from``) and finishes the second step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from .backends.base import Match, Where
from .backlinks import settle_if_owed
from .errors import ValidationError
from .index import STALE_FIELD, NoteIndex, note_terms_of
from .joins import (LISTS, SEPARATED, SEPARATED_FROM, Join, find_join, heat_back, joined,
                    lists_without, settle_left, text_without)
from .notefields import index_fields
from .notes import Note, check_id, content_hash, new_note_id, now_iso, point_id, unique
from .separate_moved import MovedBack
from .supersede import Superseder
from .write.drafts import Draft
from .write.enrichment import EnricherSlot, enrich_draft
from .write.placer import Placer


@dataclass
class SeparateResult:
    """What ``separate`` did."""

    #: the note the part was taken out of
    id: str
    #: the part asked for (a fold's ``triggered_by``, a merge's merged note)
    part: str
    #: the part's own note now (the part's id, unless another note holds it)
    note: str
    #: "fold" or "merge"
    joined_by: str
    #: whether the note's text no longer holds what the join appended (True also when it
    #: appended nothing); False: the text was kept whole, ``warnings`` says why
    text_restored: bool
    #: the list items taken out of the note (keywords, tags, subjects, topics)
    removed: dict[str, list[str]] = field(default_factory=dict)
    #: parts separated earlier whose sentences had to stay in the note's text (a later join
    #: held one of them) and came out now that this join is out
    also_taken_out: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the links of the part's own note now: a new note's are chosen as an add chooses them
    #: (written both ways); a merged note brought back keeps its own
    links: list[str] = field(default_factory=list)
    #: older notes the part's own note hides from now on: a new note is judged as an add is
    #: judged; a merged note gets back the marks the merge had handed to ``id``
    supersedes: list[str] = field(default_factory=list)
    #: notes whose link to the merged note the merge had pointed at ``id``: they link the
    #: merged note again
    relinked: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Separator:
    """Separates joined texts of one store's notes (see the module docstring)."""

    def __init__(self, index: NoteIndex, enricher: EnricherSlot, placer: Placer,
                 superseder: Superseder) -> None:
        self._index = index
        self._enricher = enricher
        #: the write path's: a text made a note again is linked as an add links a new note
        self._placer = placer
        #: and judged as an add judges one (``amem.supersede``)
        self._superseder = superseder
        #: what a merge moved to the survivor besides the text, moved back
        self._moved = MovedBack(index)

    def separate(self, note_id: Any, part: Any, agent: str) -> SeparateResult:
        """Take ``part`` out of ``note_id`` (a note of ``agent``); see the module docstring.

        Raises:
            NotFoundError: no live note ``note_id`` of this agent (another agent's note reads
                as missing).
            ValidationError: the note never received ``part``, or it was separated already
                (``field`` is ``part``).
        """
        index = self._index
        nid, pid = check_id(note_id), check_id(part, field="part")
        with index.lock:
            target, _ = index.load(nid, agent)
            join = find_join(target.id, target.evolution_history, pid)
            warnings: list[str] = []
            supersedes: list[str] = []
            own = self._resumed(target, join)
            if own is None and join.kind == "merge":
                own = self._revive(target, join)
            if own is None:
                own = self._recreate(target, join, warnings)
            else:  # a kill may have come before its back-links were all written
                settle_if_owed(self._index, own)
            revived = _revived(own, target, join)
            relinked: list[str] = []
            if revived:
                supersedes += self._moved.marks(target, own)
                relinked = self._moved.links(target, own, join, warnings)
            restored, removed, settled = self._leave(target, join, own.id, warnings)
            if not revived:
                supersedes += self._judge(own, warnings)
            links = self._index.load(own.id, own.agent_id)[0].links
        return SeparateResult(target.id, join.part, own.id, join.kind, restored, removed,
                              settled, warnings, links, supersedes, relinked)

    # ------------------------------------------------------------------ step 1: the part

    def _resumed(self, target: Note, join: Join) -> Note | None:
        """The part's note a separation killed before its second step already wrote."""
        digest = content_hash(join.text)
        where = Where(must=(Match("agent_id", target.agent_id), Match("is_active", True),
                            Match("hash", digest)))
        for hit in self._index.backend.iterate(where):
            note = Note.from_payload(hit.payload)
            if any(e.get("action") == SEPARATED_FROM and e.get("from") == target.id
                   and e.get("part") == join.part for e in note.evolution_history):
                return note
        return None

    def _revive(self, target: Note, join: Join) -> Note | None:
        """The merged note back as it was (None when its point no longer holds it: another
        note took its id since, and the text is made a note of its own instead)."""
        index, agent = self._index, target.agent_id
        hits = index.backend.retrieve([point_id(agent, join.part)])
        if not hits or hits[0].payload.get("agent_id") != agent:
            return None
        loser = Note.from_payload(hits[0].payload)
        if loser.id != join.part or loser.is_active or loser.merged_into != target.id:
            return None
        loser.is_active, loser.merged_into, loser.pending_merge = True, None, False
        loser.kept_apart = unique([*loser.kept_apart, target.id])
        loser.evolution_history = [*loser.evolution_history,
                                   {**self._from_entry(target, join), "revived": True}]
        # its text, terms and vector never changed: the payload alone brings it back, with
        # the heat it had at the merge (amem.joins.heat_back)
        heat = heat_back(join, target.retrieval_count, target.last_accessed)
        index.update_payload(loser.id, agent, {
            "is_active": True, "merged_into": None, "pending_merge": False,
            "kept_apart": loser.kept_apart, "evolution_history": loser.evolution_history,
            **(heat[1] if heat is not None else {})})
        return loser

    def _recreate(self, target: Note, join: Join, warnings: list[str]) -> Note:
        """A folded text (or a merged one whose note is gone) as a note of its own."""
        index, agent, entry = self._index, target.agent_id, join.entry
        now = now_iso(index.clock.now())
        free = not index.backend.retrieve([point_id(agent, join.part)])
        if not free:
            warnings.append(f"the id {join.part!r} is held by another note: the text became a "
                            "note of a new id")
        brought = entry.get("brought") if isinstance(entry.get("brought"), dict) else None
        timestamp = str(entry.get("timestamp") or entry.get("at") or now)
        note = Note(id=join.part if free else new_note_id(), content=join.text, agent_id=agent,
                    timestamp=timestamp, last_accessed=now, hash=content_hash(join.text),
                    event_time=str(entry.get("event_time") or target.event_time or timestamp),
                    metadata=dict(entry.get("metadata") or {}), expires_at=target.expires_at,
                    note_type=target.note_type,
                    subjects=list((brought or {}).get("subjects") or ()),
                    kept_apart=[target.id])
        if brought is None:
            warnings.append("the fold was recorded before its text's subjects, labels and "
                            "times were: the note has no subjects or labels, and the fold's "
                            "time as its own")
        heat = heat_back(join, target.retrieval_count, target.last_accessed)
        if heat is not None:  # a merged note whose point is gone: the heat it had
            note.retrieval_count = int(heat[1]["retrieval_count"])
            note.last_accessed = str(heat[1]["last_accessed"]) or now
        given = {name: list((brought or {}).get(name) or ()) for name in ("keywords", "tags")}
        note.keywords, note.tags = given["keywords"], given["tags"]
        warnings.extend(enrich_draft(self._enricher, Draft(
            note, enrich=True, given_enrichment=bool(given["keywords"] or given["tags"]))))
        note.evolution_history = [{**self._from_entry(target, join), "revived": False}]
        vector = index.embed_passages([note.embed_text()])[0]
        # linked as an add links a new note (the write path's candidates and rule, or the
        # LLM's verdicts), written before its back-links and owing them until they are: a
        # kill between leaves the mark the next write finishes (``amem.backlinks``). Linked
        # notes are not evolved: the text is not news to the store, it was in ``target``.
        stale: set[str] = set()
        self._placer.store_linked(note, vector, self._placer.nearest(note, vector), stale,
                                  warnings, embeds_text=True, evolve=False)
        return note

    def _judge(self, own: Note, warnings: list[str]) -> list[str]:
        """A text made a note again is judged as an add judges a new note: the older facts its
        change replaces are hidden behind it (``amem.supersede``). After ``_leave``, so that
        the note it left is judged by its own text (it no longer holds this one). A kill
        before this step leaves the note unjudged: the nightly sweep judges every current
        note that states a change, which is every note the judgement could mark."""
        note, vector = self._index.load(own.id, own.agent_id, with_vector=True)
        if vector is None:
            warnings.append(f"note {own.id!r} has no vector yet: it was not judged against "
                            "older facts (the nightly sweep judges it)")
            return []
        outcome = self._superseder.check(note, vector)
        warnings.extend(outcome.warnings)
        return list(outcome.superseded)

    def _from_entry(self, target: Note, join: Join) -> dict[str, Any]:
        return {"action": SEPARATED_FROM, "at": now_iso(self._index.clock.now()),
                "from": target.id, "part": join.part, "joined_by": join.kind}

    # ------------------------------------------------------------------ step 2: the note

    def _leave(self, target: Note, join: Join, own_id: str,
               warnings: list[str]) -> tuple[bool, dict[str, list[str]], list[str]]:
        """Take what the join put into ``target`` out of it, written as one field update;
        whether its text was restored, the list items removed, and the parts separated
        earlier whose paragraphs came out of the text only now."""
        index = self._index
        terms_were, embedded = len(note_terms_of(target)), target.embed_text()
        content, why = text_without(join, target.content, target.evolution_history)
        if why is not None:
            warnings.append(why)
        # with this join out, a paragraph an earlier separation had to leave may come out now
        # (``separated`` is already recorded for this part when ``settle_left`` reads history)
        entry: dict[str, Any] = {
            "action": SEPARATED, "at": now_iso(index.clock.now()), "part": join.part,
            "into": own_id, "joined_by": join.kind, "hash": content_hash(join.text),
            "text": "restored" if why is None else "kept"}
        content, settled = settle_left(content, [*target.evolution_history, entry])
        if settled:
            entry["also_taken_out"] = settled
        later = [j for j in joined(target.evolution_history) if j.position > join.position]
        removed = lists_without({name: getattr(target, name) for name in LISTS}, join, later)
        for name, items in removed.items():
            setattr(target, name, [v for v in getattr(target, name) if v not in items])
        if content != target.content:
            target.content, target.hash = content, content_hash(content)
        extra = self._own_back(target, join, later)
        extra.update(self._moved.survivor(target, join, warnings))
        if "added" not in join.entry:
            warnings.append("the join was recorded before the keywords, subjects and topics it "
                            "added were: the note keeps those (the tags it added are taken out)")
        gone = {content_hash(join.text), *self._part_hashes(target, join)}
        held = {content_hash(j.text) for j in later}
        target.folded_hashes = [h for h in target.folded_hashes if h not in gone - held]
        target.kept_apart = unique([*target.kept_apart, own_id])
        entry["removed"] = removed
        target.evolution_history = [*target.evolution_history, entry]
        changes: dict[str, Any] = {name: getattr(target, name) for name in (
            "content", "hash", "folded_hashes", "kept_apart", "evolution_history", "supersedes",
            *LISTS)}
        changes.update(extra)
        vector = None
        if target.embed_text() != embedded:
            vector = index.embed_passages([target.embed_text()])[0]
            changes[STALE_FIELD] = True  # the vector is the second engine write: see below
        if not index.update_note_fields(target.id, target.agent_id, changes, dense=vector,
                                        terms_of=target, terms_were=terms_were):
            raise ValidationError(f"note {target.id!r} changed while it was separated",
                                  field="id")
        if vector is not None:  # payload and vector are two engine writes: mark, then clear
            index.update_note_fields(target.id, target.agent_id, {STALE_FIELD: False})
        return why is None, removed, settled

    @staticmethod
    def _own_back(target: Note, join: Join, later: Sequence[Join]) -> dict[str, Any]:
        """A merge's survivor gets back the write time, labels, context and enrichment mark the
        merge took from the loser or its model (``target`` changed in place), while no later
        join may have changed them too; the changed fields, with the index fields derived
        from them."""
        entry = join.entry
        if join.kind != "merge" or later:
            return {}
        changes: dict[str, Any] = {}
        if isinstance(entry.get("old_timestamp"), str):
            target.timestamp = changes["timestamp"] = entry["old_timestamp"]
        if isinstance(entry.get("old_metadata"), dict):
            target.metadata = changes["metadata"] = dict(entry["old_metadata"])
        if isinstance(entry.get("old_context"), str) and target.context == entry.get("new_context"):
            target.context = changes["context"] = entry["old_context"]
        if isinstance(entry.get("old_enriched_by"), str):
            target.enriched_by = changes["enriched_by"] = entry["old_enriched_by"]
        if changes:
            changes.update(index_fields(target.event_time or target.timestamp,
                                        target.expires_at, target.metadata))
        return changes

    def _part_hashes(self, target: Note, join: Join) -> Sequence[str]:
        """The hashes a merge moved from the merged note into ``target`` (its own and those
        folded into it): they go back with it."""
        if join.kind != "merge":
            return ()
        hits = self._index.backend.retrieve([point_id(target.agent_id, join.part)])
        if not hits or hits[0].payload.get("agent_id") != target.agent_id:
            return ()
        loser = Note.from_payload(hits[0].payload)
        return [loser.hash, *loser.folded_hashes] if loser.id == join.part else ()


def _revived(own: Note, target: Note, join: Join) -> bool:
    """Whether ``own`` is the merged note brought back (not a note made of the text): its
    record says so (``_revive``); a record from before that was written said nothing, and a
    merge's part of the same id is then the note brought back, as it was read then."""
    for entry in reversed(own.evolution_history):
        if entry.get("action") == SEPARATED_FROM and entry.get("from") == target.id \
                and entry.get("part") == join.part:
            if "revived" in entry:
                return bool(entry["revived"])
            break
    return join.kind == "merge" and own.id == join.part


__all__ = ["SeparateResult", "Separator"]
