"""The default embedder's store for the tests of what a fold or merge may join (e5-small:
whether two notes read as one depends on similarity). Imported by those test modules, whose
fixtures then stand in for the package's table-embedder ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from amem import MemoryStore
from amem.embed import make_embedder
from amem.kernel.clock import ManualClock


@pytest.fixture(scope="module")
def embedder() -> Any:
    return make_embedder("e5-small")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-11-03T09:00:00+00:00")


@pytest.fixture
def store(embedder: Any, clock: ManualClock) -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=embedder, agent_id="u", clock=clock) as store:
        yield store
