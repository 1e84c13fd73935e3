"""A document's title taken from its file name names where a note came from, not who it is
about: the same text imported from a file of another name is the note already stored.

The rule it bends (``amem.write.dedup``): the same words under subjects that share none are
another fact ("Prefers window seats" of alice, then of bob), stored apart. A text or Markdown
document gives every note its title as a subject, and without a ``# `` title or ``--title``
that title is the file's name; so ``notes.md`` renamed ``notes-2025.md`` (a yearly archive, an
export run again) and imported again stored every paragraph a second time, the only
difference the name. Here, for a document titled by its file name only:

1. each note of a batch whose text a stored note of the agent holds (its hash, or one folded
   into it) is looked up, one engine query a batch;
2. where that stored note lacks the title, and would be the same note but for it (its
   subjects and the note's heading subjects go together, ``about_the_same``), the title is
   taken off the note before it is written, so the writer dedups it into the stored note
   and warns of no subject it left out;
3. after the batch, each stored note a note went into gains the title as a subject (its
   terms and, when its embedded text changes, its vector with it), so a search naming
   either file's name finds it.

A title the user chose (``--title``, a ``# `` title, front matter) is a statement of what the
notes are about, and keeps the rule: the same text under another such title is its own note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .backends.base import Match, MatchAny, Where
from .index import STALE_FIELD, note_terms_of
from .notefields import not_expired, subject_key
from .notes import Note, about_the_same, point_id, unique_subjects

if TYPE_CHECKING:
    from .index import NoteIndex


class FileTitle:
    """The file-name title of one document's import, and the stored notes it is to be added
    to (steps 1 to 3 of the module docstring)."""

    def __init__(self, index: "NoteIndex", title: str) -> None:
        self._index = index
        self._title = title
        self._key = subject_key(title)
        self._gaining: set[tuple[str, str]] = set()  # (agent, id) of stored notes to title
        #: stored notes that gained the title
        self.added = 0

    def untitled(self, items: Sequence[dict[str, Any]], notes: Sequence[Note]) -> list[dict[str, Any]]:
        """The items to write: each one that repeats a stored note but for this title, without
        the title (steps 1 and 2); the rest as they are."""
        out = list(items)
        rows = [i for i, n in enumerate(notes) if n.subjects[:1] == [self._title]]
        if not rows:
            return out
        stored = self._stored({notes[i].agent_id for i in rows}, {notes[i].hash for i in rows})
        for i in rows:
            note, rest = notes[i], notes[i].subjects[1:]
            for held in stored.get((note.agent_id, note.hash), ()):
                if self._key not in {subject_key(s) for s in held.subjects} \
                        and about_the_same(held.subjects, rest):
                    out[i] = {**items[i], "subjects": rest}
                    break
        return out

    def _stored(self, agents: set[str], hashes: set[str]) -> dict[tuple[str, str], list[Note]]:
        """(agent, hash) -> the active, unexpired notes holding that text."""
        found: dict[tuple[str, str], list[Note]] = {}
        for agent in agents:
            where = Where(must=(Match("agent_id", agent), Match("is_active", True),
                                not_expired(self._index.clock.now())),
                          should=(MatchAny("hash", tuple(hashes)),
                                  MatchAny("folded_hashes", tuple(hashes))))
            for hit in self._index.backend.iterate(where):
                note = Note.from_payload(hit.payload)
                for digest in {note.hash, *note.folded_hashes}:
                    found.setdefault((agent, digest), []).append(note)
        return found

    def went_into(self, agent_id: str, note_id: str) -> None:
        """An untitled item was deduplicated into stored note ``note_id``: it gains the title."""
        self._gaining.add((agent_id, note_id))

    def add(self) -> None:
        """Step 3: the title added to every stored note an untitled item went into, read again
        now (a fold in the batch may have changed it), vectors embedded together."""
        if not self._gaining:
            return
        points = [point_id(agent, note_id) for agent, note_id in sorted(self._gaining)]
        self._gaining.clear()
        changed: list[tuple[Note, int, bool]] = []  # note, its terms before, vector changed
        for hit in self._index.backend.retrieve(points):
            note = Note.from_payload(hit.payload)
            if not note.is_active or self._key in {subject_key(s) for s in note.subjects}:
                continue
            embedded, were = note.embed_text(), len(note_terms_of(note))
            note.subjects = unique_subjects([*note.subjects, self._title])
            changed.append((note, were, note.embed_text() != embedded))
        moved = [n for n, _, again in changed if again]
        vectors = dict(zip((n.id for n in moved),
                           self._index.embed_passages([n.embed_text() for n in moved])
                           if moved else []))
        for note, were, _ in changed:
            fields: dict[str, Any] = {"subjects": note.subjects}
            if note.id in vectors:
                fields[STALE_FIELD] = False
            if self._index.update_note_fields(note.id, note.agent_id, fields,
                                              dense=vectors.get(note.id), terms_of=note,
                                              terms_were=were):
                self.added += 1


__all__ = ["FileTitle"]
