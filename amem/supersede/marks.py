"""Supersession marks in the store: judge a written note's candidates, mark, release, heal.

A yes marks the older note ``superseded_by = <new id>`` and the new one ``supersedes``, each
with an ``evolution_history`` entry. Every write of ``superseded_by`` goes through ``mark``
or ``unmark``, and the writes are ordered so that a process killed between any two of them
leaves every true fact visible (a miss, never a false hide):

* **judging** (an add, an edit, the nightly sweep): the new note's ``supersedes`` list is
  written first (the intent), then each older note's mark. A kill in between leaves an entry
  nothing backs, which hides nothing; ``audit`` reports it and ``heal`` drops it;
* **an edit** releases every older note the note had replaced before its text changes, then
  judges the new text afresh: a kill leaves the older facts visible, never hidden by a text
  that no longer replaces them (``amem.write.update``);
* **a delete** releases first, then deactivates the note with its ``supersedes`` cleared in
  the same write (``MemoryStore.delete``); an expiry sweep releases before it removes
  (``amem.purge``); ``release`` finds the older notes by their mark (the engine's index on
  ``superseded_by``), not only by the newer note's list, so an orphan mark is freed too.

Search (``amem.search.filters``) treats a mark whose successor is expired, or deleted with a
``supersedes`` list left by an interrupted write, as released at once. ``audit`` finds every
mark that hides a fact for no live reason (successor missing, deleted, expired, not listing
it, or edited since without a new judgement) and every list entry nothing backs; ``heal``
repairs them (``amem doctor --fix``, and the nightly job before its sweep). ``keep``
(``amem unsupersede``) releases one fact and remembers the pair (``kept_against``), so no
judge hides it behind that note again. Every function runs under the store's write lock
(its caller holds it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Sequence

import numpy as np

from ..backends.base import Match, Where
from ..errors import NotFoundError, ValidationError
from ..index import NoteIndex
from ..notes import Note, now_iso, point_id, unique
# the orders search reads marks in are ranking maths (amem.ranking); named here too
from ..ranking import changed_in_part_order, history_order
from .judges import OFFLINE, SupersedeJudge
from .rule import FactView, same_subject, view

#: nearest notes put to the judge per written note
CANDIDATES = 8
#: note similarity below which an older note is not put to the judge at all (either judge):
#: a note about something else is no candidate, whatever words the two share
CANDIDATE_FLOOR = 0.0

@dataclass
class Outcome:
    """What one check did: the notes newly marked, and warnings."""

    superseded: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    decided_by: str = OFFLINE
    warnings: list[str] = field(default_factory=list)
    #: older notes changed in part: still shown, listed after the new note (id -> the
    #: clauses left standing)
    partly: dict[str, list[str]] = field(default_factory=dict)


def _not_newer(old: str, new: str) -> bool:
    """``old`` is not after ``new`` (undated or unreadable times do not block)."""
    try:
        a, b = datetime.fromisoformat(old), datetime.fromisoformat(new)
    except ValueError:
        return True
    a = a if a.tzinfo else a.replace(tzinfo=timezone.utc)
    b = b if b.tzinfo else b.replace(tzinfo=timezone.utc)
    return a <= b


def candidates(index: NoteIndex, note: Note, vector: np.ndarray) -> list[FactView]:
    """The nearest current notes of the agent that share a subject and are not newer, at or
    above ``CANDIDATE_FLOOR`` on the note-to-note scale (each with that similarity), and not
    kept current against ``note`` by a person (``keep``)."""
    query = np.asarray(vector, dtype=np.float32)
    hits = index.read_tenant(note.agent_id, lambda where: index.backend.dense_search(
        query, where, CANDIDATES + 1), current=True)
    mine = view(note)
    out = []
    for hit in hits:
        similarity = index.similarity(hit.score)
        if similarity < CANDIDATE_FLOOR:
            break  # nearest first: the rest are further still
        other = replace(view(hit.payload), similarity=similarity)
        if other.id == note.id or other.id in note.supersedes \
                or note.id in (hit.payload.get("kept_against") or []):
            continue  # itself, already replaced, or kept current against it by a person
        if same_subject(mine, other) and _not_newer(other.timestamp, note.timestamp):
            out.append(other)
    return out[:CANDIDATES]


class IndexMeaning:
    """``Meaning`` by the store's embedder and its note-to-note scale (``amem.similarity``)."""

    def __init__(self, index: NoteIndex) -> None:
        self._index = index

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        vectors = self._index.embed_passages([text, *others])
        return [self._index.similarity(float(np.dot(vectors[0], v))) for v in vectors[1:]]


