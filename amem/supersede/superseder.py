"""``Superseder``: the supersession step of one store, and the nightly sweep it runs."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..backends.base import Where
from ..index import NoteIndex
from ..notes import Note
from .heal import MarkProblem, audit, heal
from .history import chain
from .judges import SupersedeJudge
from .marks import Outcome, check, keep, release
from .rule import change_marker


def sweep(index: NoteIndex, agent_id: str, judge: SupersedeJudge) -> Outcome:
    """The nightly pass: the agent's marks healed first (``heal``), then every current note
    that states a change is checked again.

    Only notes with a change phrase are judged (the rule needs one; for an LLM it bounds the
    calls a night costs), oldest first, so a chain A -> B -> C ends with C current.
    """
    total = Outcome(decided_by=judge.label)
    total.released.extend(heal(index, audit(index, [agent_id]), judge))
    where = Where(must=tuple(index.tenant_filter(agent_id, current=True)))
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

    def check(self, note: Note, vector: np.ndarray) -> Outcome:
        """``check`` of a written (or edited, once released) note."""
        return check(self._index, note, vector, self.judge)

    def release(self, note: Note, *, reason: str) -> list[str]:
        """``release`` of a note that is deleted or about to change."""
        return release(self._index, note, reason=reason)

    def sweep(self, agent_id: str) -> Outcome:
        """``sweep`` of one agent (the nightly pass)."""
        return sweep(self._index, agent_id, self.judge)

    def audit(self, agent_ids: Sequence[str] | None = None) -> list[MarkProblem]:
        """``audit`` of some agents, or of all."""
        return audit(self._index, agent_ids)

    def heal(self, problems: Sequence[MarkProblem]) -> list[str]:
        """``heal`` of what ``audit`` found (under the store's write lock); the older notes
        shown again."""
        with self._index.lock:
            return heal(self._index, problems, self.judge)

    def keep(self, agent: str, old_id: str) -> str:
        """``keep`` (``amem unsupersede``, under the write lock): the id of the note that hid
        ``old_id``."""
        with self._index.lock:
            return keep(self._index, agent, old_id)

    def chain(self, agent: str, note_id: str) -> list[dict[str, Any]]:
        """``chain`` (``amem history``)."""
        return chain(self._index, agent, note_id)


__all__ = ["Superseder", "sweep"]
