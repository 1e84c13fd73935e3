"""The real streamable HTTP server on 127.0.0.1 for tests, and a client that sends raw headers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from mcp import Client

from tools import ToolFacade
from tools.mcp_server import OwnerAccess, http_app
from tools.runner import CallLimits


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_http(facade: ToolFacade, limits: CallLimits | None = None,
                 owner: OwnerAccess | None = None) -> Iterator[str]:
    """Serve ``facade`` over streamable HTTP in a thread; yields the endpoint URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(http_app(facade, limits=limits, owner=owner), host="127.0.0.1",
                                           port=port, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the HTTP server did not start"
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@asynccontextmanager
async def http_client(url: str, headers: list[tuple[bytes, bytes]] | None = None
                      ) -> AsyncIterator[Any]:
    """An MCP client session whose every request carries ``headers`` (raw bytes, in order)."""
    async with http_session(url, headers) as (client, _):
        yield client


@asynccontextmanager
async def http_session(url: str, headers: list[tuple[bytes, bytes]] | None = None
                       ) -> AsyncIterator[tuple[Any, Any]]:
    """An MCP client session and its HTTP client: set ``http.headers`` to send other headers
    on the same MCP session (the server reads identity per request, never per session)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=headers or [], timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client, http
