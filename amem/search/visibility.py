"""What a reader sees between sweeps: links to live notes only, and the expired notes waiting.

An expired note is invisible at once (``amem.notefields``) but stays in the engine until the
nightly sweep (``amem.purge.sweep_expired``) deletes it and drops the links to it. Until then
the links other notes hold to it, or to a deleted or merged note, are still in their payload;
a note shown to a caller lists only the links it can follow (``visible_links``), and status
counts the waiting notes apart from the active ones (``count_expired``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..backends.base import Condition, HasId, IsEmpty, Match, Range, Where
from ..index import NoteIndex
from ..notefields import is_expired, not_expired
from ..notes import Note, point_id


def visible_links(index: NoteIndex, note: Note) -> list[str]:
    """``note``'s links that name a live note of its agent (active, not expired), in order.

    One engine retrieve for all of them; a link to a missing, deleted, merged, expired or
    foreign point is left out (the stored links are not changed: the sweep and consolidation
    own that).
    """
    if not note.links:
        return []
    live = live_ids(index, note.agent_id, note.links)
    return [t for t in note.links if t in live]


def live_ids(index: NoteIndex, agent_id: str, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` name a live note of ``agent_id`` (active, not expired): one engine
    retrieve for all of them (a search checks every result's links at once)."""
    wanted = sorted(set(ids))
    if not wanted:
        return set()
    now = index.clock.now()
    points = [point_id(agent_id, t) for t in wanted]
    # The usual case, every target live, costs one count in the engine (~0.5 ms for 120 ids);
    # reading the payloads to find which ones are not costs ~20x that, so only then.
    all_live = Where(must=(HasId(tuple(points)), Match("agent_id", agent_id),
                           Match("is_active", True), not_expired(now)))
    if index.backend.count(all_live) == len(wanted):
        return set(wanted)
    live: set[str] = set()
    for hit in index.backend.retrieve(points):
        p = hit.payload
        if p.get("agent_id") == agent_id and p.get("is_active", True) \
                and not is_expired(str(p.get("expires_at") or ""), now):
            live.add(str(p.get("id")))
    return live


def expired_successors(index: NoteIndex, agent_id: str, *, limit: int) -> list[str]:
    """Ids of ``agent_id``'s active notes past their ``expires_at`` that the sweep has not
    deleted yet and that superseded another note (at most ``limit``).

    Every search reads them, so only what can matter, as ids: only a note that replaced
    another can make it current again, as the sweep's release reads the same ``supersedes``
    (``amem.purge``); every expired note with its whole payload cost a search at 4k notes
    with 80 of them 2.6 ms, more than the engine's query. The indexes on ``expires_ts`` and
    ``supersedes`` make this a small read."""
    where = Where(must=(Match("agent_id", agent_id), Match("is_active", True),
                        Range("expires_ts", lte=index.clock.now().timestamp())),
                  must_not=(IsEmpty("supersedes"),))
    hits, _ = index.backend.scroll(where, limit=limit, fields=("id",))
    return [str(hit.payload.get("id")) for hit in hits]


def gone_successors(index: NoteIndex, agent_id: str, *, limit: int) -> list[str]:
    """Ids of ``agent_id``'s deleted or merged notes that still list older notes they replaced
    (at most ``limit``). A delete releases those first and empties the list in the same write
    that deactivates the note (``amem.supersede.release``), so in a sound store this is a
    small indexed read that finds nothing; after an interrupted write it names the successors
    whose marks must not hide anything."""
    where = Where(must=(Match("agent_id", agent_id), Match("is_active", False)),
                  must_not=(IsEmpty("supersedes"),))
    ids: list[str] = []
    for hit in index.backend.iterate(where):
        ids.append(str(hit.payload.get("id")))
        if len(ids) >= limit:
            break
    return ids


def count_expired(index: NoteIndex, agent_id: str | None = None) -> int:
    """Active notes past their ``expires_at`` that the sweep has not deleted yet (of one
    agent, or of every agent)."""
    must: list[Condition] = [Match("is_active", True),
                          Range("expires_ts", lte=index.clock.now().timestamp())]
    if agent_id is not None:
        must.append(Match("agent_id", agent_id))
    return index.backend.count(Where(must=tuple(must)))


__all__ = ["count_expired", "expired_successors", "gone_successors", "live_ids", "visible_links"]
