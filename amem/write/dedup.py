"""Exact dedup of a batch by content hash, and the note ids a new note may not take.

A text whose hash is a stored note's own or one folded into it is that note; a repeat inside
the batch is its first occurrence; an id held by an active note, or by a point that holds
another note, is refused (that point is never overwritten). One engine query per agent
finds every hash of the batch, one retrieve its ids.

The same words about another person are another fact ("Prefers window seats" said of alice,
then of bob): a note is a duplicate only of one whose subjects it may share
(``amem.notes.about_the_same``, the rule folds and merges keep), else it is stored apart.
Subjects a duplicate names that its stored note lacks are not written: the result says so;
tags it is given that the note lacks are (``amem.write.tagjoin``), once the batch is placed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from ..backends.base import Match, MatchAny, VectorBackend, Where
from ..notefields import not_expired, subject_key, subject_keys
from ..notes import Note, about_the_same, new_tags, point_id
from .takenback import first_taken


@dataclass(frozen=True)
class Known:
    """What dedup says about one new note: ``deduplicated`` (into ``id``) or ``rejected``."""

    status: str
    id: str
    enriched_by: str = "none"
    warning: str | None = None
    #: tags given with the text that the note it went into lacks (a repeat inside the batch:
    #: that its first occurrence lacks), for ``amem.write.tagjoin``; read off the notes dedup
    #: reads anyway, so a duplicate bringing nothing new costs no further read
    new_tags: tuple[str, ...] = ()
    #: tags were given with the text, all held already, and the note's history names no
    #: entry of this text: where it first gave its tags is written down once
    #: (``amem.write.takenback``), so a tag its user removes later is known to follow it
    unseen: bool = False


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
        stored: dict[str, list[Note]] = {}
        for hit in backend.iterate(where):
            note = Note.from_payload(hit.payload)
            for digest in {note.hash, *note.folded_hashes}:
                stored.setdefault(digest, []).append(note)
        points = {h.id: h.payload for h in backend.retrieve(
            [point_id(agent, notes[i].id) for i in rows])}
        # a deleted note of the same id may be replaced; anything else holding the point not
        taken = {notes[i].id for i in rows
                 if (payload := points.get(point_id(agent, notes[i].id))) is not None
                 and (payload.get("is_active", True) or payload.get("agent_id") != agent
                      or payload.get("id") != notes[i].id)}
        first: dict[str, list[int]] = {}  # hash -> the batch's new notes holding it
        ids = set()
        for i in rows:
            note = notes[i]
            same = next((s for s in stored.get(note.hash, ())
                         if about_the_same(s.subjects, note.subjects)), None)
            earlier = next((notes[j] for j in first.get(note.hash, ())  # a repeat in the batch
                            if about_the_same(notes[j].subjects, note.subjects)), None)
            into = same if same is not None else earlier
            if into is not None:
                out[i] = Known("deduplicated", into.id,
                               enriched_by=same.enriched_by if same is not None else "none",
                               warning=_subjects_left(note, into),
                               new_tags=tuple(new_tags(note.tags, into.tags)),
                               unseen=same is not None and bool(note.tags)
                               and first_taken(same.evolution_history, same.id,
                                               note.id) is None)
            elif note.id in taken or note.id in ids:
                out[i] = Known("rejected", note.id, warning=(
                    f"a note with id {note.id!r} already exists with different content"))
            else:
                first.setdefault(note.hash, []).append(i)
                ids.add(note.id)
    return out


def _subjects_left(new: Note, into: Note) -> str | None:
    """The warning for a duplicate naming subjects its stored note lacks (None: none)."""
    kept = set(subject_keys(into.subjects))
    left = [s for s in new.subjects if subject_key(s) not in kept]
    if not left:
        return None
    return (f"the text went into stored note {into.id!r}, whose subjects "
            f"({', '.join(into.subjects) or 'none'}) were kept; not added: {', '.join(left)} "
            f"(`amem update {into.id} --subject ...` sets a note's subjects)")


__all__ = ["Known", "exact_duplicates"]
