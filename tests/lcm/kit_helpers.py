"""A conversation with a summary DAG (leaves and condensed nodes) for the repair-kit tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lcm import LcmStore
from tests.lcm.conftest import chat

KEY = "agent:kit:main"
#: small chunks and fanouts so 40 messages make several leaves and at least one condensed node
DAG_CONFIG: dict[str, Any] = {"leaf_chunk_tokens": 150, "fresh_tail_count": 4, "leaf_min_fanout": 2,
                              "condensed_min_fanout": 2, "max_sweep_iterations": 100,
                              "sweep_max_depth": -1}


def dag_store(make_store: Callable[..., LcmStore], n: int = 40, **overrides: Any) -> tuple[LcmStore, int]:
    """A store whose conversation ``KEY`` holds ``n`` messages compacted into leaves and condensed nodes."""
    store = make_store(**{**DAG_CONFIG, **overrides})
    store.ingest(KEY, chat(n))
    res = store.compact(KEY, force=True)
    assert res.leaf_summaries and res.condensed_summaries, res
    conv = store.conversation(KEY)
    assert conv is not None
    return store, conv.id
