"""Marks that heal: find every mark that hides a fact for no live reason, and repair it.

A mark is sound when its successor is a live note of the agent that lists the older note in
its ``supersedes`` and has not been edited since it was judged. ``audit`` reports each one
that is not (and each list entry no mark backs); ``heal`` releases the older fact (an
edited successor is judged again and keeps the mark only on a yes) and drops the entries.
``amem doctor`` shows the audit, ``amem doctor --fix`` and the nightly job heal.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

import numpy as np

from ..backends.base import Condition, IsEmpty, MatchAny, Where
from ..index import NoteIndex
from ..notefields import is_expired
from ..notes import Note, point_id
from .judges import SupersedeJudge
from .marks import unmark
from .rule import view

#: the kinds of problem, each with what a reader sees until it is healed
KINDS = {
    "successor_missing": "hidden behind a note that does not exist",
    "successor_deleted": "hidden behind a deleted or merged note (search shows it already)",
    "successor_expired": "hidden behind an expired note (search shows it already)",
    "orphan_mark": "hidden behind a note that does not list it (an interrupted write)",
    "edited_since": "hidden behind a note edited after it was judged",
    "unbacked_entry": "listed as replaced, but not hidden (an interrupted write; harmless)",
}


@dataclass(frozen=True)
class MarkProblem:
    """One unsound mark (``older`` hidden ``by``) or list entry (``by`` lists ``older``)."""

    kind: str
    agent_id: str
    older: str
    by: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "meaning": KINDS[self.kind]}


def _edited_after_mark(successor: Note, older: Note) -> bool:
    """Was ``successor``'s text changed after it hid ``older`` (an edit whose new judgement
    never ran)? Times are the store's ISO stamps, which sort as text."""
    marked = [str(e.get("at", "")) for e in older.evolution_history
              if e.get("action") == "superseded" and e.get("by") == successor.id]
    edits = [str(e.get("at", "")) for e in successor.evolution_history
             if e.get("action") == "update" and "old_content" in e]
    return bool(marked and edits) and max(edits) > max(marked)


def audit(index: NoteIndex, agent_ids: Sequence[str] | None = None) -> list[MarkProblem]:
    """Every unsound mark and unbacked entry of ``agent_ids`` (every agent when None)."""
    notes = _involved(index, agent_ids)
    now = index.clock.now()
    problems: list[MarkProblem] = []
    for (agent, nid), note in sorted(notes.items()):
        if note.superseded_by is not None and note.is_active:
            by = note.superseded_by
            successor = notes.get((agent, by))
            if successor is None:
                kind = "successor_missing"
            elif not successor.is_active:
                kind = "successor_deleted"
            elif is_expired(successor.expires_at, now):
                kind = "successor_expired"
            elif nid not in successor.supersedes:
                kind = "orphan_mark"
            elif _edited_after_mark(successor, note):
                kind = "edited_since"
            else:
                kind = ""
            if kind:
                problems.append(MarkProblem(kind, agent, nid, by))
        for older in note.supersedes:
            target = notes.get((agent, older))
            if target is None or target.superseded_by != nid:
                problems.append(MarkProblem("unbacked_entry", agent, older, nid))
    return problems


def _involved(index: NoteIndex, agent_ids: Sequence[str] | None
              ) -> dict[tuple[str, str], Note]:
    """The notes that carry a mark or a list (two indexed reads: the rest of a store has
    nothing to audit), and the notes they name."""
    must: tuple[Condition, ...] = (() if agent_ids is None
                                   else (MatchAny("agent_id", tuple(sorted(set(agent_ids)))),))
    where = Where(must=must, should=(Where(must_not=(IsEmpty("superseded_by"),)),
                                     Where(must_not=(IsEmpty("supersedes"),))))
    notes = {(n.agent_id, n.id): n for n in (Note.from_payload(h.payload)
                                             for h in index.backend.iterate(where))}
    named = sorted({(a, other) for (a, _), n in notes.items()
                    for other in (n.superseded_by, *n.supersedes) if other} - set(notes))
    for hit in index.backend.retrieve([point_id(a, nid) for a, nid in named]):
        note = Note.from_payload(hit.payload)
        notes[(note.agent_id, note.id)] = note
    return notes


def heal(index: NoteIndex, problems: Sequence[MarkProblem],
         judge: SupersedeJudge) -> list[str]:
    """Repair what ``audit`` found (write lock held by the caller); the older notes shown
    again. Releases come before list edits: a kill in between leaves nothing hidden."""
    freed: list[str] = []
    for p in problems:
        if p.kind == "unbacked_entry":
            continue
        if p.kind == "edited_since" and _still_replaces(index, p, judge):
            continue
        if unmark(index, p.agent_id, p.older, by=p.by, reason=p.kind):
            freed.append(p.older)
    for p in problems:
        if p.kind != "unbacked_entry":
            continue
        hits = index.backend.retrieve([point_id(p.agent_id, p.by)])
        if hits and hits[0].payload.get("agent_id") == p.agent_id:
            listed = list(hits[0].payload.get("supersedes") or [])
            if p.older in listed:
                index.update_payload(p.by, p.agent_id,
                                     {"supersedes": [n for n in listed if n != p.older]})
    return freed


def _still_replaces(index: NoteIndex, p: MarkProblem, judge: SupersedeJudge) -> bool:
    """The edited successor judged again against the older note (with their similarity)."""
    try:
        new, nvec = index.load(p.by, p.agent_id, with_vector=True)
        old, ovec = index.load(p.older, p.agent_id, with_vector=True)
    except Exception:  # noqa: BLE001 - either gone: the mark cannot stand
        return False
    similarity = (index.similarity(float(np.dot(nvec, ovec)))
                  if nvec is not None and ovec is not None else None)
    return p.older in judge.judge(view(new), [replace(view(old), similarity=similarity)]).ids


__all__ = ["KINDS", "MarkProblem", "audit", "heal"]
