"""A fact's supersession chain: the notes it replaced and the notes that replaced it."""

from __future__ import annotations

from typing import Any

from ..index import NoteIndex
from ..notes import Note, point_id

#: evolution entries that tell the chain's story
_EVENTS = ("supersedes", "superseded", "released", "update")
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
    ordered = sorted(seen.values(), key=lambda n: (n.event_time or n.timestamp, n.timestamp, n.id))
    return [{"id": n.id, "content": n.content, "timestamp": n.timestamp,
             "event_time": n.event_time, "is_active": n.is_active,
             "superseded_by": n.superseded_by, "supersedes": list(n.supersedes),
             "kept_against": list(n.kept_against),
             "events": [e for e in n.evolution_history if e.get("action") in _EVENTS]}
            for n in ordered]


__all__ = ["MAX_CHAIN", "chain"]
