"""The vector-backend seam: one logical schema, several Qdrant engines.

Every backend stores one collection of points. A point has a UUID string id, a named dense
vector ``dense`` (cosine), a named sparse vector ``bm25`` (the engine applies the IDF modifier;
the client sends saturated term frequencies) and a JSON payload. Keyword payload indexes exist
for the fields in ``KEYWORD_INDEXES`` (``agent_id`` is the tenant key), boolean ones for
``BOOL_INDEXES`` and float ones for ``FLOAT_INDEXES`` (epoch seconds, for ranges).

Every field a read-path filter names is indexed, ``IsEmpty`` ones included: the engine keeps a
null index beside each payload index (Qdrant >= 1.13.5, qdrant-edge 0.9), so ``IsEmpty`` on an
indexed field is answered from RAM, while on an unindexed one every candidate's payload is read
(``IsEmpty("superseded_by")`` made a dense query at 10k notes 60 ms instead of 2.3 ms).

Filters are a small backend-neutral tree (``Where`` of ``Match``/``MatchAny``/``IsEmpty``/
``HasId``/``Range``) that each backend translates to its engine's own filter type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Protocol, Sequence, Union

import numpy as np

DENSE = "dense"
SPARSE = "bm25"
#: ``links``: the notes linking to one note (the inspector's "links in" and graph) are found
#: by the index instead of reading every payload (a note's page at 10k notes: 180 ms unindexed);
#: ``tag_keys``: the search filter by tag (``amem search --tag``, any case), in RAM as the read
#: path's are; ``tags``: the open's look for tagged notes without keys (``amem.upgrades.key_tags``)
KEYWORD_INDEXES = ("agent_id", "id", "hash", "folded_hashes", "category", "note_type", "topics",
                   "subjects", "subject_keys", "meta_kv", "superseded_by", "supersedes", "links",
                   "tags", "tag_keys")
#: ``links_owed``: the notes whose back-links a killed write left unwritten (``amem.backlinks``),
#: found by the next write without reading every payload
BOOL_INDEXES = ("is_active", "pending_merge", "vector_stale", "links_owed")
#: numeric fields filtered by range: a note's event time and expiry as epoch seconds
FLOAT_INDEXES = ("event_ts", "expires_ts")
#: indexes only writes and maintenance read (dedup, field updates, the merge queue, refresh):
#: kept on disk (memory-mapped) in a new store; the read path's stay in RAM (opening 50k notes:
#: 283 MB instead of 301; ``hash`` alone had held 21 MB).
ON_DISK_INDEXES = ("id", "hash", "folded_hashes", "category", "pending_merge", "vector_stale",
                   "links_owed", "tags")

Scalar = Union[str, int, bool]


@dataclass(frozen=True)
class Match:
    """``field`` equals ``value`` (for an array field: contains it)."""

    field: str
    value: Scalar


@dataclass(frozen=True)
class MatchAny:
    """``field`` equals one of ``values`` (for an array field: shares one)."""

    field: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class IsEmpty:
    """``field`` is missing, null or an empty array."""

    field: str


@dataclass(frozen=True)
class Range:
    """``field`` is a number within the given bounds (None: unbounded on that side).

    A point whose ``field`` is missing or not a number never matches.
    """

    field: str
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None


@dataclass(frozen=True)
class HasId:
    """The point id is one of ``ids``."""

    ids: tuple[str, ...]


@dataclass(frozen=True)
class Where:
    """All of ``must``, at least one of ``should`` (when given), none of ``must_not``."""

    must: tuple["Condition", ...] = ()
    should: tuple["Condition", ...] = ()
    must_not: tuple["Condition", ...] = ()


Condition = Union[Match, MatchAny, IsEmpty, HasId, Range, Where]


@dataclass(frozen=True)
class SparseVector:
    """Sorted unique ``indices`` with their ``values``."""

    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass
class Point:
    """One point to write."""

    id: str
    dense: np.ndarray
    sparse: SparseVector
    payload: dict[str, Any]


@dataclass
class Hit:
    """One point read back: from a query (``score`` set) or a retrieve/scroll (``score`` 0)."""

    id: str
    score: float = 0.0
    payload: dict[str, Any] = field(default_factory=dict)
    dense: np.ndarray | None = None


@dataclass
class Legs:
    """Both rankings of one search, read in one engine round trip (``search_legs``), or the
    dense one read after the sparse one was handed in (read while the query was embedded)."""

    #: the BM25 ranking, best first (``score``: the IDF-weighted dot); empty without terms
    sparse: list[Hit]
    #: the dense ranking, best first (``score``: the cosine)
    dense: list[Hit]
    #: the cosine of every sparse hit, computed by the engine from its stored vector: z-score
    #: fusion needs the BM25-only candidates' cosines, which no longer cost a second read
    sparse_cosines: dict[str, float]


#: a point's agent and state in one keyword (the edge backend writes it on every point): a
#: read of an agent's live notes names this key instead of the tenant beside ``is_active``,
#: ``IsEmpty("superseded_by")`` and the expiry. On a plain segment the tenant beside any other
#: condition doubles the engine's scan (100k points: 29.2 ms against 10.9 for the key alone,
#: scratch ``legs13.py``; the key beside the expiry 28.6, beside ``must_not HasId`` of the
#: lapsed notes 27.7, scratch ``legs14.py``), and a store whose agents ever deleted, replaced
#: or let expire a note names them for good.
LIVE_KEY = "live_key"
#: the key's state prefixes; a valid agent id has no control character, so each key names one
#: agent and one state (an id holding the separator gets :data:`NO_AGENT_KEY`)
_SEP = "\x1f"
_SUPERSEDED, _INACTIVE = f"{_SEP}superseded{_SEP}", f"{_SEP}inactive{_SEP}"
#: an active note whose expiry came by the handle's ``lapsed_upto`` (``StoreFacts``)
_LAPSED = f"{_SEP}lapsed{_SEP}"
#: the key of a point without a usable agent id: no read names it
NO_AGENT_KEY = f"{_SEP}none"
#: the field of a note's expiry (epoch seconds; the live reads' range: expired at or before now)
EXPIRY_FIELD = "expires_ts"


def _expired_by(value: Any, upto: float) -> bool:
    """An ``expires_ts`` the range ``lte=upto`` matches (a number, not NaN, at or before)."""
    return (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
            and float(value) <= upto)


def live_key(payload: Mapping[str, Any], lapsed_upto: float = -math.inf) -> str:
    """The :data:`LIVE_KEY` of a point with this payload: its agent when it is active
    (``is_active`` true), not expired by ``lapsed_upto`` (its ``expires_ts`` after it, or
    none) and current (``superseded_by`` empty, as ``IsEmpty`` reads it), else the agent
    behind its state's prefix."""
    agent = payload.get("agent_id")
    if not isinstance(agent, str) or not agent or _SEP in agent:
        return NO_AGENT_KEY
    active = payload.get("is_active")
    if not (isinstance(active, (bool, np.bool_)) and bool(active)):
        return _INACTIVE + agent
    if _expired_by(payload.get(EXPIRY_FIELD), lapsed_upto):
        return _LAPSED + agent
    successor = payload.get("superseded_by")
    if successor is not None and not (isinstance(successor, (list, tuple)) and not successor):
        return _SUPERSEDED + agent
    return agent