def check(index: NoteIndex, note: Note, vector: np.ndarray, judge: SupersedeJudge) -> Outcome:
    """Judge ``note`` against its candidates and mark what it replaces (write lock held):
    the note's ``supersedes`` first, then each older note's mark (see the module docstring)."""
    pool = candidates(index, note, vector)
    if not pool:
        return Outcome(decided_by=judge.label)
    verdict = judge.judge(view(note), pool)
    chosen = [o.id for o in pool if o.id in set(verdict.ids)]
    outcome = Outcome(decided_by=verdict.decided_by, warnings=list(verdict.warnings))
    for old_id, kept in verdict.partly.items():
        if mark_partly(index, note.agent_id, old_id, note.id, kept,
                       at=now_iso(index.clock.now()), decided_by=verdict.decided_by):
            outcome.partly[old_id] = kept
            told = "; ".join(f"{c[:80]!r}" for c in kept[:3])
            outcome.warnings.append(
                f"changes part of {old_id}, which stays in search, listed after this note, for "
                f"what else it holds: {told}")
    if not chosen:
        return outcome
    at = now_iso(index.clock.now())
    note.supersedes = unique([*note.supersedes, *chosen])
    note.evolution_history = [*note.evolution_history, {
        "action": "supersedes", "at": at, "ids": list(chosen),
        "decided_by": verdict.decided_by}]
    if not index.update_note_fields(note.id, note.agent_id, {
            "supersedes": note.supersedes, "evolution_history": note.evolution_history}):
        return outcome  # the new note went meanwhile: mark nothing
    for old_id in chosen:
        if mark(index, note.agent_id, old_id, note.id, at=at, decided_by=verdict.decided_by):
            outcome.superseded.append(old_id)
    missed = [o for o in chosen if o not in outcome.superseded]
    if missed:  # gone since the search: the intent names nothing
        note.supersedes = [n for n in note.supersedes if n not in missed]
        index.update_note_fields(note.id, note.agent_id, {"supersedes": note.supersedes})
    return outcome


def mark(index: NoteIndex, agent: str, old_id: str, by: str, *, at: str,
         decided_by: str) -> bool:
    """The one write that hides a fact: ``old_id`` is superseded by ``by`` (False when the
    older note is gone, or was kept current against ``by``)."""
    try:
        old, _ = index.load(old_id, agent)
    except NotFoundError:
        return False
    if by in old.kept_against:
        return False
    history = [*old.evolution_history, {"action": "superseded", "at": at, "by": by,
                                        "decided_by": decided_by}]
    return index.update_note_fields(old_id, agent, {
        "superseded_by": by, "evolution_history": history})


def mark_partly(index: NoteIndex, agent: str, old_id: str, by: str, kept: list[str], *,
                at: str, decided_by: str) -> bool:
    """``old_id`` changed in part by ``by``: it stays shown (its other facts hold), and search
    lists it after ``by`` (``partly_superseded_by``). Written once a pair: the nightly sweep
    judges the same pair again. False when the older note is gone or already points at
    ``by``."""
    try:
        old, _ = index.load(old_id, agent)
    except NotFoundError:
        return False
    if old.partly_superseded_by == by or by in old.kept_against:
        return False
    history = [*old.evolution_history, {"action": "partly_superseded", "at": at, "by": by,
                                        "kept": list(kept), "decided_by": decided_by}]
    return index.update_note_fields(old_id, agent, {
        "partly_superseded_by": by, "evolution_history": history})


def unmark(index: NoteIndex, agent: str, old_id: str, *, by: str | None, reason: str,
           keep: bool = False) -> bool:
    """The one write that shows a fact again: ``old_id``'s mark cleared, when it names ``by``
    (any mark when ``by`` is None), with a ``released`` history entry saying why; ``keep``
    also remembers the pair so no judge marks it again. False when there was nothing to do."""
    hits = index.backend.retrieve([point_id(agent, old_id)])
    if not hits or hits[0].payload.get("agent_id") != agent:
        return False
    old = Note.from_payload(hits[0].payload)
    if old.superseded_by is None or (by is not None and old.superseded_by != by):
        return False
    entry = {"action": "released", "at": now_iso(index.clock.now()), "by": old.superseded_by,
             "reason": reason}
    changes: dict[str, object] = {"superseded_by": None,
                                  "evolution_history": [*old.evolution_history, entry]}
    if keep:
        changes["kept_against"] = unique([*old.kept_against, old.superseded_by])
    return index.update_payload(old_id, agent, changes)


def release(index: NoteIndex, note: Note, *, reason: str) -> list[str]:
    """Every older note ``note`` hides is current again (its list, and any mark naming it:
    an orphan mark left by an interrupted write is found by the engine's index); then the
    note's ``supersedes`` is emptied. The order keeps a kill harmless: marks first."""
    older = set(note.supersedes)
    where = Where(must=(Match("agent_id", note.agent_id), Match("superseded_by", note.id)))
    older.update(str(h.payload.get("id")) for h in index.backend.iterate(where))
    freed = [nid for nid in sorted(older)
             if unmark(index, note.agent_id, nid, by=note.id, reason=reason)]
    if note.supersedes:
        note.supersedes = []
        index.update_payload(note.id, note.agent_id, {"supersedes": []})
    return freed


def keep(index: NoteIndex, agent: str, old_id: str) -> str:
    """``amem unsupersede``: ``old_id`` is current again and stays so against the note that
    hid it; that note's list forgets it. The id of that note (``ValidationError`` when
    ``old_id`` is not superseded; ``NotFoundError`` when it does not exist)."""
    old, _ = index.load(old_id, agent, include_inactive=True)
    if old.superseded_by is None:
        raise ValidationError(f"note {old_id!r} is not superseded: nothing to undo", field="id")
    by = old.superseded_by
    unmark(index, agent, old_id, by=by, reason="kept by a person", keep=True)
    hits = index.backend.retrieve([point_id(agent, by)])
    if hits and hits[0].payload.get("agent_id") == agent:
        listed = list(hits[0].payload.get("supersedes") or [])
        if old_id in listed:
            index.update_payload(by, agent, {"supersedes": [n for n in listed if n != old_id]})
    return by


__all__ = ["CANDIDATES", "CANDIDATE_FLOOR", "IndexMeaning", "Outcome", "candidates", "check",
           "changed_in_part_order", "history_order", "keep", "mark", "mark_partly", "release",
           "unmark"]
