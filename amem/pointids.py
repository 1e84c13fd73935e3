"""Moving a store written with point-id format 1 to format 2, once, when it is opened.

Format 1 derived a note's point id from ``agent + "/" + id``: agent ``a/b`` with note ``c``
and agent ``a`` with note ``b/c`` shared one point, so one tenant could overwrite another's
note. Format 2 (``amem.notes.point_id``) hashes the JSON pair, which is injective. The store's
metadata records the format (``point_ids``); a store without it is moved here before anything
reads or writes it by id.

The move is a page-by-page copy: each page's notes are written under their new id, then their
old points are deleted. It is idempotent, so a process killed halfway simply moves the rest on
the next open (a note already at its new id is left alone; one copied but not yet deleted is
copied again, identically). Every payload is kept as stored; vectors are kept, BM25 terms are
rebuilt from the payload.
"""

from __future__ import annotations

import logging
from typing import Callable

from .backends.base import Hit, Point, VectorBackend
from .notes import point_id

log = logging.getLogger(__name__)

#: the metadata key holding the store's point-id format
META_KEY = "point_ids"


def move_points(backend: VectorBackend, rebuild: Callable[[Hit], Point], *,
                batch: int = 256) -> int:
    """Give every point the id of its payload's ``(agent_id, id)``; returns how many moved.

    ``rebuild`` turns a hit read with its vector into the point to write under the new id.
    Points without a string ``agent_id`` and ``id`` are not notes: they stay, with a warning.
    """
    moved = 0
    offset: str | None = None
    while True:
        # Pages follow id order: a moved point lands at a random id, and if that is ahead of
        # the cursor it is read again later, already at its own id, and skipped.
        page, offset = backend.scroll(None, limit=batch, offset=offset, with_vectors=True)
        points: list[Point] = []
        old: list[str] = []
        for hit in page:
            agent, note_id = hit.payload.get("agent_id"), hit.payload.get("id")
            if not isinstance(agent, str) or not isinstance(note_id, str) or hit.dense is None:
                log.warning("point %s is not a note with a vector; left where it is", hit.id)
                continue
            if point_id(agent, note_id) != hit.id:
                points.append(rebuild(hit))
                old.append(hit.id)
        if points:
            backend.upsert(points)  # the copy first: a kill now leaves two copies, never none
            backend.delete(old)
            moved += len(points)
            log.info("moved %d notes to point-id format 2", moved)
        if offset is None:
            return moved


__all__ = ["META_KEY", "move_points"]
