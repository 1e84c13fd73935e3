"""The real streamable HTTP server on 127.0.0.1 for tests, and a client that sends raw headers.

The server admits ``OWNER_SECRET`` as its record secret (an owner key: any agent) unless a test
passes its own guard; the client sends it unless the test's headers carry an Authorization.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from amem.kernel.clock import Clock

from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.mcp_server import OwnerAccess, http_app
from tools.runner import CallLimits

#: the owner secret of every test server (as ``amem serve --http`` keeps in its record)
OWNER_SECRET = "test-owner-secret-" + "0" * 32
OWNER_AUTH = (b"Authorization", f"Bearer {OWNER_SECRET}".encode())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_http(facade: ToolFacade, limits: CallLimits | None = None,
                 owner: OwnerAccess | None = None, guard: GuardConfig | None = None,
                 runs_path: Path | None = None, clock: Clock | None = None) -> Iterator[str]:
    """Serve ``facade`` over streamable HTTP in a thread; yields the endpoint URL.
    ``clock`` is the request budgets' (``guard.rate_limits``)."""
    import uvicorn

    port = free_port()
    guard = guard or GuardConfig(record_secret=OWNER_SECRET)
    app = http_app(facade, limits=limits, owner=owner, guard=guard, runs_path=runs_path,
                   clock=clock)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1",
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
    """An MCP client session whose every request carries ``headers`` (raw bytes, in order;
    the owner's Authorization added when they have none)."""
    async with http_session(url, headers) as (client, _):
        yield client


@asynccontextmanager
async def http_session(url: str, headers: list[tuple[bytes, bytes]] | None = None
                       ) -> AsyncIterator[tuple[Any, Any]]:
    """An MCP client session and its HTTP client: set ``http.headers`` to send other headers
    on the same MCP session (the server reads identity per request, never per session)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=with_auth(headers or []), timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client, http


def with_auth(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with the owner's Authorization when they carry none."""
    if any(name.lower() == b"authorization" for name, _ in headers):
        return list(headers)
    return [*headers, OWNER_AUTH]


def owner_client(url: str) -> Any:
    """A plain ``httpx.Client`` on the server's root that sends the owner's key."""
    import httpx

    return httpx.Client(base_url=url.removesuffix("/mcp"), timeout=30,
                        headers={"Authorization": f"Bearer {OWNER_SECRET}"})


def refusal(res: Any) -> dict[str, Any]:
    """The guard's structured error in a refused response: the body's ``error``, or on the MCP
    endpoint the ``data`` of its JSON-RPC error."""
    body = res.json()
    if body.get("jsonrpc") == "2.0":
        assert isinstance(body["error"]["code"], int) and body["error"]["message"]
        return dict(body["error"]["data"])
    return dict(body["error"])
