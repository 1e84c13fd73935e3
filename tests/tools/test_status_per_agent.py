"""``memory_status`` and ``amem://status`` show the calling agent's figures only (issue 23):
agent A's status never reflects agent B's notes, the out-of-date vectors among them; the
owner's ``amem status`` keeps the store-wide totals."""

from __future__ import annotations

import json
from typing import Any

import anyio

from amem import MemoryStore
from amem.config import load_config
from amem.kernel.clock import ManualClock
from tests.fakes.embedders import FailingEmbedder
from tools import ToolFacade

from .http_server import http_client, running_http

BASE = "The deploy pipeline runs make release after CI is green on main branch"
VARIANT = "The deploy pipeline runs make release after CI is green on the main branch"


def _store_with_bobs_stale_note() -> MemoryStore:
    """Alice has one note; bob has one whose vector embeds an earlier text of it (marked
    stale). The next write of anyone re-embeds it, so alice writes first."""
    # passage call 1 is alice's note, 2 and 3 bob's texts, 4 the re-embedding of bob's folded
    # note and 5 the add's retry: both fail, so the fold is saved with the earlier vector
    store = MemoryStore(":memory:", config=load_config(overrides={"fold_threshold": 0.8,
                                                                  "pending_threshold": 0.6}),
                        embedder=FailingEmbedder(fail_on={4, 5}), clock=ManualClock())
    store.add("Alice prefers green tea", agent_id="alice")
    store.add(BASE, agent_id="bob")
    assert store.add(VARIANT, agent_id="bob").status == "folded"
    assert store.info().stale_vectors == 1  # the owner's view: store-wide
    return store


def _memory(result: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return result["memory"], result["degraded"]


def test_an_agents_status_never_counts_another_agents_notes() -> None:
    with _store_with_bobs_stale_note() as store:
        alice, alice_degraded = _memory(ToolFacade(store, None, agent_id="alice").call("memory_status"))
        bob, bob_degraded = _memory(ToolFacade(store, None, agent_id="bob").call("memory_status"))
        nobody, _ = _memory(ToolFacade(store, None, agent_id="carol").call("memory_status"))
    assert not any("earlier text" in d for d in alice_degraded), alice_degraded
    assert (alice["notes"], alice["stale_vectors"]) == (1, 0)
    assert (bob["notes"], bob["stale_vectors"]) == (1, 1)
    assert any(d.startswith("1 of your notes embed an earlier text") for d in bob_degraded)
    assert (nobody["notes"], nobody["stale_vectors"], nobody["expired_pending_sweep"]) == (0, 0, 0)


def test_the_status_resource_is_per_agent_too() -> None:
    async def read(url: str, agent: str) -> dict[str, Any]:
        async with http_client(url, [(b"X-Amem-Agent", agent.encode())]) as client:
            contents = (await client.read_resource("amem://status")).contents[0]
            return dict(json.loads(getattr(contents, "text")))

    with _store_with_bobs_stale_note() as store:
        with running_http(ToolFacade(store, None, agent_id="default")) as url:
            alice = anyio.run(read, url, "alice")
            bob = anyio.run(read, url, "bob")
    assert not any("earlier text" in d for d in alice["degraded"]), alice["degraded"]
    assert alice["agent"] == "alice" and alice["memory"]["stale_vectors"] == 0
    assert bob["memory"]["stale_vectors"] == 1
