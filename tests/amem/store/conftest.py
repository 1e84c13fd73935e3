"""Fixtures for the note store: a hashing embedder, a fixed clock, stores on both backends."""

from __future__ import annotations

from typing import Iterator

import pytest

from amem import MemoryStore, load_config
from amem.backends import QdrantServerBackend
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(dim=256)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-01-10T12:00:00+00:00")


def make_store(kind: str, embedder: HashingEmbedder, clock: ManualClock, **overrides: object
               ) -> MemoryStore:
    config = load_config(overrides=overrides)
    if kind == "edge":
        return MemoryStore(":memory:", config=config, embedder=embedder, clock=clock)
    backend = QdrantServerBackend.local(":memory:", "amem", embedder.dim)
    return MemoryStore(config=config, embedder=embedder, clock=clock, backend=backend)


@pytest.fixture(params=["edge", "qdrant-local"])
def store(request: pytest.FixtureRequest, embedder: HashingEmbedder,
          clock: ManualClock) -> Iterator[MemoryStore]:
    with make_store(request.param, embedder, clock) as s:
        yield s


@pytest.fixture
def edge_store(embedder: HashingEmbedder, clock: ManualClock) -> Iterator[MemoryStore]:
    with make_store("edge", embedder, clock) as s:
        yield s
