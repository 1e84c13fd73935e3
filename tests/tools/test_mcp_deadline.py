"""A slow tool call never holds up another agent, and answers ``timeout`` at its deadline.

The slowness is real: an embedder (the store's ``Embedder`` seam) that blocks on queries
mentioning "slowpoke" until the test lets it go, so the worker thread is truly busy, the way
a slow engine or model would keep it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from amem import MemoryStore
from amem.embed.base import Kind
from amem.embed.hashing import HashingEmbedder
from tools import ToolFacade
from tools.mcp_server import build_server
from tools.runner import CallLimits

from .http_server import http_client, running_http
from .overruns import overruns

TIMEOUT = 0.6
#: how long a slow call would hold its worker if the test never released it
HOLD = 20.0


class SlowEmbedder(HashingEmbedder):
    """The hashing embedder, stuck on any query mentioning "slowpoke" until released."""

    def __init__(self) -> None:
        super().__init__(64)
        self.release = threading.Event()
        self.stuck = 0

    def embed(self, texts: Any, kind: Kind = "passage") -> Any:
        if kind == "query" and any("slowpoke" in t for t in texts):
            self.stuck += 1
            entered = time.monotonic()
            self.release.wait(HOLD)
            # stuck past the deadline however early it is released, so every stuck call ends
            # as an overrun the runner logs (what the fixture waits for)
            time.sleep(max(0.0, entered + TIMEOUT + 0.05 - time.monotonic()))
        return super().embed(texts, kind=kind)


@pytest.fixture
def slow() -> Iterator[tuple[MemoryStore, SlowEmbedder]]:
    embedder = SlowEmbedder()
    with MemoryStore(":memory:", embedder=embedder, agent_id="default") as store, \
            overruns() as ended:
        store.add("alice likes green tea", [], enrich=False, agent_id="alice")
        store.add("bob plays chess", [], enrich=False, agent_id="bob")
        try:
            yield store, embedder
        finally:
            embedder.release.set()  # let the abandoned workers finish before the store closes
            # each stuck call ends past its deadline and logs it: inside the test, not after
            assert ended.wait_for(embedder.stuck)


async def _timed(client: Client, name: str, args: dict[str, Any]) -> tuple[float, Any]:
    began = time.monotonic()
    res = await client.call_tool(name, args)
    return time.monotonic() - began, res.structured_content


def test_a_slow_call_times_out_and_the_server_keeps_serving(
        slow: tuple[MemoryStore, SlowEmbedder]) -> None:
    store, embedder = slow
    facade = ToolFacade(store, None, agent_id="alice")
    limits = CallLimits(timeout=TIMEOUT, workers=4, per_agent=2)

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(build_server(facade, limits=limits)) as client:
            async def stuck() -> None:
                out["slow"] = await _timed(client, "memory_search", {"query": "slowpoke"})

            async def quick() -> None:
                await anyio.sleep(0.1)  # while the slow call holds its worker
                out["quick"] = await _timed(client, "memory_list", {})

            async with anyio.create_task_group() as tg:
                tg.start_soon(stuck)
                tg.start_soon(quick)
            out["after"] = await _timed(client, "memory_search", {"query": "green tea"})
        return out

    out = anyio.run(main)
    elapsed, result = out["slow"]
    assert result["error"]["code"] == "timeout" and "memory_search" in result["error"]["message"]
    assert TIMEOUT <= elapsed < TIMEOUT + 1.5
    assert out["quick"][0] < TIMEOUT and out["quick"][1]["count"] == 1
    assert out["after"][1]["results"][0]["content"] == "alice likes green tea"
    assert embedder.stuck == 1


def test_one_agents_slow_calls_never_block_another_agent_over_http(
        slow: tuple[MemoryStore, SlowEmbedder]) -> None:
    store, embedder = slow
    facade = ToolFacade(store, None, agent_id="default")
    limits = CallLimits(timeout=TIMEOUT, workers=3, per_agent=2)

    async def main(url: str) -> dict[str, Any]:
        out: dict[str, Any] = {"bob": []}
        async with http_client(url, [(b"X-Amem-Agent", b"bob")]) as bob, \
                http_client(url, [(b"X-Amem-Agent", b"alice")]) as alice:
            async def flood() -> None:  # more slow calls than bob may run at once
                out["bob"].append(await _timed(bob, "memory_search", {"query": "slowpoke"}))

            async def answer() -> None:
                await anyio.sleep(0.15)
                out["alice"] = [await _timed(alice, name, args) for name, args in
                                [("memory_list", {}), ("memory_search", {"query": "tea"})]]

            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(flood)
                tg.start_soon(answer)
        return out

    with running_http(facade, limits) as url:
        out = anyio.run(main, url)
    # bob: every call answered by its deadline; only two of them ever reached the store
    assert [r["error"]["code"] for _, r in out["bob"]] == ["timeout"] * 5
    assert all(elapsed < TIMEOUT + 1.5 for elapsed, _ in out["bob"])
    assert embedder.stuck == 2
    # alice: answered at once, and only her own note
    (t_list, listed), (t_search, found) = out["alice"]
    assert t_list < TIMEOUT and t_search < TIMEOUT
    assert listed["count"] == 1 and found["results"][0]["content"] == "alice likes green tea"


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        CallLimits(timeout=0)
    with pytest.raises(ValueError):
        CallLimits(workers=2, per_agent=3)


def test_concurrent_calls_of_many_agents_keep_every_store_consistent(lcm_store: Any) -> None:
    """Writes, deletes and reads of three agents at once over HTTP, now that calls run in
    parallel workers: every answer is a result, and each agent ends with exactly its own
    notes (the store's locks, not the server, keep writes whole)."""
    import random

    words = ["harbour", "violin", "granite", "orchid", "quantum", "saffron", "tundra", "lantern",
             "meteor", "pelican", "cobalt", "juniper", "zephyr", "walnut", "basalt", "falcon"]
    rng = random.Random(7)
    agents = ["alice", "bob", "carol"]
    texts = {a: [f"{a} note {i}: " + " ".join(rng.sample(words, 4)) + f" {a}{i}x"
                 for i in range(8)] for a in agents}

    async def agent_work(url: str, agent: str, out: dict[str, Any]) -> None:
        async with http_client(url, [(b"X-Amem-Agent", agent.encode())]) as client:
            added: list[str] = []

            async def add(text: str) -> None:
                res = (await client.call_tool("memory_add", {"text": text})).structured_content
                assert "error" not in res, res
                added.append(res["id"])

            async def read() -> None:
                for name, args in [("memory_search", {"query": "granite orchid"}),
                                   ("memory_list", {}), ("lcm_grep", {"pattern": "flight"})]:
                    res = (await client.call_tool(name, args)).structured_content
                    assert "error" not in res, res
                    assert all(agent in str(r.get("content", agent))
                               for r in res.get("results", []) + res.get("notes", []))

            async with anyio.create_task_group() as tg:
                for text in texts[agent]:
                    tg.start_soon(add, text)
                    tg.start_soon(read)
            gone = added[:3]
            async with anyio.create_task_group() as tg:
                for note_id in gone:
                    tg.start_soon(client.call_tool, "memory_delete", {"id": note_id})
                tg.start_soon(read)
            listed = (await client.call_tool("memory_list", {"limit": 100})).structured_content
            out[agent] = (set(added) - set(gone), {n["id"] for n in listed["notes"]},
                          listed["count"])

    async def main(url: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            for agent in agents:
                tg.start_soon(agent_work, url, agent, out)
        return out

    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="default") as store:
        facade = ToolFacade(store, lcm_store, agent_id="default")
        with running_http(facade, CallLimits(timeout=30, workers=6, per_agent=3)) as url:
            out = anyio.run(main, url)
        for agent in agents:
            kept, listed, count = out[agent]
            assert listed == kept and count == 5, agent
            assert {n.id for n, _ in store.iter_notes(agent_id=agent)} == kept
    assert lcm_store.doctor().ok
