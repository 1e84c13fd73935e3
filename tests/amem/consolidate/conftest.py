"""Fixtures for consolidation: a table embedder with planted vectors, stores, a crashing backend."""

from __future__ import annotations

import math
from typing import Any, Iterator, Sequence

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend, QdrantServerBackend
from amem.backends.base import Point
from amem.kernel.clock import ManualClock
from amem.embed.base import l2_normalise
from amem.embed.hashing import HashingEmbedder
from amem.notes import Note
from tests.fakes.backends import FlakyBackend

DIM = 32


class TableEmbedder:
    """Planted vectors: a text starting with a known content gets that content's vector.

    The store embeds ``content + keywords + tags + context``; looking up by the content prefix
    keeps a merged note (same content, more keywords) on its planted vector, so tests control
    every cosine. Unknown texts fall back to the hashing embedder.
    """

    def __init__(self, table: dict[str, np.ndarray] | None = None) -> None:
        self.table: dict[str, np.ndarray] = dict(table or {})
        self._fallback = HashingEmbedder(dim=DIM)

    @property
    def model_id(self) -> str:
        return f"table-{DIM}"

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        rows = []
        for text in texts:
            keys = [k for k in self.table if text.startswith(k)]
            if keys:
                rows.append(self.table[max(keys, key=len)])
            else:
                rows.append(self._fallback.embed([text])[0])
        return l2_normalise(np.stack(rows))


def angle_vector(degrees: float, axis: int = 0) -> np.ndarray:
    """A unit vector in the plane of axes ``axis`` and ``axis + 1`` at ``degrees``."""
    v = np.zeros(DIM, dtype=np.float32)
    v[axis] = math.cos(math.radians(degrees))
    v[axis + 1] = math.sin(math.radians(degrees))
    return v

@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-03-01T12:00:00+00:00")


@pytest.fixture
def table() -> TableEmbedder:
    return TableEmbedder()


def open_store(kind: str, embedder: Any, clock: ManualClock, *, flaky: bool = False,
               llm: Any = None) -> MemoryStore:
    if kind == "edge":
        inner: Any = EdgeBackend.temporary(embedder.dim)
    else:
        inner = QdrantServerBackend.local(":memory:", "amem", embedder.dim)
    backend = FlakyBackend(inner) if flaky else inner
    return MemoryStore(config=load_config(), embedder=embedder, clock=clock, backend=backend,
                       llm=llm)


@pytest.fixture(params=["edge", "qdrant-local"])
def store(request: pytest.FixtureRequest, table: TableEmbedder,
          clock: ManualClock) -> Iterator[MemoryStore]:
    with open_store(request.param, table, clock) as s:
        yield s


@pytest.fixture
def edge_store(table: TableEmbedder, clock: ManualClock) -> Iterator[MemoryStore]:
    with open_store("edge", table, clock) as s:
        yield s


def put(store: MemoryStore, note_id: str, content: str, *, vector: np.ndarray | None = None,
        agent: str = "default", **fields: Any) -> Note:
    """Write one note as given (no write pipeline), planting its vector when given."""
    note = Note(id=note_id, content=content, agent_id=agent, timestamp="2026-01-01T00:00:00+00:00",
                **fields)
    if vector is not None:
        table = store.embedder
        assert isinstance(table, TableEmbedder)
        table.table[content] = vector
    store.index.save_note(note)
    return note


def state(store: MemoryStore, agent: str | None = None) -> dict[str, tuple[Any, ...]]:
    """Everything a merge may change, per note (including inactive ones)."""
    out = {}
    for note, _ in store.iter_notes(agent_id=agent, include_inactive=True):
        out[note.id] = (note.is_active, note.merged_into, tuple(note.links), note.content,
                        note.retrieval_count, tuple(note.keywords), tuple(note.tags),
                        note.pending_merge, tuple(sorted(note.folded_hashes)))
    return out


def link_problems(store: MemoryStore, agent: str | None = None) -> list[str]:
    """Every broken link among the agent's active notes (empty when consistent)."""
    notes = {n.id: n for n, _ in store.iter_notes(agent_id=agent, include_inactive=True)}
    problems = []
    for note in notes.values():
        if not note.is_active:
            continue
        if len(set(note.links)) != len(note.links):
            problems.append(f"{note.id} has repeated links {note.links}")
        for target in note.links:
            if target == note.id:
                problems.append(f"{note.id} links to itself")
            elif target not in notes:
                problems.append(f"{note.id} links to missing {target}")
            elif not notes[target].is_active:
                problems.append(f"{note.id} links to inactive {target}")
    return problems
