"""The read path's cost guard: a full search stays within 2x of the engine's query + embedding.

Search's promise is to cost little over the engine's own hybrid query plus the query
embedding (issue 25 aims at 1.3x). A condition no engine index serves, or a feature reading
every candidate, costs 3-5x at a few thousand notes; 2x leaves room for noise on a shared
machine. The floor is measured interleaved with the searches (same query, same moment).

The default embedder (e5-small) embeds the queries: its ~10 ms is what every search pays and
what the ratio is about; the notes' vectors are random (the engine's cost does not depend on
what they mean), so building the store embeds nothing.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.bm25 import query_vector
from amem.embed import make_embedder
from amem.kernel.clock import ManualClock
from amem.notes import Note, content_hash
from amem.text import tokenize
from benchmarks import search_bench

from .test_read_path_indexed import FILTER_KINDS

NOTES = 4000
QUERIES = 15
LIMIT = 2.0
WORDS = ("alice bob carol launch budget review apollo hermes berlin paris office moved team "
         "lunch friday coffee tea database staging release plan hired contract signed").split()


def build(store: MemoryStore, clock: ManualClock) -> None:
    """NOTES notes of one agent with every field a filter reads, and an expired successor."""
    rnd = random.Random(5)
    vectors = np.random.default_rng(5).normal(size=(NOTES, store.embedder.dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    stamp = "2026-01-01T00:00:00+00:00"
    points = []
    for i in range(NOTES):
        text = " ".join(rnd.choice(WORDS) for _ in range(10))
        knowledge = i % 10 == 0
        note = Note(
            id=f"n{i}", content=text, agent_id=store.agent_id, timestamp=stamp,
            last_accessed=stamp, hash=content_hash(text), event_time=stamp,
            subjects=["alice"] if i % 3 == 0 else [], note_type="knowledge" if knowledge else "memory",
            topics=["launch", "budget"] if knowledge else [],
            metadata={"project": "apollo" if i % 2 else "hermes", "priority": i % 3},
            tags=["travel"] if i % 4 == 1 else ["work"] if i % 4 == 3 else [],
            expires_at="2026-01-10T12:01:00+00:00" if i % 50 == 7 else "",
            superseded_by="n7" if i % 40 == 1 else None,
            supersedes=[f"n{j}" for j in range(1, NOTES, 40)] if i == 7 else [])
        points.append(store.index.make_point(note, vectors[i]))
    for start in range(0, NOTES, 1000):
        store.index.write_points(points[start:start + 1000])
    clock.advance(120)  # the notes with an expiry are past it: invisible, not swept


def ratio(store: MemoryStore, queries: list[str], options: dict[str, Any]) -> tuple[float, str]:
    """Median full search over median (engine hybrid query + query embedding). The floor's
    filter is the search benchmark's: the tenant said as the search says it."""
    floor_where = search_bench.floor_where(store, store.agent_id)
    full, floor = [], []
    for query in queries:
        t0 = time.perf_counter()
        found = store.search(query, limit=5, **options)
        t1 = time.perf_counter()
        qvec = store.index.embed_query(query)
        store.index.backend.hybrid_rrf(qvec, query_vector(tokenize(query)), floor_where, 5,
                                       prefetch=50)
        floor.append(time.perf_counter() - t1)
        full.append(t1 - t0)
        assert found  # the filter let the search run to its end
    f, e = statistics.median(full), statistics.median(floor)
    return f / e, f"full {1000 * f:.1f} ms, engine + embed {1000 * e:.1f} ms"


@pytest.mark.slow
@pytest.mark.parametrize("agents", [1, 2], ids=["one agent", "two agents"])
def test_search_costs_at_most_twice_the_engine_and_embedding(tmp_path: Path, agents: int) -> None:
    clock = ManualClock("2026-01-10T12:00:00+00:00")
    embedder = make_embedder("e5-small", cache_dir=tmp_path / "models")
    with MemoryStore(":memory:", config=load_config(), embedder=embedder, clock=clock) as store:
        build(store, clock)
        if agents == 2:  # another agent's note: every search names its tenant
            store.add("Another agent's note about the Apollo budget", agent_id="other",
                      enrich=False)
        assert (store.index.backend.store_facts().sole_agent == store.agent_id) == (agents == 1)
        rnd = random.Random(9)
        queries = [" ".join(rnd.choice(WORDS) for _ in range(4)) for _ in range(QUERIES + 3)]
        for query in queries[:3]:  # warm-up: the model's first runs, the engine's caches
            store.search(query, limit=5)
        for kind, options in FILTER_KINDS.items():
            measured, figures = ratio(store, queries[3:], options)
            if measured > LIMIT:  # measured again: a burst of load elsewhere is not a regression
                measured, figures = ratio(store, queries[3:], options)
            assert measured <= LIMIT, f"{kind}: search costs {measured:.2f}x ({figures})"
