"""Every condition the read path sends to the engine is on an indexed payload field.

A condition on an unindexed field makes the engine read each candidate's payload: at 10k notes
``IsEmpty("superseded_by")`` alone took a dense query from 2.3 to 60 ms (issue 25). This test
records every filter a search sends (each filter kind search can build, both legs, the link
expansion, the visibility checks) and names the fields no index serves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend
from amem.backends.base import (BOOL_INDEXES, FLOAT_INDEXES, KEYWORD_INDEXES, LIVE_KEY,
                                Condition, HasId, MatchAny, Where)
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock

#: the edge backend's live key is indexed beside them (``amem.backends.edge._ensure_indexes``)
INDEXED = set(KEYWORD_INDEXES) | set(BOOL_INDEXES) | set(FLOAT_INDEXES) | {LIVE_KEY}

#: every filter kind ``search`` can build, one search each
FILTER_KINDS: dict[str, dict[str, Any]] = {
    "default": {},
    "subject": {"subject": "alice"},
    "topics": {"topics_filter": ["launch", "budget"]},
    "metadata": {"metadata": {"project": ["apollo", "hermes"], "priority": 1}},
    "since/before": {"since": "2025-01-01T00:00:00Z", "before": "2027-01-01T00:00:00Z"},
    "include_superseded": {"include_superseded": True},
    "tags": {"tags": ["travel", "work"]},
    "all at once": {"subject": "alice", "topics_filter": ["launch"],
                    "metadata": {"project": "apollo"}, "since": "2025-01-01T00:00:00Z",
                    "tags": ["travel"]},
}


class RecordingBackend:
    """An edge engine that keeps every filter it is given (reads only)."""

    def __init__(self, inner: EdgeBackend) -> None:
        self.inner = inner
        self.filters: list[Where] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _keep(self, where: Where | None) -> None:
        if where is not None:
            self.filters.append(where)

    def dense_search(self, vector: np.ndarray, where: Where | None, limit: int,
                     **options: Any) -> Any:
        self._keep(where)
        return self.inner.dense_search(vector, where, limit, **options)

    def search_legs(self, dense: np.ndarray, sparse: Any, where: Where | None, limit: int,
                    **options: Any) -> Any:
        self._keep(where)
        return self.inner.search_legs(dense, sparse, where, limit, **options)

    def sparse_search(self, vector: Any, where: Where | None, limit: int, **options: Any) -> Any:
        self._keep(where)
        return self.inner.sparse_search(vector, where, limit, **options)

    def hybrid_rrf(self, dense: np.ndarray, sparse: Any, where: Where | None, limit: int,
                   prefetch: int, k: int = 60, **options: Any) -> Any:
        self._keep(where)
        return self.inner.hybrid_rrf(dense, sparse, where, limit, prefetch, k, **options)

    def scroll(self, where: Where | None, **options: Any) -> Any:
        self._keep(where)
        return self.inner.scroll(where, **options)

    def times(self, where: Where | None, field: str, limit: int, **options: Any) -> Any:
        self._keep(where)
        return self.inner.times(where, field, limit, **options)

    def iterate(self, where: Where | None = None, **options: Any) -> Iterator[Any]:
        self._keep(where)
        return self.inner.iterate(where, **options)

    def count(self, where: Where | None = None) -> int:
        self._keep(where)
        return self.inner.count(where)


def fields_of(node: Condition) -> set[str]:
    """The payload fields a filter tree names (a point-id condition names none)."""
    if isinstance(node, Where):
        return {f for child in (*node.must, *node.should, *node.must_not) for f in fields_of(child)}
    if isinstance(node, HasId):
        return set()
    return {node.field}


def names_lapsed(node: Condition) -> bool:
    """The tree holds the "successor expired, not yet swept" clause on ``superseded_by``."""
    if isinstance(node, Where):
        return any(names_lapsed(c) for c in (*node.must, *node.should, *node.must_not))
    return isinstance(node, MatchAny) and node.field == "superseded_by"


def test_every_condition_of_every_filter_kind_is_indexed() -> None:
    clock = ManualClock("2026-01-10T12:00:00+00:00")
    embedder = HashingEmbedder(dim=64)
    engine = RecordingBackend(EdgeBackend.temporary(embedder.dim))
    with MemoryStore(config=load_config(), embedder=embedder, clock=clock,
                     backend=engine) as store:  # type: ignore[arg-type]
        store.add("Alice leads the Apollo launch review", ["alice"], id="a1", enrich=False,
                  metadata={"project": "apollo", "priority": 1},
                  event_time="2026-01-05T09:00:00Z", tags=["travel"])
        store.add("The launch budget was approved", id="k1", enrich=False,
                  note_type="knowledge", topics=["launch", "budget"])
        store.add("Apollo moved to the Berlin office", ["alice"], id="t1", enrich=False, ttl=60)
        store.add("Bob joined the Apollo team", ["bob"], id="b1", enrich=False)
        store.index.update_payload("b1", store.agent_id, {"superseded_by": "t1"})
        store.index.update_payload("t1", store.agent_id, {"supersedes": ["b1"]})
        clock.advance(120)  # t1 expired, not swept: the note it replaced is current again
        for kind, options in FILTER_KINDS.items():
            engine.filters.clear()
            found = store.search("Apollo launch", limit=5, **options)
            assert found, kind  # the filters ran to the end of the pipeline
            unserved = {f for w in engine.filters for f in fields_of(w)} - INDEXED
            assert not unserved, f"{kind}: no engine index serves {sorted(unserved)}"
            if not options.get("include_superseded"):
                assert any(names_lapsed(w) for w in engine.filters), kind


def test_a_store_written_before_the_read_path_indexes_gets_them_at_open(tmp_path: Path) -> None:
    import qdrant_edge as qe

    backend = EdgeBackend(tmp_path, 16)
    for name in ("superseded_by", "supersedes"):  # as a store of the version before them
        backend.shard.update(qe.UpdateOperation.delete_field_index(name))
    assert not {"superseded_by", "supersedes"} & set(backend.shard.info().payload_schema)
    backend.close()
    reopened = EdgeBackend(tmp_path, 16)
    try:
        assert {"superseded_by", "supersedes"} <= set(reopened.shard.info().payload_schema)
    finally:
        reopened.close()


def test_a_store_whose_tags_filter_read_tags_as_spelled_gets_the_tag_keys_index(
        tmp_path: Path) -> None:
    """The tags filter reads ``tag_keys`` (any case) now; a store of the version whose filter
    read ``tags`` gets its index at open, or every tag-filtered search would read payloads."""
    import qdrant_edge as qe

    backend = EdgeBackend(tmp_path, 16)
    backend.shard.update(qe.UpdateOperation.delete_field_index("tag_keys"))
    backend.close()
    reopened = EdgeBackend(tmp_path, 16)
    try:
        assert {"tags", "tag_keys"} <= set(reopened.shard.info().payload_schema)
    finally:
        reopened.close()
