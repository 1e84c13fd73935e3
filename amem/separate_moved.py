"""What a nightly merge moved to the survivor besides the text, moved back by ``amem separate``.

A merge (``amem.consolidate``) handed the survivor the merged note's supersession marks,
summed the two notes' retrieval counts (keeping the later last access), took the merged
note's links and pointed every link to it at the survivor; since 2026-12-06 it records the
heat and the links (``heat``, ``links_moved`` in its history entry). When ``amem.separate``
brings the merged note back, :class:`MovedBack` moves each back:

* its marks: the older facts it had replaced are hidden behind it again;
* its heat: the count and last access it had at the merge (``amem.joins.heat_back``: the
  retrievals since stay with the survivor, which they returned);
* its links: the notes whose link the merge pointed at the survivor point at it again, and the
  survivor drops the links it took from it alone.

A merge recorded before the heat and links were keeps them on the survivor, and the caller's
``warnings`` say so. Every method runs under the store's write lock, inside a separation.
"""

from __future__ import annotations

from typing import Any, Mapping

from .backends.base import Match, Where
from .errors import NotFoundError
from .index import NoteIndex
from .joins import Join, heat_back
from .notes import Note, now_iso, point_id, unique
from .supersede.marks import mark


class MovedBack:
    """Moves back what a merge moved to the survivor (see the module docstring)."""

    def __init__(self, index: NoteIndex) -> None:
        self._index = index

    def marks(self, target: Note, loser: Note) -> list[str]:
        """The older facts the merged note had replaced, whose marks the merge moved to
        ``target`` (``AgentRun._inherit_supersessions``), are hidden behind it again: the
        change that hides them is its text, not ``target``'s. In the order a judgement
        writes (``amem.supersede.marks``): the merged note lists them, then each mark moves,
        then ``target`` forgets them (in the separation's last write); a kill between leaves each fact
        hidden behind a live note that lists it, and the run again finishes the move."""
        index, agent = self._index, target.agent_id
        where = Where(must=(Match("agent_id", agent), Match("superseded_by", target.id)))
        back = []
        for hit in index.backend.iterate(where):
            marks = [e for e in hit.payload.get("evolution_history") or ()
                     if e.get("action") == "superseded"]
            if (marks and marks[-1].get("by") == target.id
                    and marks[-1].get("decided_by") == "merge"
                    and any(e.get("by") == loser.id for e in marks[:-1])):
                back.append(str(hit.payload.get("id")))
        if back:
            loser.supersedes = unique([*loser.supersedes, *back])
            index.update_payload(loser.id, agent, {"supersedes": loser.supersedes})
            at = now_iso(index.clock.now())
            for old_id in back:
                mark(index, agent, old_id, loser.id, at=at, decided_by="separated")
        # those a run killed before the last write moved are the merged note's already
        target.supersedes = [n for n in target.supersedes if n not in loser.supersedes]
        return back

    def links(self, target: Note, own: Note, join: Join, warnings: list[str]) -> list[str]:
        """The notes whose link to the merged note the merge pointed at ``target`` link it
        again (those that linked both get it back beside ``target``); the notes that link
        it again. After the merged note is live again (no link to a deleted note), before
        ``target`` drops what it took (:meth:`survivor`); each write is a field update that a run
        after a kill repeats to the same end (a note already linking it is left alone). A
        note changed since so that it no longer links ``target`` is left as it is."""
        moved = join.entry.get("links_moved")
        if not isinstance(moved, Mapping):
            warnings.append(f"the merge was recorded before the links it moved were: notes "
                            f"that linked {own.id} before it still point at {target.id} (the "
                            f"nightly job links back the notes {own.id} links)")
            return []
        index, agent, back = self._index, target.agent_id, []
        both = set(moved.get("both") or ())
        for source in [*(moved.get("redirected") or ()), *sorted(both)]:
            if source in (target.id, own.id):
                continue
            try:
                note, _ = index.load(str(source), agent)
            except NotFoundError:
                continue  # deleted or merged since: its links are gone with it
            if own.id in note.links:
                back.append(note.id)  # a run before this one wrote it
                continue
            if target.id not in note.links:
                continue
            links = (unique([*note.links, own.id]) if source in both
                     else [own.id if t == target.id else t for t in note.links])
            if index.update_note_fields(note.id, agent, {"links": links}):
                back.append(note.id)
        return back

    def _survivor_links(self, target: Note, join: Join) -> list[str] | None:
        """``target``'s links without those the merge took from the merged note alone (a
        note that links ``target`` again on its own keeps its link), with its own link to
        the merged note again when it had one; None when the merge recorded none."""
        moved = join.entry.get("links_moved")
        if join.kind != "merge" or not isinstance(moved, Mapping):
            return None
        index, agent = self._index, target.agent_id
        current, _ = index.load(target.id, agent)  # back-links written since the load
        added = [str(t) for t in moved.get("added") or () if t in current.links]
        still = {str(h.payload.get("id")) for h in index.backend.retrieve(
                     [point_id(agent, t) for t in added])
                 if h.payload.get("agent_id") == agent and h.payload.get("is_active", True)
                 and target.id in (h.payload.get("links") or ())}
        links = [t for t in current.links if t not in added or t in still]
        if moved.get("linked_part"):
            links = unique([*links, join.part])
        return links

    def survivor(self, target: Note, join: Join, warnings: list[str]) -> dict[str, Any]:
        """A merge's survivor without the merged note's heat and the links it took from it
        (``target`` changed in place); the changed fields."""
        if join.kind != "merge":
            return {}
        changes: dict[str, Any] = {}
        heat = heat_back(join, target.retrieval_count, target.last_accessed)
        if heat is None:
            warnings.append(f"the merge was recorded before the notes' heat was: note "
                            f"{target.id} keeps the retrieval count the merge summed "
                            f"({target.retrieval_count}) and its last access")
        else:
            target.retrieval_count = changes["retrieval_count"] = heat[0]["retrieval_count"]
            target.last_accessed = changes["last_accessed"] = heat[0]["last_accessed"]
        links = self._survivor_links(target, join)
        if links is not None:
            target.links = changes["links"] = links
        return changes


__all__ = ["MovedBack"]
