"""Exact dedup of a batch by content hash, and the note ids a new note may not take.

A text whose hash is a stored note's own or one folded into it is that note; a repeat inside
the batch is its first occurrence; an id held by an active note, or by a point that holds
another note, is refused (that point is never overwritten). One engine query per agent
finds every hash of the batch, one retrieve its ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from ..backends.base import Match, MatchAny, VectorBackend, Where
from ..notefields import not_expired
from ..notes import Note, point_id


@dataclass(frozen=True)
class Known:
    """What dedup says about one new note: ``deduplicated`` (into ``id``) or ``rejected``."""

    status: str
    id: str
    enriched_by: str = "none"
    warning: str | None = None


def exact_duplicates(backend: VectorBackend, notes: Sequence[Note],
                     now: datetime | None = None) -> list[Known | None]:
    """For each new note, in order: what it duplicates or why it is refused (None: new).

    With ``now``, a note expired by then is no duplicate (it is invisible, and swept soon).
    """
    out: list[Known | None] = [None] * len(notes)
    by_agent: dict[str, list[int]] = {}
    for i, note in enumerate(notes):
        by_agent.setdefault(note.agent_id, []).append(i)
    for agent, rows in by_agent.items():
        hashes = tuple({notes[i].hash for i in rows})
        visible = (not_expired(now),) if now is not None else ()
        where = Where(must=(Match("agent_id", agent), Match("is_active", True), *visible),
                      should=(MatchAny("hash", hashes), MatchAny("folded_hashes", hashes)))
        stored: dict[str, Note] = {}
        for hit in backend.iterate(where):
            note = Note.from_payload(hit.payload)
            for digest in (note.hash, *note.folded_hashes):
                stored.setdefault(digest, note)
        points = {h.id: h.payload for h in backend.retrieve(
            [point_id(agent, notes[i].id) for i in rows])}
        # a deleted note of the same id may be replaced; anything else holding the point not
        taken = {notes[i].id for i in rows
                 if (payload := points.get(point_id(agent, notes[i].id))) is not None
                 and (payload.get("is_active", True) or payload.get("agent_id") != agent
                      or payload.get("id") != notes[i].id)}
        first: dict[str, int] = {}
        for i in rows:
            note = notes[i]
            if note.hash in stored:
                out[i] = Known("deduplicated", stored[note.hash].id,
                               enriched_by=stored[note.hash].enriched_by)
            elif note.hash in first:  # a repeat inside the batch
                out[i] = Known("deduplicated", notes[first[note.hash]].id)
            elif note.id in taken or any(notes[j].id == note.id for j in first.values()):
                out[i] = Known("rejected", note.id, warning=(
                    f"a note with id {note.id!r} already exists with different content"))
            else:
                first[note.hash] = i
    return out


__all__ = ["Known", "exact_duplicates"]
