"""The server's resources through the official MCP client over streamable HTTP:
``amem://status`` (memory_status as a resource) and the owner's reports behind its token."""

from __future__ import annotations

from typing import Any

import json

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tools import ToolFacade
from tools.mcp_server import OwnerAccess

from .conftest import Tenants
from .http_server import http_client, running_http

TOKEN = "a-test-token-that-nobody-guesses"


def owner_for(calls: list[tuple[str, str, bool]]) -> OwnerAccess:
    def report(name: str, agent_id: str, clean: bool) -> dict[str, Any]:
        calls.append((name, agent_id, clean))
        return {"report": name, "agent": agent_id, "clean": clean}

    return OwnerAccess(TOKEN, report)


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


def test_owner_reports_need_the_token(tenants: Tenants, facade: ToolFacade) -> None:
    calls: list[tuple[str, str, bool]] = []

    async def read(url: str, uri: str, token: str | None) -> Any:
        headers = [(b"X-Amem-Agent", tenants.alice.encode())]
        if token is not None:
            headers.append((b"Authorization", f"Bearer {token}".encode()))
        try:
            async with http_client(url, headers) as client:
                return json.loads((await client.read_resource(uri)).contents[0].text)
        except BaseExceptionGroup as group:  # the client's task group wraps the error
            raise first_leaf(group) from None

    with running_http(facade, owner=owner_for(calls)) as url:
        for token in (None, "wrong", TOKEN[:-1], TOKEN + "x"):
            with pytest.raises(MCPError) as refused:
                anyio.run(read, url, "amem://owner/status", token)
            assert refused.value.data["code"] == "forbidden"
        assert calls == []  # a refused read never ran the report
        assert anyio.run(read, url, "amem://owner/status", TOKEN) == {
            "report": "status", "agent": tenants.alice, "clean": False}
        assert anyio.run(read, url, "amem://owner/doctor?clean=1", TOKEN)["clean"] is True
        for uri in ("amem://owner/secrets", "amem://owner/doctor?clean=yes", "amem://nothing"):
            with pytest.raises(MCPError) as missing:
                anyio.run(read, url, uri, TOKEN)
            assert missing.value.data["code"] == "not_found"
    with running_http(facade) as url:  # a server started without a record opens nothing
        with pytest.raises(MCPError) as refused:
            anyio.run(read, url, "amem://owner/status", TOKEN)
        assert refused.value.data["code"] == "forbidden"
