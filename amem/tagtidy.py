"""Stored tags an older amem wrote that this one refuses or keeps once: ``amem doctor`` counts
the notes holding them, ``amem doctor --fix`` tidies them.

Two kinds, each a rule the write path gained after notes were written under the old one:

* a tag of only ``#`` and spaces names no tag (its key is empty: no filter can ask for it)
  and is refused where tags are written (``amem.notes.check_tags``) -- dropped;
* one tag in two spellings ("morning" and "#Morning"), written before tags were compared by
  their key (``amem.notefields.tag_key``): a write keeps one spelling a key
  (``unique_tags``) -- kept once, in the place it first came, spelled without the ``#`` a
  note app writes before it when the note holds such a spelling.

A tag spelled with a leading ``#`` is no problem on its own: it is a tag (the filter finds it
without the ``#``), stored as its user wrote it, so it is left as it is.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from .index import STALE_FIELD, NoteIndex, note_terms_of
from .notefields import tag_key
from .notes import Note, now_iso, point_id
from .refresh import refresh_vectors

#: the history entry of a note whose tags were tidied
ACTION = "tags_tidied"


def tidy_tags(tags: Sequence[str]) -> list[str]:
    """``tags`` as the write path keeps them now: see the module docstring."""
    spelled: dict[str, str] = {}
    for tag in tags:
        key = tag_key(tag)
        if not key:
            continue
        held = spelled.setdefault(key, tag)
        if held.lstrip().startswith("#") and not tag.lstrip().startswith("#"):
            spelled[key] = tag
    return list(spelled.values())


def untidy(tags: Sequence[str]) -> bool:
    """Whether ``tags`` hold one the write path refuses now, or one tag twice."""
    return tidy_tags(tags) != list(tags)


def tidy(index: NoteIndex, notes: Iterable[Note]) -> int:
    """Write each note's tidied tags, recorded in its history (``action: "tags_tidied"``,
    ``old_tags``, ``new_tags``), the keys and BM25 terms following; a note whose embedded text
    moved is re-embedded before this returns. The notes are read again under the write lock
    (one changed since is tidied as it is now); the count of notes changed."""
    changed, stale = 0, set()
    with index.lock:
        wanted = [point_id(n.agent_id, n.id) for n in notes]
        for hit in index.backend.retrieve(wanted) if wanted else []:
            note = Note.from_payload(hit.payload)
            tags = tidy_tags(note.tags)
            if tags == note.tags:
                continue
            embedded, were = note.embed_text(), len(note_terms_of(note))
            entry = {"action": ACTION, "at": now_iso(index.clock.now()),
                     "old_tags": list(note.tags), "new_tags": tags}
            note.tags = tags
            note.evolution_history = [*note.evolution_history, entry]
            changes: dict[str, Any] = {"tags": tags,
                                       "evolution_history": note.evolution_history}
            if note.embed_text() != embedded:
                changes[STALE_FIELD] = True
            if index.update_note_fields(note.id, note.agent_id, changes, terms_of=note,
                                        terms_were=were, active_only=False):
                changed += 1
                if STALE_FIELD in changes:
                    stale.add(hit.id)
        refresh_vectors(index, stale)  # now, not at the next write: the doctor said fixed
    return changed


__all__ = ["ACTION", "tidy", "tidy_tags", "untidy"]
