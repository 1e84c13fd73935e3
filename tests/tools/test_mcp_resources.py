"""The server's resources through the official MCP client over streamable HTTP:
``amem://status`` (memory_status as a resource) and the owner's reports, for owners only."""

from __future__ import annotations

from typing import Any

import json

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore
from tools.mcp_server import OwnerAccess

from .conftest import Tenants
from .http_server import OWNER_SECRET, http_client, running_http

TOKEN = OWNER_SECRET


def owner_for(calls: list[tuple[str, str, bool]]) -> OwnerAccess:
    def report(name: str, agent_id: str, clean: bool) -> dict[str, Any]:
        calls.append((name, agent_id, clean))
        return {"report": name, "agent": agent_id, "clean": clean}

    return OwnerAccess(report)


def first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def test_status_resource_is_memory_status_of_the_calling_agent(tenants: Tenants,
                                                               facade: ToolFacade) -> None:
    async def main(url: str) -> None:
        async with http_client(url, [(b"X-Amem-Agent", tenants.mallory.encode())]) as client:
            listed = await client.list_resources()
            assert [str(r.uri) for r in listed.resources] == ["amem://status"]
            assert listed.resources[0].mime_type == "application/json"
            read = await client.read_resource("amem://status")
            tool = await client.call_tool("memory_status", {})
        data = json.loads(read.contents[0].text)
        assert data == tool.structured_content
        assert data["agent"] == tenants.mallory and data["memory"]["notes"] == 1  # not alice's 4

    with running_http(facade) as url:
        anyio.run(main, url)


def test_owner_reports_need_an_owner(tenants: Tenants, facade: ToolFacade, tmp_path: Any) -> None:
    """The record secret and an owner key open them; an agent key (even the agent's own
    report), a wrong secret or none never run the report."""
    calls: list[tuple[str, str, bool]] = []
    keys = KeyStore(tmp_path / "keys.json")
    _, agent_key = keys.add(agent=tenants.alice)
    _, owner_key = keys.add(agent=None, owner=True)

    async def read(url: str, uri: str, token: str | None) -> Any:
        headers = [(b"X-Amem-Agent", tenants.alice.encode())]
        if token is not None:
            headers.append((b"Authorization", f"Bearer {token}".encode()))
        try:
            async with http_client(url, headers) as client:
                return json.loads((await client.read_resource(uri)).contents[0].text)
        except BaseExceptionGroup as group:  # the client's task group wraps the error
            raise first_leaf(group) from None

    guard = GuardConfig(keys=keys, record_secret=OWNER_SECRET)
    with running_http(facade, owner=owner_for(calls), guard=guard) as url:
        for token in ("wrong", TOKEN[:-1], TOKEN + "x", agent_key[:-1]):  # none: tests/tools/security
            with pytest.raises(MCPError) as unknown:  # refused at the door (HTTP 401, no session),
                anyio.run(read, url, "amem://owner/status", token)  # saying why (a JSON-RPC error)
            assert unknown.value.data["code"] == "unauthenticated", unknown.value
        with pytest.raises(MCPError) as refused:
            anyio.run(read, url, "amem://owner/status", agent_key)
        assert refused.value.data["code"] == "forbidden"
        assert calls == []  # a refused read never ran the report
        assert anyio.run(read, url, "amem://owner/status", TOKEN) == {
            "report": "status", "agent": tenants.alice, "clean": False}
        assert anyio.run(read, url, "amem://owner/status", owner_key)["report"] == "status"
        assert anyio.run(read, url, "amem://owner/doctor?clean=1", TOKEN)["clean"] is True
        for uri in ("amem://owner/secrets", "amem://owner/doctor?clean=yes", "amem://nothing"):
            with pytest.raises(MCPError) as missing:
                anyio.run(read, url, uri, TOKEN)
            assert missing.value.data["code"] == "not_found"
    with running_http(facade) as url:  # a server without owner reports opens none
        with pytest.raises(MCPError) as refused:
            anyio.run(read, url, "amem://owner/status", TOKEN)
        assert refused.value.data["code"] == "forbidden"
