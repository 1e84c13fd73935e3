"""Which tags a note's user took back, read from its history: a re-import must not undo them.

A vault note's tags join its stored note whenever its text is imported again
(``amem.write.tagjoin``). A tag the user removed with ``amem update`` / ``memory_update`` came
back with the next import of the file that still holds it, so a removal lasted until the next
sync. The note's ``evolution_history`` says enough to tell such a tag from one the file
newly gives, without keeping the files' contents:

* each ``update`` entry that changed tags holds the tags before (``old_tags``) and, from this
  version on, after (``new_tags``); for an older entry the tags after it are the next
  entry's recorded "before" (an update's ``old_tags``, a join's ``kept``, a fold's, a
  merge's, an evolution's or ``amem doctor --fix``'s ``old_tags``), else the note's tags now. A removal is in force
  until a later entry puts the tag back (an update, a join, a fold, a merge or an
  evolution adding it);
* a text's tags were first taken when the note was stored from it (its id is the note's),
  or at the first join, fold or ``tags_seen`` entry it triggered (``triggered_by``: an
  import's text keeps its id from one run to the next, ``amem.importcheck.with_stable_id``;
  ``tags_seen`` notes such a text whose tags the note held already, ``amem.write.tagjoin``).

A tag is held back when its removal came after that text's tags were first taken: the
file said it, the user said no after. A text never seen before the removal (another file,
an ``add`` with a fresh id) brings it, as its user asked for it since. Entries are compared
by their place in the history, which only grows: two entries in the same second stay in
order, where their times would tie.

What the history cannot tell: a text that brought no new tag under an amem before
``tags_seen`` left no entry, so it counts as never seen once more, and its tags arrive. (A
renamed file is the same text: ``amem.importtitle`` writes a document titled by its file
name into its stored notes under their ids.)
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ..notefields import tag_keys

History = Sequence[Mapping[str, Any]]

#: the entries that record the tags before them (``before``) and after them
_BEFORE = {"update": "old_tags", "tags_added": "kept", "fold": "old_tags",
           "consolidate_merge": "old_tags", "evolve": "old_tags", "tags_tidied": "old_tags"}


def _after(entry: Mapping[str, Any]) -> list[str] | None:
    """The tags right after an entry, where it records them."""
    action = entry.get("action")
    if action == "tags_added":
        return [*_strs(entry.get("kept")), *_strs(entry.get("tags"))]
    if action in _BEFORE and "new_tags" in entry:  # the other entries recording both sides
        return _strs(entry.get("new_tags"))
    return None


def _before(entry: Mapping[str, Any]) -> list[str] | None:
    field = _BEFORE.get(str(entry.get("action")))
    return _strs(entry.get(field)) if field is not None and field in entry else None


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def taken_back(history: History, current: Iterable[str]) -> dict[str, int]:
    """Tag key -> the place in ``history`` of the user's last removal of it still in force
    (the note does not hold it now, and nothing put it back since)."""
    removed: dict[str, int] = {}
    for place, entry in enumerate(history):
        before, after = _before(entry), _after(entry)
        if entry.get("action") == "update" and before is not None and after is None:
            # an entry written before updates recorded their new tags: what follows says
            after = next((b for b in map(_before, history[place + 1:]) if b is not None),
                         list(current))
        if before is None or after is None:
            continue
        old, new = set(tag_keys(before)), set(tag_keys(after))
        for key in new - old:  # put back (by the user, a join, a fold, a merge)
            removed.pop(key, None)
        if entry.get("action") == "update":  # only a user's edit removes for good
            removed.update((key, place) for key in old - new)
    held = set(tag_keys(current))
    return {key: place for key, place in removed.items() if key not in held}


def first_taken(history: History, note_id: str, source_id: str) -> int | None:
    """Where in ``history`` the text of id ``source_id`` first gave the note its tags: -1
    for the text it was stored from, None for a text never seen (no entry it triggered)."""
    if source_id == note_id:
        return -1
    return next((place for place, entry in enumerate(history)
                 if entry.get("action") in ("tags_added", "tags_seen", "fold")
                 and entry.get("triggered_by") == source_id), None)


def held_back(history: History, current: Iterable[str], note_id: str,
              source_id: str) -> set[str]:
    """The tag keys a text of id ``source_id`` must not give back to the note: those its
    user removed after that text's tags were first taken."""
    since = first_taken(history, note_id, source_id)
    if since is None:
        return set()
    return {key for key, place in taken_back(history, current).items() if place > since}


__all__ = ["first_taken", "held_back", "taken_back"]
