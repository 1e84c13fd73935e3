"""Fixtures for the tools tests: one in-memory note store per module, a fresh tenant per test.

Opening an embedded store costs about half a second on a busy machine, so tests share one per
module and isolate themselves by agent id instead (tenancy is exactly what the store enforces).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from tools import ToolFacade

SEED = [
    ("Alice prefers green tea over coffee in the morning", ["alice"]),
    ("Bob drives a red electric car to work", ["bob"]),
    ("The project deadline for the search engine is in March", []),
    ("爱丽丝喜欢喝绿茶", ["alice"]),
]


@dataclass(frozen=True)
class Tenants:
    """The two agents of one test: ``alice`` has the SEED notes, ``mallory`` one secret."""

    store: MemoryStore
    alice: str
    mallory: str


@pytest.fixture(scope="module")
def memory() -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="default") as store:
        yield store


@pytest.fixture
def tenants(memory: MemoryStore) -> Tenants:
    tag = uuid.uuid4().hex[:8]
    t = Tenants(memory, f"alice-{tag}", f"mallory-{tag}")
    for text, subjects in SEED:
        memory.add(text, subjects, enrich=False, agent_id=t.alice)
    memory.add("Mallory's secret: the vault code is 4711", [], enrich=False, agent_id=t.mallory)
    return t


@pytest.fixture
def facade(tenants: Tenants) -> ToolFacade:
    return ToolFacade(tenants.store, None, agent_id=tenants.alice)


@pytest.fixture(scope="module")
def lcm_store() -> Iterator[object]:
    """An in-memory lcm store with one conversation for agent 'alice' and one for 'mallory'."""
    from lcm import LcmStore

    with LcmStore(":memory:") as store:
        store.ingest("agent:alice:main", [
            {"role": "user", "content": "My flight to Lisbon is TP1234 on May 3rd"},
            {"role": "assistant", "content": "Noted: flight TP1234 to Lisbon on May 3rd."}])
        store.ingest("agent:mallory:main", [
            {"role": "user", "content": "Mallory's flight to Oslo, booking code ZX9"}])
        yield store
