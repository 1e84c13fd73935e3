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
   (no copy) and warns of no subject it left out, under the stored note's id (the text it
   was stored from, for ``amem.write.takenback``);
3. when the file ends, if at least half its notes went so (the document was stored before,
   under another name: a rename, maybe edited since), each stored note they went into gains
   the title as a subject (its terms and, when its embedded text changes, its vector with
   it), so a search naming either file's name finds it; while it holds fewer than
   ``MAX_TITLED`` subjects.

Why step 3 asks more than step 2: a paragraph repeated across many files (a daily note's
template, a signature) is one note either way, but the names of the files it sits in say
nothing about it; every daily note's date added to it would bury its real subjects.

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

#: a stored note takes a file's name as a new subject only while it holds fewer subjects than
#: this: past it, the text is boilerplate many files share, not one document renamed
MAX_TITLED = 8
#: stored notes read, re-embedded and written together when they gain the title
CHUNK = 256


class FileTitle:
    """The file-name title of one document's import, and the stored notes it is to be added
    to (steps 1 to 3 of the module docstring)."""

    def __init__(self, index: "NoteIndex", title: str,
                 counted: set[tuple[str, str]] | None = None) -> None:
        self._index = index
        # (agent, id) of notes already counted in ``added``: a folder's files share one set, so
        # a note two of its files both title counts once, as ``tags_added`` counts it
        self._counted = set() if counted is None else counted
        self._title = title
        self._key = subject_key(title)
        self._gaining: set[tuple[str, str]] = set()  # (agent, id) of stored notes to title
        self._seen = 0  # the document's notes written (so far)
        self._joined = 0  # of which went into a stored note, titled otherwise
        #: stored notes that gained the title (not counted before, in ``counted``)
        self.added = 0

    def untitled(self, items: Sequence[dict[str, Any]], notes: Sequence[Note]) -> list[dict[str, Any]]:
        """The items to write: each one that repeats a stored note but for this title, without
        the title (steps 1 and 2); the rest as they are."""
        out = list(items)
        self._seen += len(notes)
        rows = [i for i, n in enumerate(notes) if n.subjects[:1] == [self._title]]
        if not rows:
            return out
        stored = self._stored({notes[i].agent_id for i in rows}, {notes[i].hash for i in rows})
        for i in rows:
            note, rest = notes[i], notes[i].subjects[1:]
            for held in stored.get((note.agent_id, note.hash), ()):
                if self._key not in {subject_key(s) for s in held.subjects} \
                        and about_the_same(held.subjects, rest):
                    # and under the stored note's id: the renamed file is the text that
                    # note was stored from, so a tag its user removed since stays removed
                    # (``amem.write.takenback``) instead of returning as a new file's
                    out[i] = {**items[i], "subjects": rest, "id": held.id}
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
        """An untitled item was deduplicated into stored note ``note_id``."""
        self._joined += 1
        self._gaining.add((agent_id, note_id))

    def add(self) -> None:
        """Step 3, once the file is written: the title added to the stored notes its notes
        went into when they are most of it, each read again now (the import may have changed
        it), vectors embedded together."""
        if not self._gaining or 2 * self._joined < self._seen:
            return
        points = [point_id(agent, note_id) for agent, note_id in sorted(self._gaining)]
        self._gaining.clear()
        for start in range(0, len(points), CHUNK):  # a long document's notes, a chunk a call
            self._add(points[start:start + CHUNK])

    def _add(self, points: list[str]) -> None:
        changed: list[tuple[Note, int, bool]] = []  # note, its terms before, vector changed
        for hit in self._index.backend.retrieve(points):
            note = Note.from_payload(hit.payload)
            if not note.is_active or len(note.subjects) >= MAX_TITLED \
                    or self._key in {subject_key(s) for s in note.subjects}:
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
                                              terms_were=were) \
                    and (note.agent_id, note.id) not in self._counted:
                self._counted.add((note.agent_id, note.id))
                self.added += 1


__all__ = ["MAX_TITLED", "FileTitle"]
