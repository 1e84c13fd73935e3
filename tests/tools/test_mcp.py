"""The MCP server driven by the official SDK client: in memory, over stdio, over HTTP."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from amem import MemoryStore
from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.mcp_server import build_server, http_app

from .http_server import OWNER_SECRET

from .conftest import Tenants

ROOT = Path(__file__).resolve().parents[2]

#: one valid call per tool (the lcm ones run against the fixture's conversation)
CALLS: dict[str, dict[str, Any]] = {
    "memory_add": {"text": "Carol's birthday is on 12 June", "subjects": ["carol"]},
    "memory_search": {"query": "green tea", "limit": 2},
    "memory_list": {"limit": 3},
    "memory_consolidate": {},
    "memory_status": {},
    "tool_info": {"query": "memory_get"},
    "lcm_grep": {"pattern": "flight"},
    "lcm_expand": {"query": "Lisbon"},
    "lcm_expand_query": {"prompt": "Which flight?", "query": "flight"},
}


async def _exercise(client: Client) -> dict[str, Any]:
    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    results: dict[str, Any] = {}
    for name, args in CALLS.items():
        if name in names:
            res = await client.call_tool(name, args)
            assert not res.is_error, (name, res.content)
            assert json.loads(res.content[0].text) == res.structured_content
            results[name] = res.structured_content
    note_id = results["memory_list"]["notes"][0]["id"]
    res = await client.call_tool("memory_update", {"id": note_id, "subjects": ["mcp check"]})
    assert not res.is_error and res.structured_content["changed"] == ["subjects"]
    for name in ("memory_get", "memory_delete"):
        res = await client.call_tool(name, {"id": note_id})
        assert not res.is_error and res.structured_content["id"] == note_id
    res = await client.call_tool("memory_delete_all", {"confirm": True})
    assert not res.is_error and res.structured_content["deleted"] >= 1
    if "lcm_describe" in names and results["lcm_grep"]["hits"]:
        msg = results["lcm_grep"]["hits"][0]["id"]
        res = await client.call_tool("lcm_describe", {"id": msg})
        assert not res.is_error and res.structured_content["kind"] == "message"
    # Errors come back as tool errors carrying the structured error.
    bad = await client.call_tool("memory_search", {"query": 5})
    assert bad.is_error and bad.structured_content["error"]["field"] == "query"
    unknown = await client.call_tool("no_such_tool", {})
    assert unknown.is_error and unknown.structured_content["error"]["code"] == "unknown_tool"
    return {"names": names, "results": results}


def test_in_memory_client_calls_every_tool(tenants: Tenants, lcm_store: Any) -> None:
    facade = ToolFacade(tenants.store, lcm_store, agent_id="alice")

    async def main() -> dict[str, Any]:
        async with Client(build_server(facade)) as client:
            return await _exercise(client)

    out = anyio.run(main)
    assert set(out["names"]) == set(CALLS) | {"memory_get", "memory_update", "memory_delete",
                                                "memory_delete_all", "lcm_describe",
                                                "memory_history", "memory_unsupersede",
                                                "memory_separate"}
    assert out["results"]["lcm_grep"]["hits"]


def test_legacy_handshake_and_lazy_list(tenants: Tenants) -> None:
    facade = ToolFacade(tenants.store, None, agent_id=tenants.alice, lazy=True)

    async def main() -> list[str]:
        async with Client(build_server(facade), mode="legacy") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            short = await client.call_tool("memory_list", {})  # listed with a short schema
            assert short.structured_content["count"] == 4
            return names

    assert anyio.run(main) == ["memory_add", "memory_search", "memory_list", "memory_get",
                               "memory_update", "memory_delete", "memory_history",
                               "memory_unsupersede", "memory_separate", "memory_delete_all",
                               "memory_consolidate",
                               "memory_status",
                               "tool_info"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http_agents_share_one_store(memory: MemoryStore) -> None:
    import httpx2
    import uvicorn
    from mcp.client.streamable_http import streamable_http_client

    facade = ToolFacade(memory, None, agent_id="http-default")
    port = _free_port()
    guard = GuardConfig(record_secret=OWNER_SECRET)
    server = uvicorn.Server(uvicorn.Config(http_app(facade, guard=guard), host="127.0.0.1", port=port,
                                           log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}/mcp"

    async def as_agent(agent: str, text: str) -> tuple[int, list[str]]:
        http = httpx2.AsyncClient(headers={"X-Amem-Agent": agent,
                                           "Authorization": f"Bearer {OWNER_SECRET}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            added = await client.call_tool("memory_add", {"text": text})
            assert not added.is_error, added.content
            listed = await client.call_tool("memory_list", {})
            return listed.structured_content["count"], [
                n["content"] for n in listed.structured_content["notes"]]

    try:
        a = anyio.run(as_agent, "http-a", "agent A's note about sailing")
        b = anyio.run(as_agent, "http-b", "agent B's note about chess")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert a == (1, ["agent A's note about sailing"])
    assert b == (1, ["agent B's note about chess"])


def _serve_over_stdio(home: Path, **env: str) -> StdioServerParameters:
    """`amem serve` on stdio with its data in ``home``, the hashing embedder, and ``env``."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tools.cli", "serve"], cwd=str(ROOT),
        env={"PATH": os.environ.get("PATH", ""), "AMEM_HOME": str(home),
             "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": "stdio-agent", "PYTHONPATH": str(ROOT),
             **env})


