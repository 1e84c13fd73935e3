"""The live key's upkeep on an edge shard: what ``EdgeBackend`` reads and writes to keep
:data:`~amem.backends.base.LIVE_KEY` true of every point.

The key names a point's agent and state in one indexed keyword (``amem.backends.base``), so a
search names one condition instead of the tenant, ``is_active``, the successor and the expiry.
It is only as good as its upkeep, which is here:

* :func:`fill`: at open, the points written before the key existed get theirs (once a store);
* :func:`mend`: at open, a point whose key names another state than its fields say (a writer
  that does not keep the key changed it) gets its own back;
* :func:`expiry_came` and :func:`first_expiry`: the notes whose expiry came between two times,
  and the next expiry the expiry index holds, for ``EdgeBackend.lapse``.

Each function takes the shard and what it needs of the backend (the room check, the moved
points' counter): ``fill`` and ``mend`` run at open, before the backend holds the shard.
Callers hold the engine gate, so no write falls between a function's reads and its writes.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import qdrant_edge as qe

from amem.backends import _common as c
from amem.backends._edge_live import ACTIVE, EXPIRY, SUCCESSOR
from amem.backends._edge_moved import MovedPoints
from amem.backends._edge_tenants import TENANT_FIELD
from amem.backends._filters import to_edge
from amem.backends.base import (LIVE_KEY, IsEmpty, Match, Range, Where, key_agent, lapsed_key,
                                 live_key)
from amem.kernel.errors import DiskFullError

log = logging.getLogger(__name__)

#: the most key values a state's facet reads at open (:func:`mend`): one a tenant
MAX_AGENT_KEYS = 1_000_000
#: the payload fields :data:`LIVE_KEY` is made of, and those whose write writes it again
SOURCES = (TENANT_FIELD, ACTIVE, SUCCESSOR, EXPIRY)
KEYED_FIELDS = frozenset({*SOURCES, LIVE_KEY})
#: the bytes a key's write is counted at per point by the room check
KEY_BYTES = 64
#: the most ids :func:`fill` hands back (a store's first keying can cover millions)
KEYED_IDS_MAX = 10_000

#: ``EdgeBackend.check_space``: raises ``DiskFullError`` without room for ``points`` points
#: of ``data_bytes`` in all
RoomCheck = Callable[[int, int], None]


def pages(shard: qe.EdgeShard, flt: Any, fields: Sequence[str] = ()) -> Iterator[list[Any]]:
    """The points matching ``flt`` (with the payload ``fields``), a page of 1,000 records at a
    time, read from ``shard`` itself (the keying at open, before the handle holds it). A
    caller may write the records of a page before the next: pages follow the id order."""
    offset: Any = None
    while True:
        records, offset = shard.scroll(qe.ScrollRequest(
            offset=offset, limit=1000, filter=flt,
            with_payload=c.payload_fields(list(fields)) if fields else False, with_vector=False))
        if records:
            yield records
        if offset is None or not records:
            return


def first_expiry(shard: qe.EdgeShard, after: float = -math.inf) -> float | None:
    """The earliest numeric expiry of any point after ``after`` (None: none), the first
    value of its index (a value no range matches is not listed)."""
    flt = None if after == -math.inf else to_edge(Where(must=(Range(EXPIRY, gt=after),)))
    first, _ = shard.scroll(qe.ScrollRequest(
        limit=1, filter=flt, with_payload=False, with_vector=False,
        order_by=qe.OrderBy(key=EXPIRY, direction=qe.Direction.Asc)))
    value = first[0].order_value if first else None
    return None if value is None else float(value)


def expiry_came(shard: qe.EdgeShard, since: float, now: float) -> dict[str, list[str]]:
    """The active notes whose expiry lies after ``since`` and at or before ``now``, by the key
    they get at ``now`` (one per agent)."""
    came = to_edge(Where(must=(Match(ACTIVE, True), Range(
        EXPIRY, gt=None if since == -math.inf else since, lte=now))))
    groups: dict[str, list[str]] = {}
    for records in pages(shard, came, SOURCES):
        for record in records:
            groups.setdefault(live_key(dict(record.payload or {}), now),
                              []).append(str(record.id))
    return groups


def fill(shard: qe.EdgeShard, *, room: RoomCheck, moved: MovedPoints, path: Path,
         keyed: list[str] | None = None) -> bool:
    """Give the points written before :data:`LIVE_KEY` theirs; True when every point carries
    one, as from then on. ``keyed`` receives the ids of the points it keyed, up to
    :data:`KEYED_IDS_MAX`.

    Read a page at a time (the fields the key is made of) and written as one payload write
    per key value and page, so the key is the one ``live_key`` makes for a new point. Each
    write moves its points out of the index, so they are counted for the next build as any
    payload write is. Without room on the disk nothing is written and the store opens
    unkeyed (False).
    """
    missing = to_edge(Where(must=(IsEmpty(LIVE_KEY),)))
    todo = int(shard.count(qe.CountRequest(exact=True, filter=missing)))
    if not todo:
        return True
    started = time.perf_counter()
    try:
        room(todo, KEY_BYTES * todo)
    except DiskFullError as exc:  # the store still opens: its reads say every condition
        log.warning("%d points of %s lack their live key and the disk has no room to write "
                    "it (%s); searches say every condition (`amem status`: filters_keyed "
                    "false) until an open with room keys them", todo, path, exc)
        return False
    done = 0
    for records in pages(shard, missing, SOURCES):
        groups: dict[str, list[Any]] = {}
        for record in records:
            groups.setdefault(live_key(dict(record.payload or {})), []).append(record.id)
        for key, ids in groups.items():
            shard.update(qe.UpdateOperation.set_payload(ids, {LIVE_KEY: key}))
        moved.mark([str(r.id) for r in records])
        if keyed is not None:  # ids of a first keying of a large store: none past the cap
            keyed.extend(str(r.id) for r in records[:max(0, KEYED_IDS_MAX - len(keyed))])
        done += len(records)
    log.warning("gave %d points of %s their live key in %.1f s (once: searches of a store "
                "of several agents name one indexed key instead of four conditions)",
                done, path, time.perf_counter() - started)
    return not shard.count(qe.CountRequest(exact=True, filter=missing))


def mend(shard: qe.EdgeShard, *, room: RoomCheck, moved: MovedPoints, path: Path) -> bool:
    """Give their own key back to points whose key names another state; False when some
    could not be mended (no room on the disk: the store then reads unkeyed).

    Only a writer that does not keep the key leaves one stale: an older version that opened
    the store meanwhile (it deletes, restores or supersedes without touching the key) or a
    direct engine write. A stale key would show a deleted note or hide a restored one, so
    each state's key values are read by facets over RAM indexes and a point whose key
    belongs to another state gets the one its fields make. The lapsed keys a previous handle
    wrote are among them: a new handle knows no lapse time, so they go back to their state's
    key until its first lapse.
    """
    active, replaced = Match(ACTIVE, True), IsEmpty(SUCCESSOR)
    states = ((Where(must=(active, replaced)), {"is_active": True}),
              (Where(must=(active,), must_not=(replaced,)), {"is_active": True,
                                                              "superseded_by": "?"}),
              (Where(must_not=(active,)), {"is_active": False}))
    mended = lapsed = 0
    for where, fields in states:
        facet = shard.facet(qe.FacetRequest(key=LIVE_KEY, limit=MAX_AGENT_KEYS, exact=True,
                                            filter=to_edge(where)))
        for hit in facet.hits:
            agent = key_agent(str(hit.value))
            if not hit.count or agent is None:
                continue
            right = live_key({"agent_id": agent, **fields})
            if right == hit.value:
                continue
            stale = to_edge(Where(must=(where, Match(LIVE_KEY, str(hit.value)))))
            assert stale is not None  # a Where with a condition always translates
            ids = [str(r.id) for records in pages(shard, stale) for r in records]
            try:
                room(len(ids), KEY_BYTES * len(ids))
            except DiskFullError as exc:
                log.warning("%d points of %s carry the live key of another state and the "
                            "disk has no room to mend it (%s); searches say every "
                            "condition until an open with room", len(ids), path, exc)
                return False
            shard.update(qe.UpdateOperation.set_payload_by_filter(stale, {LIVE_KEY: right}))
            moved.mark(ids)
            if hit.value == lapsed_key(agent):
                lapsed += len(ids)  # the round trip of every open after an expiry: no news
            else:
                mended += len(ids)
    if lapsed:
        log.debug("gave %d expired points of %s their state's key until this handle's first "
                  "lapse", lapsed, path)
    if mended:
        log.warning("gave %d points of %s back the live key of their state (a writer that "
                    "does not keep it, such as an older version, changed them)", mended, path)
    return True


__all__ = ["KEYED_FIELDS", "KEY_BYTES", "MAX_AGENT_KEYS", "SOURCES", "expiry_came", "fill",
           "first_expiry", "mend", "pages"]
