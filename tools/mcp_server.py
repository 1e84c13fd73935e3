"""The MCP server: the tool facade over the official ``mcp`` SDK (v2), on stdio or streamable HTTP.

Every tool result travels twice, as the SDK recommends: as JSON text content (what most hosts
show the model) and as ``structuredContent``. A failed call is a *tool* error (``isError:
true`` with the structured error as its content), so the model can read it and retry; only
protocol faults become JSON-RPC errors.

Identity: on stdio the agent is the one the server was started with. On streamable HTTP each
request may name its agent in the ``X-Amem-Agent`` header (the connection sets it, never a tool
argument); without it, the server's default agent is used. The HTTP server binds 127.0.0.1 only,
so only local processes reach it.

Store calls are blocking and the embedded engine belongs to this one process: they run in a
worker thread, one at a time, so the event loop keeps serving other connections meanwhile.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .errors import is_error
from .facade import ToolFacade

log = logging.getLogger(__name__)

AGENT_HEADER = "x-amem-agent"
SESSION_HEADER = "x-amem-session"


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        from amem.errors import MissingExtraError

        raise MissingExtraError("the MCP server needs the official mcp SDK",
                                install="pip install 'amem[mcp]'") from None


def build_server(facade: ToolFacade, *, name: str = "amem") -> Any:
    """A low-level ``mcp.server.Server`` whose tools are ``facade``'s."""
    _require_mcp()
    import anyio
    import mcp.types as types
    from mcp.server import Server

    limiter = anyio.CapacityLimiter(1)

    def facade_for(ctx: Any) -> ToolFacade:
        # A view per request is cheap (the registry is a few dataclasses) and keeps no
        # per-agent state growing in a long-lived server.
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        agent = headers.get(AGENT_HEADER) if headers is not None else None
        session = headers.get(SESSION_HEADER) if headers is not None else None
        if not agent and not session:
            return facade
        return facade.for_agent(agent or facade.agent_id, session_key=session)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=d["name"], description=d["description"], input_schema=d["input_schema"])
            for d in facade.list_tools()])

    async def call_tool(ctx: Any, params: Any) -> Any:
        try:
            target = facade_for(ctx)
        except Exception as exc:  # a bad agent header: the caller's error, not ours
            result: dict[str, Any] = {"error": {"code": "invalid_argument", "message": str(exc),
                                                "field": AGENT_HEADER}}
        else:
            result = await anyio.to_thread.run_sync(target.call, params.name, params.arguments,
                                                    limiter=limiter)
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=result, is_error=is_error(result))

    return Server(name, version=_version(), on_list_tools=list_tools, on_call_tool=call_tool,
                  instructions=("Long-term memory (memory_*) and lossless conversation recall "
                                "(lcm_*). Search memory before answering questions about the "
                                "user or earlier sessions; store durable facts with memory_add."))


def _version() -> str:
    try:
        from amem import __version__

        return __version__
    except ImportError:  # pragma: no cover - amem is always importable beside tools
        return "0"


async def serve_stdio(facade: ToolFacade) -> None:
    """Serve on stdin/stdout until the host closes the pipe."""
    server = build_server(facade)
    from mcp.server.stdio import stdio_server

    log.info("amem MCP server on stdio as agent %s", facade.agent_id)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(facade: ToolFacade, *, path: str = "/mcp") -> Any:
    """The Starlette app of the streamable HTTP transport (for tests and custom hosting)."""
    server = build_server(facade)
    return server.streamable_http_app(streamable_http_path=path, host="127.0.0.1")


async def serve_http(facade: ToolFacade, *, port: int = 8765, path: str = "/mcp") -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` until cancelled."""
    import uvicorn

    app = http_app(facade, path=path)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False,
                            lifespan="on")
    log.info("amem MCP server on http://127.0.0.1:%d%s", port, path)
    await uvicorn.Server(config).serve()
