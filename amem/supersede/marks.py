"""Supersession marks in the store: judge a written note's candidates, mark, release, sweep.

A yes marks the older note ``superseded_by = <new id>`` and the new one ``supersedes``, each
with an ``evolution_history`` entry. The older notes are marked first: a kill in between
leaves the older note marked and the new one without its ``supersedes`` list, which changes
no search result. Every function runs under the store's write lock (its caller holds it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Sequence

import numpy as np

from ..backends.base import IsEmpty, Where
from ..index import NoteIndex
from ..notes import Note, now_iso, unique
from .judges import OFFLINE, SupersedeJudge
from .rule import FactView, change_marker, same_subject, view

#: nearest notes put to the judge per written note
CANDIDATES = 8
#: note similarity below which an older note is not put to the judge at all (either judge):
#: a note about something else is no candidate, whatever words the two share
CANDIDATE_FLOOR = 0.0

def history_order(items: Sequence[tuple[str, str | None]]) -> list[int]:
    """Positions of ``(note id, superseded_by)`` items, best first, reordered so that a
    superseded note follows the note that replaced it (and its chain) when both are there;
    one whose successor is absent keeps its place. Pure: search applies it to its ranking."""
    present = {nid: i for i, (nid, _) in enumerate(items)}
    followers: dict[str, list[int]] = {}
    for i, (_, by) in enumerate(items):
        if by is not None and by in present and by != items[i][0]:
            followers.setdefault(by, []).append(i)
    out: list[int] = []
    placed: set[int] = set()

    def place(i: int) -> None:
        if i in placed:
            return
        placed.add(i)
        out.append(i)
        for j in followers.get(items[i][0], []):
            place(j)

    for i, (_, by) in enumerate(items):
        if by is None or by not in present or by == items[i][0]:
            place(i)
    for i in range(len(items)):  # a cycle of marks (cannot be written, but never lose a hit)
        place(i)
    return out


@dataclass
class Outcome:
    """What one check did: the notes newly marked, and warnings."""

    superseded: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    decided_by: str = OFFLINE
    warnings: list[str] = field(default_factory=list)


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
    """The nearest current notes of the agent that share a subject and are not newer."""
    where = Where(must=(*index.tenant_filter(note.agent_id), IsEmpty("superseded_by")))
    hits = index.backend.dense_search(np.asarray(vector, dtype=np.float32), where, CANDIDATES + 1)
    mine = view(note)
    out = []
    for hit in hits:
        similarity = index.similarity(hit.score)
        if similarity < CANDIDATE_FLOOR:
            break  # nearest first: the rest are further still
        other = replace(view(hit.payload), similarity=similarity)
        if other.id == note.id or other.id in note.supersedes:
            continue
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


def check(index: NoteIndex, note: Note, vector: np.ndarray, judge: SupersedeJudge,
          *, recheck: bool = False) -> Outcome:
    """Judge ``note`` against its candidates and mark what it replaces (write lock held).

    ``recheck`` (an edited note) also puts the notes it already supersedes back to the judge
    and releases those it no longer replaces.
    """
    pool = candidates(index, note, vector)
    previous: list[FactView] = []
    if recheck and note.supersedes:
        for nid in note.supersedes:
            try:
                prev, _ = index.load(nid, note.agent_id)
            except Exception:  # noqa: BLE001 - a note gone since: nothing to release
                continue
            if prev.superseded_by == note.id:
                previous.append(view(prev))
    if not pool and not previous:
        return Outcome(decided_by=judge.label)
    verdict = judge.judge(view(note), [*previous, *pool])
    chosen = set(verdict.ids)
    outcome = Outcome(decided_by=verdict.decided_by, warnings=list(verdict.warnings))
    at = now_iso(index.clock.now())
    for old in pool:
        if old.id in chosen and _mark(index, note, old.id, at, verdict.decided_by):
            outcome.superseded.append(old.id)
    for old in previous:
        if old.id not in chosen:
            index.update_payload(old.id, note.agent_id, {"superseded_by": None})
            outcome.released.append(old.id)
    if outcome.superseded or outcome.released:
        kept = [n for n in note.supersedes if n not in outcome.released]
        note.supersedes = unique([*kept, *outcome.superseded])
        if outcome.superseded:
            note.evolution_history = [*note.evolution_history, {
                "action": "supersedes", "at": at, "ids": list(outcome.superseded),
                "decided_by": verdict.decided_by}]
        index.update_payload(note.id, note.agent_id, {
            "supersedes": note.supersedes, "evolution_history": note.evolution_history})
    return outcome


def _mark(index: NoteIndex, new: Note, old_id: str, at: str, decided_by: str) -> bool:
    try:
        old, _ = index.load(old_id, new.agent_id)
    except Exception:  # noqa: BLE001 - deleted since the search: nothing to mark
        return False
    history = [*old.evolution_history, {"action": "superseded", "at": at, "by": new.id,
                                        "decided_by": decided_by}]
    return index.update_note_fields(old_id, new.agent_id, {
        "superseded_by": new.id, "evolution_history": history})


def release(index: NoteIndex, note: Note) -> list[str]:
    """A deleted note's older facts become current again (their ``superseded_by`` cleared)."""
    freed = []
    for nid in note.supersedes:
        try:
            old, _ = index.load(nid, note.agent_id)
        except Exception:  # noqa: BLE001 - gone as well
            continue
        if old.superseded_by == note.id:
            index.update_payload(nid, note.agent_id, {"superseded_by": None})
            freed.append(nid)
    return freed


def sweep(index: NoteIndex, agent_id: str, judge: SupersedeJudge) -> Outcome:
    """The nightly pass: every current note that states a change is checked again.

    Only notes with a change phrase are judged (the rule needs one; for an LLM it bounds the
    calls a night costs), oldest first, so a chain A -> B -> C ends with C current.
    """
    total = Outcome(decided_by=judge.label)
    where = Where(must=(*index.tenant_filter(agent_id), IsEmpty("superseded_by")))
    todo = [(Note.from_payload(h.payload), h.dense)
            for h in index.backend.iterate(where, with_vectors=True)
            if change_marker(str(h.payload.get("content", "")))]
    todo.sort(key=lambda nv: (nv[0].timestamp, nv[0].id))
    for note, vector in todo:
        if vector is None:
            continue
        done = check(index, note, vector, judge)
        total.superseded.extend(done.superseded)
        total.warnings.extend(done.warnings)
    return total


class Superseder:
    """The supersession step of one store, with its judge (the LLM's or the offline rule)."""

    def __init__(self, index: NoteIndex, judge: SupersedeJudge) -> None:
        self._index = index
        self.judge = judge

    def check(self, note: Note, vector: np.ndarray, *, recheck: bool = False) -> Outcome:
        """``check`` of a written (or, with ``recheck``, edited) note."""
        return check(self._index, note, vector, self.judge, recheck=recheck)

    def release(self, note: Note) -> list[str]:
        """``release`` of a deleted note."""
        return release(self._index, note)

    def sweep(self, agent_id: str) -> Outcome:
        """``sweep`` of one agent (the nightly pass)."""
        return sweep(self._index, agent_id, self.judge)


__all__ = ["CANDIDATES", "CANDIDATE_FLOOR", "IndexMeaning", "Outcome", "Superseder", "candidates", "check", "history_order",
           "release", "sweep"]
