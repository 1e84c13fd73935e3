"""A search of the agent owning every note leaves its tenant out, and never shows another's.

On a plain segment the engine's scan costs twice as much when the tenant's keyword condition
stands beside the others (``amem.backends._edge_tenants``). So a search of the only agent
leaves it out; another agent's first write during that search sends it round again with the
tenant named.
"""

from __future__ import annotations

import math

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend
from amem.backends.base import StoreFacts
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock

from .test_read_path_indexed import FILTER_KINDS, RecordingBackend, fields_of

NOTES = [
    "Alice leads the Apollo launch review on Friday",
    "The launch budget for Apollo was approved by finance",
    "Bob moved to the Berlin office in March",
    "Carol hired two engineers for the staging database",
    "The release plan slipped a week because of the audit",
    "Coffee with Dana about the Hermes contract",
]


class TenantSwitch(RecordingBackend):
    """The recording engine, told to answer that no agent owns the store when ``named`` is set
    (so one store shows both ways of saying the filter on the same points), and that no live
    condition is vacuous and no live key written when ``live`` is set; ``legs`` keeps the filters of the search's own
    rankings (the other reads are kept between searches), ``dense_ids`` what each dense leg
    answered."""

    named = False
    live = False

    def __init__(self, inner: EdgeBackend) -> None:
        super().__init__(inner)
        self.legs: list[Any] = []
        #: the ids of each dense leg's answer
        self.dense_ids: list[set[str]] = []

    def store_facts(self) -> StoreFacts:
        facts = self.inner.store_facts()
        if self.named:
            facts = replace(facts, sole_agent=None)
        if self.live:
            facts = replace(facts, all_active=False, none_superseded=False,
                            expiry_from=-math.inf, keyed=False)
        return facts

    def search_legs(self, dense: np.ndarray, sparse: Any, where: Any, limit: int,
                    **options: Any) -> Any:
        self.legs.append(where)
        answer = super().search_legs(dense, sparse, where, limit, **options)
        self.dense_ids.append({h.id for h in answer.dense})
        return answer


class IntrudingEmbedder(HashingEmbedder):
    """Embeds as the hashing embedder; at the first query embedding armed, another agent's
    note is stored first (what another thread's add could do at that moment)."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.store: MemoryStore | None = None
        self.armed = False

    def embed(self, texts: Sequence[str], kind: Any = "passage") -> np.ndarray:
        if self.armed and kind == "query" and self.store is not None:
            self.armed = False
            self.store.add("Apollo launch secret plan of the intruder", agent_id="intruder",
                           enrich=False)
        return super().embed(texts, kind)


def filled(engine: EdgeBackend, embedder: HashingEmbedder, **options: Any) -> MemoryStore:
    store = MemoryStore(config=load_config(), embedder=embedder,
                        clock=ManualClock("2026-01-10T12:00:00+00:00"), backend=engine,
                        **options)
    for i, text in enumerate(NOTES):
        store.add(text, ["alice"] if i % 2 else [], id=f"n{i}", enrich=False,
                  metadata={"project": "apollo"})
    return store


def test_the_only_agent_searches_without_its_tenant_and_finds_the_same() -> None:
    embedder = HashingEmbedder(dim=64)
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder) as store:  # type: ignore[arg-type]
        assert engine.inner.store_facts().sole_agent == store.agent_id
        for kind, options in FILTER_KINDS.items():
            shown = {}
            for named in (False, True):
                engine.named = named
                engine.legs.clear()
                found = store.search("Apollo launch budget", limit=4, heat=False, **options)
                assert len(engine.legs) == 1, kind
                assert ("agent_id" in fields_of(engine.legs[0])) == named, (kind, named)
                shown[named] = [(r.id, round(r.score, 9)) for r in found]
            assert shown[False] == shown[True], kind


def test_another_agents_first_write_during_a_search_is_never_shown() -> None:
    embedder = IntrudingEmbedder()
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder, agent_id="owner") as store:  # type: ignore[arg-type]
        embedder.store = store
        assert engine.inner.store_facts().sole_agent == "owner"
        # the intruder's note matches the query best: a search of the intruder finds it first
        embedder.armed = True
        engine.legs.clear()
        found = store.search("Apollo launch secret plan", limit=10)
        assert embedder.armed is False  # the note was written during the search
        assert engine.inner.store_facts().sole_agent is None
        assert found and all(r.content in NOTES for r in found)
        # the first pass left the tenant out, and its dense leg could see the note; the second
        # named the tenant
        assert ["agent_id" in fields_of(w) for w in engine.legs] == [False, True]
        theirs = store.search("Apollo launch secret plan", limit=1, agent_id="intruder")
        assert theirs[0].content == "Apollo launch secret plan of the intruder"
        # the owner's searches name the tenant from now on
        engine.legs.clear()
        again = store.search("Apollo launch secret plan", limit=10)
        assert all(r.content in NOTES for r in again)
        assert ["agent_id" in fields_of(w) for w in engine.legs] == [True]


def test_the_write_paths_reads_leave_the_tenant_out_and_read_again_after_an_intruder() -> None:
    embedder = HashingEmbedder(dim=64)
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    with filled(engine, embedder, agent_id="owner") as store:  # type: ignore[arg-type]
        index = store.index
        asked: list[bool] = []

        def read(where: Any) -> list[str]:
            asked.append("agent_id" in fields_of(where))
            if len(asked) == 1:  # another agent's first note lands during this read
                store.add("An intruder's note", agent_id="intruder", enrich=False)
            return [str(h.payload["id"]) for h in index.backend.scroll(where, limit=100)[0]]

        ids = index.read_tenant("owner", read)
        assert asked == [False, True]  # left out, then named once the epoch moved
        assert len(ids) == len(NOTES)  # the owner's notes only
        asked.clear()
        assert len(index.read_tenant("owner", read)) == len(NOTES)
        assert asked == [True]  # two agents now: named from the start

    # an add reads its neighbours (fold, links, supersession) the same way: with one agent
    # the engine is never told the tenant
    embedder = HashingEmbedder(dim=64)
    engine = TenantSwitch(EdgeBackend.temporary(embedder.dim))
    engine.live = True  # the live conditions said, so the reads are told by ``is_active``
    with filled(engine, embedder, agent_id="owner") as store:  # type: ignore[arg-type]
        engine.filters.clear()
        store.add("Alice moved the Apollo launch review to Monday", ["alice"])
        # (the hash dedup keeps its tenant: its hash condition selects a few points, cheap)
        reads = [w for w in engine.filters if "is_active" in fields_of(w)
                 and "hash" not in fields_of(w)]
        assert len(reads) >= 3 and not any("agent_id" in fields_of(w) for w in reads)
