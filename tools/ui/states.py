"""A note's state in words, for every page that shows a note (table, note page, graph).

The fields alone (``is_active False``, an ``expires_at`` in the past, ``partly_superseded_by``)
left a reader to work out what a note is; a deleted or expired note looked current. One
function names the state, as the CLI's warning on write does, so no page tells it differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from amem.errors import ValidationError
from amem.notefields import parse_time
from amem.notes import Note

from .html import Html, esc, link, url

#: the kinds of state, in the order the graph's legend lists them
KINDS = ("current", "partly superseded", "superseded", "expired", "merged", "deleted")


@dataclass(frozen=True)
class NoteState:
    """``kind`` (one of :data:`KINDS`), the words a page shows, and the note they name
    (the newer note, the merge survivor), if any."""

    kind: str
    words: str
    other: str | None = None

    def html(self, agent: str) -> Html:
        """The words, with the note they name as a link to it."""
        if not self.other or self.other not in self.words:
            return esc(self.words)
        head, tail = self.words.split(self.other, 1)
        return Html(esc(head) + link(url(f"note/{self.other}", agent=agent), self.other) + esc(tail))


def expired_at(note: Note | dict[str, Any], now: datetime) -> str | None:
    """The time ``note`` expired (``None``: it has not, or never will)."""
    raw = note.expires_at if isinstance(note, Note) else str(note.get("expires_at") or "")
    if not raw:
        return None
    try:
        return raw if parse_time(raw, field="expires_at") <= now else None
    except ValidationError:  # an unreadable stored time: shown raw in the fields, not a state
        return None


def state_of(note: Note, now: datetime) -> NoteState:
    """What ``note`` is at ``now``: gone (merged, deleted) before expired, expired before
    replaced, since each earlier one hides the note whatever the later says."""
    if not note.is_active:
        if note.merged_into:
            return NoteState("merged", f"merged into {note.merged_into} by consolidation",
                             note.merged_into)
        return NoteState("deleted", "deleted")
    gone = expired_at(note, now)
    if gone:
        return NoteState("expired", f"expired at {gone[:19]}")
    if note.superseded_by:
        return NoteState("superseded", f"superseded by {note.superseded_by}", note.superseded_by)
    if note.partly_superseded_by:
        by = note.partly_superseded_by
        kept = [str(k) for e in note.evolution_history
                if e.get("action") == "partly_superseded" and e.get("by") == by
                for k in e.get("kept") or []]
        keeps = f", keeping {'; '.join(repr(k) for k in kept)}" if kept else ""
        return NoteState("partly superseded", f"partly superseded by {by}{keeps}", by)
    if note.expires_at:
        return NoteState("current", f"current, expires at {note.expires_at[:19]}")
    return NoteState("current", "current")


__all__ = ["KINDS", "NoteState", "expired_at", "state_of"]
