"""Owed back-links: a note's links are written both ways, and a kill between the two is finished.

A new note is written before its back-links, so a kill never leaves a link to a missing note;
but a kill between the two left the note listing neighbours that never got the link back
(one-way links: search follows them from one side only, and consolidation carried them into
merged notes). So the note is written with ``links_owed: true`` in the same write, and the mark
is cleared once every back-link is written; an edit whose links changed sets it with the new
links. A note left marked is finished (``settle``) by the store's next write (``REPAIR_LIMIT``
a process, as ``amem.refresh`` repairs stale vectors), by the nightly consolidation and by
``amem doctor --fix``; ``amem doctor`` counts the one-way links until then.

Settling makes the marked note's links two-way, its own list being the truth: each live note it
lists gets the link back, and a live note that lists it without being listed (an edit dropped
that link) loses it. A listed note that is gone (deleted, merged, expired) gets nothing written:
the forward link is then an ordinary link to a missing note, which readers skip, ``amem doctor``
counts as dangling and the nightly repair drops, or points at the merge's survivor, which the
same run then gives the link back.

One-way links without a mark (a store written before the mark) are completed, not dropped
(``one_way`` finds them, ``complete`` writes the missing halves): the write path's rule decided
the link, and the kill lost only its second half.
"""

from __future__ import annotations

import itertools
import logging
from contextlib import contextmanager
from typing import Iterable, Iterator, Mapping, Sequence

from .backends.base import Match, Where
from .index import NoteIndex
from .notefields import is_expired
from .notes import Note, point_id, unique

log = logging.getLogger(__name__)

#: the payload field of a note whose links may not all be written back yet
OWED_FIELD = "links_owed"
OWED = Where(must=(Match(OWED_FIELD, True),))
#: marked notes a write settles before it starts, at most (a killed writer leaves one or two)
REPAIR_LIMIT = 64

#: a link of one agent's notes: (agent_id, source id, target id)
Link = tuple[str, str, str]


def count_owed(index: NoteIndex) -> int:
    """How many notes (of every agent, active or not) carry the mark."""
    return index.backend.count(OWED)


def settle(index: NoteIndex, *, limit: int | None = None) -> int:
    """Finish the back-links of the marked notes (at most ``limit``); how many were settled.

    The caller holds the store's write lock. Read before writing: no paging over writes.
    """
    hits = list(itertools.islice(index.backend.iterate(OWED), limit))
    for hit in hits:
        settle_note(index, Note.from_payload(hit.payload))
    return len(hits)


def settle_if_owed(index: NoteIndex, note: Note) -> bool:
    """Settle ``note`` first when it carries the mark (an edit's caller, under the write lock):
    an edit writes the other halves of the links it changes only, and then clears the mark, so
    a kept link a killed write left one-way would stay so unmarked. Whether it was owed."""
    hits = index.backend.retrieve([point_id(note.agent_id, note.id)])
    if not hits or not hits[0].payload.get(OWED_FIELD):
        return False
    settle_note(index, note)
    return True


def settle_note(index: NoteIndex, note: Note) -> None:
    """Make ``note``'s links two-way (its own list is the truth), then clear its mark.

    Each write is a field update of the stored note, so a kill anywhere leaves the mark and the
    next settle does the rest again (adding a link already there changes nothing).
    """
    agent = note.agent_id
    if _live(note, index):
        listed = [t for t in unique(note.links) if t != note.id]
        for other in _live_notes(index, agent, listed):
            if note.id not in other.links:
                index.update_note_fields(other.id, agent, {"links": [*other.links, note.id]})
        linkers = Where(must=(Match("agent_id", agent), Match("links", note.id),
                              Match("is_active", True)))
        for hit in list(index.backend.iterate(linkers)):
            other = Note.from_payload(hit.payload)
            if other.id != note.id and other.id not in listed:  # an edit dropped this link
                index.update_note_fields(other.id, agent,
                                         {"links": [t for t in other.links if t != note.id]})
    # A deleted or expired note owes nothing: links to it are links to a missing note.
    index.update_note_fields(note.id, agent, {OWED_FIELD: False}, active_only=False)


