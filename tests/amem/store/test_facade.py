"""``MemoryStore`` stays a facade: a short public surface over parts it builds once."""

from __future__ import annotations

import inspect

from amem import MemoryStore

#: the public methods of the entry class; plumbing lives on ``store.index`` and the stages
PUBLIC = {"add", "add_many", "search", "get", "update", "delete", "delete_all", "list", "count",
          "iter_notes", "consolidate", "sweep_expired", "optimize", "flush", "info", "close",
          "history", "unsupersede", "separate", "keep_ranking_fields", "keep_index_built"}


def test_the_store_exposes_a_short_public_surface() -> None:
    methods = {name for name, member in inspect.getmembers(MemoryStore)
               if not name.startswith("_") and callable(member)}
    assert methods == PUBLIC


def test_each_stage_is_built_once_over_the_same_index(edge_store: MemoryStore) -> None:
    index = edge_store.index
    parts = [edge_store.writer, edge_store.bulk, edge_store.updater, edge_store.searcher,
             edge_store.usage, edge_store.superseder, edge_store.consolidator,
             edge_store.separator]
    for part in parts:
        held = [value for value in vars(part).values() if isinstance(value, MemoryStore)]
        assert held == [], f"{type(part).__name__} holds the store"
        assert getattr(part, "_index") is index, type(part).__name__
    edge_store.add("Alice drinks green tea", enrich=False)
    assert edge_store.writer is parts[0] and edge_store.searcher is parts[3]
