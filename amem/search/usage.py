"""Usage heat: which questions led an agent to open a note, kept with the note.

A retrieval count says a note was *returned*, not that it answered (``benchmarks.heat_bench``:
no form of it helped). What does say so is the agent opening the note after a search
(``MemoryStore.get``, the ``memory_get`` tool). So the store keeps, per agent and in memory
only, the query vectors of its last searches and the note ids each returned
(:class:`RecentSearches`); a ``get`` of a note one of them returned appends that query's
vector to the note's payload field :data:`FIELD` (at most :data:`PER_NOTE`, oldest dropped).
Search then boosts a candidate whose stored queries include one nearly identical to the new
query (``amem.ranking.usage_boost``): the same question asked again finds the note it opened
last time first, while an unrelated question (e5: cosine 0.8-0.9 between different questions
of one conversation) sees no change.

The field is ``{"embedder": model_id, "queries": [base64 float16, ...]}``; queries of another
embedder (the store was re-embedded) are ignored and replaced by the next open. Searches and
opens in different processes (two ``amem`` CLI calls) are not connected: only a long-lived
store (``amem serve``, a script) records anything.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ..index import NoteIndex
from ..kernel.errors import DiskFullError
from ..notes import point_id

log = logging.getLogger(__name__)

#: the payload field holding the queries that led to opening the note
FIELD = "opened_by"
#: queries kept per note: a few distinct questions; a fifth pushes out the oldest
PER_NOTE = 4
#: searches remembered per agent (a get refers to one of the agent's recent searches)
PER_AGENT = 32
#: agents remembered per store (least recently searching agent forgotten first)
MAX_AGENTS = 64
#: a query this close to one already stored is the same question: not stored twice
SAME_QUERY = 0.999
#: seconds a get waits for the write lock to record usage heat before it gives up
OPEN_LOCK_WAIT_S = 0.25


@dataclass
class _Search:
    vector: np.ndarray
    ids: frozenset[str]
    #: notes already recorded for this search (a second get of the same note adds nothing)
    recorded: set[str] = field(default_factory=set)


class RecentSearches:
    """Per agent, the last ``per_agent`` searches: query vector and returned note ids.

    Bounded twice (searches per agent, agents per store), thread-safe, never persisted.
    """

    def __init__(self, per_agent: int = PER_AGENT, max_agents: int = MAX_AGENTS) -> None:
        if per_agent < 1 or max_agents < 1:
            raise ValueError("per_agent and max_agents must be >= 1")
        self._per_agent = per_agent
        self._max_agents = max_agents
        self._by_agent: OrderedDict[str, list[_Search]] = OrderedDict()
        self._lock = threading.Lock()

    def searched(self, agent_id: str, vector: np.ndarray, note_ids: Iterable[str]) -> None:
        """Remember one search of ``agent_id`` (its query vector, the note ids it returned)."""
        ids = frozenset(note_ids)
        if not ids:
            return
        entry = _Search(np.asarray(vector, dtype=np.float32).copy(), ids)
        with self._lock:
            searches = self._by_agent.pop(agent_id, [])
            searches.append(entry)
            del searches[:-self._per_agent]
            self._by_agent[agent_id] = searches
            while len(self._by_agent) > self._max_agents:
                self._by_agent.popitem(last=False)

    def opened(self, agent_id: str, note_id: str) -> np.ndarray | None:
        """The query vector of ``agent_id``'s latest search that returned ``note_id`` and has
        not recorded it yet (then marked recorded), or None."""
        with self._lock:
            for entry in reversed(self._by_agent.get(agent_id, [])):
                if note_id in entry.ids:
                    if note_id in entry.recorded:
                        return None
                    entry.recorded.add(note_id)
                    return entry.vector
        return None

    def __len__(self) -> int:
        with self._lock:
            return sum(len(s) for s in self._by_agent.values())


def encode(vector: np.ndarray) -> str:
    """A unit query vector as base64 float16 (half the bytes of float32; the cosine of two
    decoded e5 vectors moves by less than 1e-3, far below the boost's threshold band)."""
    return base64.b64encode(np.asarray(vector, dtype="<f2").tobytes()).decode("ascii")


def decode(text: Any, dim: int) -> np.ndarray | None:
    """The vector of :func:`encode`, or None for anything that is not one of ``dim`` floats."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    if len(raw) != 2 * dim:
        return None
    vec = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    return vec if np.all(np.isfinite(vec)) else None


def stored_queries(value: Any, model_id: str, dim: int) -> list[np.ndarray]:
    """The decodable query vectors of a payload's :data:`FIELD` written by ``model_id``."""
    if not isinstance(value, dict) or value.get("embedder") != model_id:
        return []
    queries = value.get("queries")
    if not isinstance(queries, list):
        return []
    return [v for v in (decode(q, dim) for q in queries) if v is not None]


def with_query(value: Any, model_id: str, vector: np.ndarray, *,
               cap: int = PER_NOTE) -> dict[str, Any] | None:
    """The :data:`FIELD` value after one more open by ``vector``; None when nothing changes
    (the same question is already stored). Kept: the newest ``cap`` distinct queries."""
    if cap < 1:
        raise ValueError("cap must be >= 1")
    dim = int(np.asarray(vector).shape[0])
    kept = stored_queries(value, model_id, dim)
    unit = np.asarray(vector, dtype=np.float32)
    if any(_cosine(unit, q) >= SAME_QUERY for q in kept):
        return None
    queries = [encode(q) for q in kept] + [encode(unit)]
    return {"embedder": model_id, "queries": queries[-cap:]}


def best_cosine(value: Any, model_id: str, query: np.ndarray) -> float | None:
    """The highest cosine of ``query`` with a stored query of a payload's :data:`FIELD`
    (None when it holds none)."""
    dim = int(np.asarray(query).shape[0])
    kept: Sequence[np.ndarray] = stored_queries(value, model_id, dim)
    if not kept:
        return None
    unit = np.asarray(query, dtype=np.float32)
    return max(_cosine(unit, q) for q in kept)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine, not a dot product: float16 round trips leave vectors a hair off unit length."""
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b)) / norm if norm > 0 else 0.0


class UsageRecorder:
    """Records on a note the query of the agent's recent search that returned it, when the
    agent opens it (``MemoryStore.get``); the searches are remembered in ``recent``."""

    def __init__(self, index: NoteIndex, recent: RecentSearches | None = None) -> None:
        self._index = index
        self.recent = recent if recent is not None else RecentSearches()

    def opened(self, note_id: str, agent_id: str) -> None:
        """A note no recent search of this agent returned records nothing."""
        query = self.recent.opened(agent_id, note_id)
        if query is None:
            return
        index = self._index
        # Read and append as one change (two opens must not lose one), but a read never waits
        # behind maintenance holding the lock for minutes (consolidation): then it is not kept.
        if not index.lock.acquire(timeout=OPEN_LOCK_WAIT_S):
            log.info("usage heat: note %s opened while the store was busy; not recorded", note_id)
            return
        try:
            hits = index.backend.retrieve([point_id(agent_id, note_id)])
            if not hits or hits[0].payload.get("id") != note_id:
                return
            value = with_query(hits[0].payload.get(FIELD), index.embedder.model_id, query)
            if value is not None:
                index.update_note_fields(note_id, agent_id, {FIELD: value})
        except DiskFullError as exc:  # a read must not fail for its ranking hint
            log.warning("usage heat: note %s opened, not recorded: the disk is full: %s", note_id, exc)
        finally:
            index.lock.release()