@pytest.mark.slow
def test_stdio_subprocess(tmp_path: Path) -> None:
    params = _serve_over_stdio(tmp_path, AMEM_LOG_LEVEL="INFO")

    async def main() -> dict[str, Any]:
        with open(tmp_path / "stderr.log", "w") as errlog:
            from mcp.client.stdio import stdio_client

            async with Client(stdio_client(params, errlog=errlog)) as client:
                await client.call_tool("memory_add", {"text": "Alice prefers green tea"})
                return await _exercise(client)

    out = anyio.run(main)
    assert "lcm_grep" in out["names"]  # lcm opened beside the note store
    assert out["results"]["memory_list"]["count"] == 2
    assert (tmp_path / "store").is_dir() and (tmp_path / "lcm.db").exists()
    log = (tmp_path / "stderr.log").read_text()
    assert "nightly scheduler started" in log, log[-2000:]  # logs on stderr, JSON lines
    assert all(json.loads(line)["level"] for line in log.splitlines() if line.startswith("{"))


#: distinct enough that none folds into another (a fold writes no new point)
TEXTS = [f"{who} met {whom} in {city} to talk about {topic}" for who, whom, city, topic in zip(
    ["Alice", "Bruno", "Chen", "Dara", "Emil", "Fatou", "Goran", "Hana", "Ivo", "Jun", "Kofi",
     "Lena", "Mika", "Nour"],
    ["the baker", "a pilot", "her cousin", "the mayor", "two nurses", "a violinist",
     "the coach", "a lawyer", "his landlord", "the editor", "a chemist", "the ranger",
     "a tailor", "the judge"],
    ["Lisbon", "Oslo", "Quito", "Hanoi", "Accra", "Perth", "Bergen", "Cusco", "Tartu", "Izmir",
     "Malmo", "Nantes", "Porto", "Dakar"],
    ["gardening", "taxes", "chess", "a wedding", "bicycles", "pottery", "football", "opera",
     "a lease", "poetry", "batteries", "wolves", "linen", "an appeal"])]


@pytest.mark.slow
def test_a_served_store_builds_its_index_as_single_adds_pile_up(tmp_path: Path) -> None:
    # amem serve keeps the store's index built (MemoryStore.keep_index_built): agents add one
    # note at a time, and once optimize_after of them have piled up a build runs in the
    # background, without waiting for the nightly job (single adds used to be only counted).
    params = _serve_over_stdio(tmp_path, AMEM_OPTIMIZE_AFTER="10")
    meta = tmp_path / "store" / "meta.json"

    def build() -> dict[str, Any]:
        return dict(json.loads(meta.read_text()).get("index_build", {})) if meta.exists() else {}

    async def main() -> dict[str, Any]:
        with open(tmp_path / "stderr.log", "w") as errlog:
            from mcp.client.stdio import stdio_client

            async with Client(stdio_client(params, errlog=errlog)) as client:
                for text in TEXTS:
                    await client.call_tool("memory_add", {"text": text})
                deadline = time.monotonic() + 60
                while not build().get("last_run"):  # the build's end is saved in meta.json
                    assert time.monotonic() < deadline, build()
                    await anyio.sleep(0.1)
                found = await client.call_tool("memory_search", {"query": TEXTS[7]})
                return {"build": build(), "found": found}

    out = anyio.run(main)
    assert out["build"]["state"] == "done" and out["build"]["points_since"] < 10, out["build"]
    assert TEXTS[7] in str(out["found"])
