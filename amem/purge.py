"""Hard deletes: an agent's whole memory (``delete_all``) and the sweep of expired notes.

Both remove points from the engine (a soft delete keeps them) and keep the BM25 statistics
right: each removed point takes its document and its tokens out of the corpus counts, so the
engine's point count and the saved document count still agree (``NoteIndex._engine_stats``).
A sweep also drops the links other notes of the same agent hold to a swept note, so link
expansion never walks to a note that is gone. Deletes run in batches; a process killed in
between leaves the rest for the next call (both are idempotent), and a ``delete_all`` records
its request first, so that what it left is reported (``unfinished_erasures``) until it is run
again.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

from .backends.base import Hit, Match, MatchAny, Range, Where
from .index import NoteIndex
from .notefields import is_expired
from .notes import now_iso, point_id
from .supersede.marks import unmark

log = logging.getLogger(__name__)

#: points deleted per engine call
BATCH = 256
#: the metadata key of the ``delete_all`` calls under way: ``{agent_id: started_at}``
ERASING = "delete_all_started"


@dataclass
class SweepReport:
    """What one expiry sweep did."""

    expired_deleted: int = 0
    links_dropped: int = 0
    agents: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def delete_all(index: NoteIndex, agent_id: str) -> int:
    """Remove every note of ``agent_id`` (active, deleted, merged, expired); the count.

    Only that agent's points are touched: the filter is on the tenant key, and links never
    cross agents, so no other agent's note can point at what goes.

    The request is recorded in the store's metadata (``ERASING``) before the first point goes
    and forgotten once the last is gone: an erase is asked for privacy, and one killed half
    way left a half-erased agent that status, search and ``amem doctor`` showed as whole.
    ``unfinished_erasures`` names it until a call runs to its end.
    """
    with index.lock:
        _record_erasure(index, agent_id, started=True)
        removed = _remove(index, index.backend.iterate(Where(must=(Match("agent_id", agent_id),))))
        index.flush()
        _record_erasure(index, agent_id, started=False)
    log.info("deleted all %d notes of agent %r", removed, agent_id)
    return removed


def unfinished_erasures(index: NoteIndex) -> list[dict[str, Any]]:
    """The ``delete_all`` calls that started and did not finish, each ``{"agent_id",
    "started_at", "notes_left"}`` (notes of any state still stored), oldest first."""
    started = index.meta.get(ERASING)
    if not isinstance(started, dict):
        return []
    out = []
    for agent, at in sorted(started.items(), key=lambda item: str(item[1])):
        left = index.backend.count(Where(must=(Match("agent_id", str(agent)),)))
        out.append({"agent_id": str(agent), "started_at": str(at), "notes_left": left})
    return out


def _record_erasure(index: NoteIndex, agent_id: str, *, started: bool) -> None:
    """Write (or clear) the erase request in the metadata, at once: it must be on disk before
    the first delete, and cleared only after the engine has the last one."""
    pending = dict(index.meta.get(ERASING) or {})
    if started:
        pending.setdefault(agent_id, now_iso(index.clock.now()))
    else:
        pending.pop(agent_id, None)
    if pending:
        index.meta[ERASING] = pending
    else:
        index.meta.pop(ERASING, None)
    index.write_meta()


def sweep_expired(index: NoteIndex, agent_ids: Sequence[str] | None = None) -> SweepReport:
    """Delete the notes whose ``expires_at`` has passed (of ``agent_ids``, or every agent)."""
    report = SweepReport()
    now = index.clock.now().timestamp()
    must: list[Any] = [Range("expires_ts", lte=now)]
    if agent_ids is not None:
        must.append(MatchAny("agent_id", tuple(agent_ids)))
    with index.lock:
        expired = list(index.backend.iterate(Where(must=tuple(must))))
        by_agent: dict[str, set[str]] = {}
        for hit in expired:
            by_agent.setdefault(str(hit.payload.get("agent_id")), set()).add(str(hit.payload["id"]))
        for agent, gone in by_agent.items():
            report.links_dropped += _drop_links(index, agent, gone)
            _release(index, agent, [h for h in expired
                                    if str(h.payload.get("agent_id")) == agent], gone)
        report.expired_deleted = _remove(index, expired)
        report.agents = len(by_agent)
        if expired:
            index.flush()
    if report.expired_deleted:
        log.info("expiry sweep deleted %d notes of %d agents", report.expired_deleted,
                 report.agents)
    return report


def sweep_ids(index: NoteIndex, agent_id: str, note_ids: Iterable[str]) -> dict[str, str]:
    """Delete now the expired notes of ``agent_id`` among ``note_ids``; ``{id: expires_at}``.

    A write that gives a note id (an import's id is derived from the text) may take the id of
    a note that expired and waits for the nightly sweep: that note is swept here first, as
    the sweep would (links to it dropped, its terms out of BM25), so the id is free and the
    new note is the only one holding it. A live, deleted or foreign point is left alone.
    """
    wanted = sorted({i for i in note_ids if isinstance(i, str) and i})
    if not wanted:
        return {}
    now = index.clock.now()
    with index.lock:
        hits = [h for h in index.backend.retrieve([point_id(agent_id, i) for i in wanted])
                if h.payload.get("agent_id") == agent_id and h.payload.get("id") in wanted
                and is_expired(str(h.payload.get("expires_at") or ""), now)]
        if not hits:
            return {}
        gone = {str(h.payload["id"]): str(h.payload.get("expires_at")) for h in hits}
        _drop_links(index, agent_id, set(gone))
        _release(index, agent_id, hits, set(gone))
        _remove(index, hits)
    log.info("swept %d expired notes of agent %r whose ids a write takes again", len(gone),
             agent_id)
    return gone


def _release(index: NoteIndex, agent: str, hits: Sequence[Hit], gone: set[str]) -> int:
    """The older facts the swept notes had superseded become current again, as when their
    successor is deleted (``amem.supersede.release``): a mark naming a note that no longer
    exists would hide them for good. Found by the swept notes' lists and by the marks naming
    them (an orphan mark too); released before the points go. How many were released."""
    older = {str(o) for h in hits for o in h.payload.get("supersedes") or []}
    naming = Where(must=(Match("agent_id", agent), MatchAny("superseded_by", tuple(sorted(gone)))))
    older.update(str(h.payload.get("id")) for h in index.backend.iterate(naming))
    freed = 0
    for hit in index.backend.retrieve([point_id(agent, o) for o in sorted(older - gone)]):
        p = hit.payload
        by = p.get("superseded_by")
        if p.get("agent_id") == agent and by in gone:
            freed += unmark(index, agent, str(p["id"]), by=str(by), reason="expired")
    return freed


def _drop_links(index: NoteIndex, agent: str, gone: set[str]) -> int:
    """Take the ids in ``gone`` out of the links of the agent's other notes; links removed."""
    where = Where(must=(Match("agent_id", agent), MatchAny("links", tuple(sorted(gone)))))
    dropped = 0
    for hit in list(index.backend.iterate(where)):
        if hit.payload.get("id") in gone:
            continue
        links = list(hit.payload.get("links", []))
        kept = [link for link in links if link not in gone]
        dropped += len(links) - len(kept)
        index.update_payload(str(hit.payload["id"]), agent, {"links": kept})
    return dropped


def _remove(index: NoteIndex, hits: Iterable[Hit]) -> int:
    """Hard-delete the points of ``hits``, each taking its terms out of the BM25 counts."""
    removed = 0
    batch: list[Hit] = []

    def flush() -> None:
        nonlocal removed
        index.remove_points(batch)
        removed += len(batch)
        batch.clear()

    for hit in hits:
        batch.append(hit)
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()
    return removed


__all__ = ["ERASING", "SweepReport", "delete_all", "sweep_expired", "sweep_ids", "unfinished_erasures"]
