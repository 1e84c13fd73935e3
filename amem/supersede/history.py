"""A fact's supersession chain: the notes it replaced and the notes that replaced it."""

from __future__ import annotations

from typing import Any

from ..index import NoteIndex
from ..notes import Note, point_id

#: the evolution entries a history shows: supersession, edits, the joins that put another
#: text into a note (a fold at add, a nightly merge), which are otherwise seen nowhere, and
#: their undoing (``amem separate``: on both notes), and the tags a duplicate's text brought
#: (``amem.write.tagjoin``) or ``amem doctor --fix`` tidied (``amem.tagtidy``); a join's
#: note of a text that brought nothing new (``tags_seen``) changed nothing and is not shown
_EVENTS = ("supersedes", "superseded", "released", "update", "fold", "consolidate_merge",
           "separated", "separated_from", "tags_added", "tags_tidied")
#: notes a chain shows at most (a chain is a few notes; a cycle or a huge fan-in stops here)
MAX_CHAIN = 200


def chain(index: NoteIndex, agent: str, note_id: str) -> list[dict[str, Any]]:
    """Every note linked to ``note_id`` by supersession, oldest first: for each its id,
    text, times, state, ``superseded_by``, ``supersedes``, ``kept_against`` and the evolution
    entries about supersession. Deleted and merged notes are included (``is_active``): a
    history shows what was, not only what is. ``NotFoundError`` when the note does not exist
    (``index.load`` with ``include_inactive``)."""
    first, _ = index.load(note_id, agent, include_inactive=True)
    seen: dict[str, Note] = {first.id: first}
    todo = [first]
    while todo and len(seen) < MAX_CHAIN:
        note = todo.pop()
        nexts = [n for n in (note.superseded_by, *note.supersedes, *note.kept_against)
                 if n and n not in seen]
        for hit in index.backend.retrieve([point_id(agent, n) for n in nexts]):
            if hit.payload.get("agent_id") != agent:
                continue
            other = Note.from_payload(hit.payload)
            seen[other.id] = other
            todo.append(other)
    rank = _replaced(seen)
    ordered = sorted(seen.values(), key=lambda n: (n.event_time or n.timestamp, n.timestamp,
                                                   rank[n.id], n.id))
    return [{"id": n.id, "content": n.content, "timestamp": n.timestamp,
             "event_time": n.event_time, "is_active": n.is_active,
             # a consolidation merge is not a deletion: the text lives on in the survivor
             "merged_into": n.merged_into if not n.is_active else None,
             "superseded_by": n.superseded_by, "supersedes": list(n.supersedes),
             "kept_against": list(n.kept_against),
             "events": [e for e in n.evolution_history if e.get("action") in _EVENTS]}
            for n in ordered]


def _replaced(notes: dict[str, Note]) -> dict[str, int]:
    """How many notes of the chain each note came after, by the chain's own links (it
    replaced them, or was kept against them), directly or not.

    Times are kept to the second, and two notes written in one second (an agent correcting
    itself; two quick CLI calls) tied: the chain then fell back to the ids' order, which put
    the replacing note first about half the time. A cycle (an unsound mark) orders nothing.
    """
    before: dict[str, set[str]] = {nid: set() for nid in notes}
    for note in notes.values():
        before[note.id].update(p for p in note.supersedes if p in notes)
        for later in (note.superseded_by, *note.kept_against):
            if later in notes:
                before[later].add(note.id)
    depth: dict[str, int] = {}

    def of(nid: str, trail: frozenset[str]) -> int:
        if nid not in depth:
            depth[nid] = max((1 + of(p, trail | {nid}) for p in before[nid] if p not in trail),
                             default=0)
        return depth[nid]

    for nid in notes:
        of(nid, frozenset())
    return depth


__all__ = ["MAX_CHAIN", "chain"]