def one_way(links: Mapping[tuple[str, str], Sequence[str]]) -> list[Link]:
    """Every link between two of the given notes whose target does not link back, sorted.

    ``links`` maps each live note ``(agent_id, id)`` to its links; a target not among them
    (deleted, missing, expired) is a dangling link, not a one-way one.
    """
    found: list[Link] = []
    for (agent, source), targets in links.items():
        for target in targets:
            back = links.get((agent, target))
            if target != source and back is not None and source not in back:
                found.append((agent, source, target))
    return sorted(set(found))


def complete(index: NoteIndex, missing: Iterable[Link]) -> int:
    """Write the missing half of each one-way link (``(agent, source, target)``: ``target``
    gets ``source``); how many links were written. The caller holds the write lock.

    Each target is read now, so its links are the stored ones; a target gone since gets none.
    """
    wanted: dict[tuple[str, str], list[str]] = {}
    for agent, source, target in missing:
        wanted.setdefault((agent, target), []).append(source)
    written = 0
    for (agent, target), sources in sorted(wanted.items()):
        notes = _live_notes(index, agent, [target])
        if not notes:
            continue
        add = [s for s in unique(sources) if s not in notes[0].links]
        if add and index.update_note_fields(target, agent, {"links": [*notes[0].links, *add]}):
            written += len(add)
    return written


def mend_links(index: NoteIndex) -> tuple[int, int]:
    """``amem doctor --fix``: settle every marked note, then complete every one-way link
    left (a store written before the mark); returns (notes settled, links completed)."""
    with index.lock:
        settled = settle(index)
        live: dict[tuple[str, str], list[str]] = {}
        for note, _ in index.iter_notes(None):
            live[(note.agent_id, note.id)] = list(note.links)
        return settled, complete(index, one_way(live))


class OwedLinks:
    """One writer's repair of the marks a killed writer left, before its first write.

    At most ``REPAIR_LIMIT`` a write, as ``amem.refresh.StaleVectors.repair_once``: a kill
    leaves one add's mark (an import's batch: a few), and the nightly job settles any number.
    Not locked by itself: the writer calls it under its own lock.
    """

    def __init__(self, index: NoteIndex) -> None:
        self._index = index
        self._repaired = False

    @contextmanager
    def watch(self) -> Iterator[None]:
        """Around one placement: if it fails (a full disk, an engine error), it may have left
        its mark, so this process's next write settles again, as a new process would."""
        try:
            yield
        except BaseException:
            self._repaired = False
            raise

    def repair_once(self) -> None:
        """Before this process's first write (and after a failed placement): settle what a
        killed or failed write left marked."""
        if self._repaired:
            return
        settled = settle(self._index, limit=REPAIR_LIMIT)
        self._repaired = settled < REPAIR_LIMIT  # a full chunk: more may wait
        if settled:
            log.warning("wrote the back-links of %d notes an interrupted write left one-way",
                        settled)


def _live(note: Note, index: NoteIndex) -> bool:
    return note.is_active and not is_expired(note.expires_at, index.clock.now())


def _live_notes(index: NoteIndex, agent: str, ids: Sequence[str]) -> list[Note]:
    """The live notes of ``agent`` among ``ids``, as stored now."""
    if not ids:
        return []
    notes = [Note.from_payload(h.payload)
             for h in index.backend.retrieve([point_id(agent, n) for n in ids])]
    return [n for n in notes if n.agent_id == agent and n.id in ids and _live(n, index)]


__all__ = ["OWED", "OWED_FIELD", "REPAIR_LIMIT", "OwedLinks", "complete", "count_owed", "settle_if_owed",
           "mend_links", "one_way", "settle", "settle_note"]