def lapsed_key(agent: str) -> str:
    """The key of ``agent``'s active notes whose expiry came (``StoreFacts.lapsed_upto``)."""
    return _LAPSED + agent


def key_agent(key: str) -> str | None:
    """The agent a :data:`LIVE_KEY` value names (None for :data:`NO_AGENT_KEY`)."""
    for prefix in (_SUPERSEDED, _INACTIVE, _LAPSED):
        if key.startswith(prefix):
            return key[len(prefix):]
    return None if key.startswith(_SEP) else key


def live_keys(agent: str, *, current: bool) -> tuple[str, ...]:
    """The keys of ``agent``'s active notes not lapsed (``current``: not superseded either)."""
    return (agent,) if current else (agent, _SUPERSEDED + agent)


@dataclass(frozen=True)
class StoreFacts:
    """What holds for every point of a store now, as a handle that is the store's only writer
    knows it; the default knows nothing (every condition stays in the filters).

    A condition that excludes no point is vacuous, and on a plain segment every condition
    costs the engine's scan (``amem.backends._edge_live``). A reader leaving one out must find
    ``epoch`` unchanged after its reads: it moves *before* a write makes any fact false.
    """

    #: the agent owning every point (None: none, several, or not known)
    sole_agent: str | None = None
    #: every point has ``is_active`` true
    all_active: bool = False
    #: no point has a ``superseded_by`` value
    none_superseded: bool = False
    #: no point has an ``expires_ts`` before this time (epoch seconds; the expiry condition is
    #: a range, which no other value matches): until then the expiry hides nothing. ``inf``
    #: when no point expires, ``-inf`` when not known.
    expiry_from: float = -math.inf
    #: every point carries its :data:`LIVE_KEY` (it is written with every point and every
    #: state change, so this never turns false while the handle is open)
    keyed: bool = False
    #: every active point whose expiry is at or before this time carries the lapsed key
    #: (``-inf``: none does); a read at an earlier time cannot name the key (it would hide
    #: notes that are not expired yet at that time)
    lapsed_upto: float = -math.inf
    #: no point's expiry lies between ``lapsed_upto`` (excluded) and this time: until then a
    #: read naming the key has nothing left for the expiry's range to hide
    key_expiry_from: float = -math.inf
    epoch: int = 0

    def expiry_vacuous(self, now: float) -> bool:
        """No point's expiry is at or before ``now`` (epoch seconds)."""
        return now < self.expiry_from

    def key_usable(self, now: float) -> bool:
        """A read at ``now`` may name the key: every point carries it and no lapsed key hides
        a note whose expiry is still to come at ``now``."""
        return self.keyed and self.lapsed_upto <= now

    def key_hides_expired(self, now: float) -> bool:
        """The key alone leaves out every note expired at ``now`` (the lapsed ones carry
        their own key and no other point's expiry has come)."""
        return self.key_usable(now) and now < self.key_expiry_from

    def left_out(self, now: float) -> list[str]:
        """The conditions a read on these facts leaves out of its filters at ``now`` ("tenant":
        in the only agent's reads), as ``amem status`` names them."""
        return [name for name, vacuous in (("tenant", self.sole_agent is not None),
                                           ("is_active", self.all_active),
                                           ("expiry", self.expiry_vacuous(now)
                                            or self.key_hides_expired(now)),
                                           ("supersession", self.none_superseded)) if vacuous]


#: nothing known: a filter says every condition
NOTHING_KNOWN = StoreFacts()


class VectorBackend(Protocol):
    """What the note store needs from a vector engine. All ids are UUID strings."""

    def upsert(self, points: Sequence[Point]) -> None:
        """Insert or replace whole points."""
        ...

    def set_payload(self, point_id: str, payload: dict[str, Any]) -> None:
        """Merge ``payload`` keys into one point's payload (other keys stay)."""
        ...

    def update_point(
        self, point_id: str, payload: dict[str, Any], *, where: Where | None = None,
        dense: np.ndarray | None = None, sparse: SparseVector | None = None,
    ) -> bool:
        """Change named parts of one existing point that matches ``where``; never create one.

        ``payload`` keys are merged in (other keys stay), ``dense``/``sparse`` replace those
        vectors when given. False (and nothing written) when the point is missing or does not
        match ``where``: a writer holding an old snapshot cannot bring back a point deleted
        since, nor, with ``where``, a soft-deleted note or another tenant's one. The payload is
        written before the vectors, and the two are not one transaction: a caller that must
        survive a kill in between marks the point first and clears the mark in a second call.
        """
        ...

    def retrieve(self, ids: Sequence[str], *, with_vectors: bool = False,
                 with_payload: bool = True) -> list[Hit]:
        """The points that exist among ``ids`` (missing ids are left out); ``with_payload``
        false leaves every ``payload`` empty (a caller after the vectors only)."""
        ...

    def dense_search(
        self, vector: np.ndarray, where: Where | None, limit: int, *, with_vectors: bool = False,
        exact: bool = False, fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Nearest points by cosine, best first; ``score`` is the cosine.

        ``exact`` skips the approximate (HNSW) index: consolidation needs every neighbour.
        ``fields`` names the payload keys to return (None: all of them): turning whole
        payloads into Python dicts cost a search's candidates as much as the query itself.
        """
        ...

    def sparse_search(self, vector: SparseVector, where: Where | None, limit: int, *,
                      fields: Sequence[str] | None = None, with_vectors: bool = False
                      ) -> list[Hit]:
        """Points sharing a term with ``vector``, best first; ``score`` is the IDF-weighted dot
        (``fields`` as in ``dense_search``). ``with_vectors``: each hit's ``dense`` set too
        (a search reads them while its query is embedded, so that ``search_legs`` scores
        these hits without another query)."""
        ...

    def search_legs(self, dense: np.ndarray, sparse: SparseVector | None, where: Where | None,
                    limit: int, *, fields: Sequence[str] | None = None,
                    sparse_hits: Sequence[Hit] | None = None) -> Legs:
        """The dense and the sparse ranking (``limit`` each, ``where`` on both) and the cosine
        of every sparse hit, in one engine round trip (a batch of queries): a search paid
        three calls for them (``sparse=None``: no sparse ranking). ``fields`` as in
        ``dense_search``.

        ``sparse_hits`` (with ``sparse`` None): the sparse ranking already read by
        ``sparse_search`` with the same ``where``, ``limit`` and ``fields`` (a search runs it
        while its query is embedded); it is returned as the legs' ``sparse`` with the cosine
        of each hit, and only the dense query runs; a hit carrying its vector is scored from
        it, without the engine. Both given: ``ValidationError``."""
        ...

    def generation(self) -> int | None:
        """A number that changes with every write through this handle that a filter can see
        (the held retrieval counts excepted: no filter names them), or None when other
        processes may write the store too (a shared server): then nothing derived from a
        read may be kept across calls. A reader keeps such a derived value while this is
        unchanged (the search's lapsed successors, ``amem.search.visibility``)."""
        ...

    def store_facts(self) -> StoreFacts:
        """What holds for every point now (:class:`StoreFacts`), when this handle is the
        store's only writer and knows it, else :data:`NOTHING_KNOWN`. A read may leave out the
        conditions the facts make vacuous (the tenant of the only agent, ``is_active``, expiry,
        supersession), then must find the epoch unchanged after its reads."""
        ...

    def lapse(self, now: float) -> bool:
        """Give the notes whose expiry came by ``now`` (epoch seconds) the lapsed key, for a
        backend whose facts say ``keyed``; True when the keys hold up to ``now``. A backend
        writing no key does nothing (False)."""
        ...

    def keep_fields(self, fields: Sequence[str], limit: int) -> bool:
        """Keep the named payload fields of up to ``limit`` points in this process's RAM,
        read in the background and kept current by this handle's writes, so reads asking for
        exactly these fields come from RAM; True if it does. For long-running processes; a
        backend whose store other processes write (a shared server) does nothing (False)."""
        ...

    def field_table(self, wait: float = 0.0) -> dict[str, Any] | None:
        """What ``keep_fields`` keeps, after waiting up to ``wait`` seconds for a fill in
        progress to end: state ("reading back", "filling", "filled", "stopped", "failed:
        ..."), points, passes, seconds of the last pass, MiB of the store read back into the
        page cache before the first pass (``read_back_mb``); None when nothing is kept."""
        ...

    def hybrid_rrf(
        self, dense: np.ndarray, sparse: SparseVector, where: Where | None, limit: int,
        prefetch: int, k: int = 60, *, weights: tuple[float, float] | None = None,
    ) -> list[Hit]:
        """The engine's own RRF of a dense and a sparse prefetch (scores 1/(k + rank), rank from 1).

        ``weights=(dense, sparse)``: Qdrant's weighted RRF, 1/(k + rank / weight) per list.
        """
        ...

    def times(self, where: Where | None, field: str, limit: int, *,
              start: float | None = None) -> list[tuple[str, float]]:
        """Up to ``limit`` matching points as ``(id, value of field)``, in the field's order.

        ``field`` must carry a float payload index: the engine orders by it and hands back each
        value from the index, without reading a payload (search's neighbour window,
        ``amem.search.adjacent``: reading the payloads cost three times the scan). ``start``:
        no value below it is asked for (a window's lowest bound), so the engine's ordered
        read begins there instead of at the field's smallest value."""
        ...

    def scroll(
        self, where: Where | None, *, limit: int = 256, offset: str | None = None,
        with_vectors: bool = False, fields: Sequence[str] | None = None,
    ) -> tuple[list[Hit], str | None]:
        """One page of points in id order and the offset of the next page (None at the end);
        ``fields`` as in ``dense_search``."""
        ...

    def iterate(self, where: Where | None = None, *, with_vectors: bool = False,
                batch: int = 256) -> Iterator[Hit]:
        """Every matching point, page by page."""
        ...

    def count(self, where: Where | None = None) -> int:
        """The exact number of matching points."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Remove points (hard delete; notes are soft-deleted through their payload)."""
        ...

    def read_meta(self) -> dict[str, Any]:
        """The store's metadata (embedder id and dim, BM25 statistics, schema version)."""
        ...

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Replace the store's metadata."""
        ...

    def optimize(self) -> None:
        """Build indexes (HNSW). Slow on big stores: maintenance only, never on a request."""
        ...

    def flush(self) -> None:
        """Make every acknowledged write durable."""
        ...

    def close(self) -> None:
        """Release the engine (and its lock)."""
        ...
