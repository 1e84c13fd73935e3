"""The MCP server: the tool facade over the official ``mcp`` SDK (v2), on stdio or streamable HTTP.

Every tool result travels twice, as the SDK recommends: as JSON text content (what most hosts
show the model) and as ``structuredContent``. A failed call is a *tool* error (``isError:
true`` with the structured error as its content), so the model can read it and retry; only
protocol faults become JSON-RPC errors.

Identity: on stdio the agent is the one the server was started with. On streamable HTTP each
request may name its agent in the ``X-Amem-Agent`` header and its lcm session family in
``X-Amem-Session`` (the connection sets them, never a tool argument); both are read as UTF-8,
percent-escapes allowed (``tools.tenancy.decode_header``). Without them the server's default
agent and family are used; a session must belong to the request's agent
(``tools.tenancy.session_key_for``), and an agent named without a session reads its own
default family, never the server's. The HTTP server binds 127.0.0.1 only, and every request
passes ``tools.http_guard`` first: Host and Origin checks, a key (``tools.keys``) that decides
which agents the headers may name, body limits, and a cap on each key's MCP sessions. A
read-only key calls only the tools that change nothing.

Calls run in worker threads under a deadline (``tools.runner``): a slow call answers
``timeout`` at its deadline and never holds up another agent's calls.

Beside ``/mcp`` the HTTP app serves the host's way into conversation memory, ``POST
/lcm/ingest`` and ``GET /lcm/assemble`` (``tools.host_http``): routes, not tools, with the same
identity rules and the same worker pool.

Resources: ``amem://status`` is ``memory_status`` of the request's agent, for hosts that show
resources. Over HTTP with request budgets both carry ``rate_limit``, the calling key's own
budgets and what they served and refused (``RateLimiter.report_of``: never another key's). ``amem://owner/status`` and ``amem://owner/doctor[?clean=1]`` are the store-wide
reports of ``amem status`` / ``amem doctor`` (every agent's count, lcm, the nightly run), and
``amem://owner/export?cursor=&limit=&vectors=&agent=`` one page of ``amem export``: not
listed, and read only by an owner: an owner key, or the secret ``amem serve --http`` keeps in
its private server record for the data directory's owner (``tools.remote``).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from amem.notes import check_agent

from .errors import ToolError, is_error
from .facade import ToolFacade
from .http_guard import PROOF_PATH, GuardConfig, guard_app, principal_of
from .numbers import ascii_digits
from .proof import proof_of
from .ratelimit import WARN_WINDOW_S, RateLimiter
from .runner import CallLimits, CallRunner
from .tenancy import AGENT_HEADER, SESSION_HEADER, decode_header, session_key_for

if TYPE_CHECKING:
    from amem.kernel.clock import Clock

log = logging.getLogger(__name__)

STATUS_URI = "amem://status"
_OWNER_PREFIX = "amem://owner/"


@dataclass(frozen=True)
class ExportPage:
    """One page of ``amem://owner/export``: after ``cursor`` (None: the first page), at most
    ``limit`` notes, their vectors with ``vectors``, one agent's notes with ``agent``."""

    cursor: str | None = None
    limit: int = 256
    vectors: bool = True
    agent: str | None = None


@dataclass(frozen=True)
class OwnerAccess:
    """The owner's reports: ``report(name, agent_id, clean)`` for ``status`` and ``doctor``,
    served to a request the guard admitted as an owner (``tools.http_guard``); ``export(page)``
    for ``amem://owner/export?...``, one page of every agent's notes (``amem export`` while the
    server holds the store), with the page's checked parameters (``export_params``)."""

    report: Callable[[str, str, bool], dict[str, Any]]
    export: Callable[[ExportPage], dict[str, Any]] | None = None


#: the most notes one export page holds (a page with vectors is ~4 KB a note)
EXPORT_PAGE_MAX = 1000


def export_params(query: str) -> ExportPage:
    """The page an ``amem://owner/export`` query asks for; anything else is ``invalid_argument``
    naming the parameter."""
    from urllib.parse import parse_qs

    try:
        given = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ToolError("invalid_argument", f"the export query {query[:100]!r} is not "
                        "name=value pairs joined by &") from None
    unknown = sorted(set(given) - {"cursor", "limit", "vectors", "agent"})
    if unknown:
        raise ToolError("invalid_argument", f"the export takes cursor, limit, vectors and agent, "
                        f"not {unknown[0][:50]!r}", field=unknown[0][:50])
    one: dict[str, str] = {}
    for name, values in given.items():
        if len(values) != 1:
            raise ToolError("invalid_argument", f"{name} was given {len(values)} times", field=name)
        one[name] = values[0]
    limit = one.get("limit", "256")
    if not ascii_digits(limit) or not 1 <= int(limit) <= EXPORT_PAGE_MAX:
        raise ToolError("invalid_argument", f"limit must be a whole number from 1 to "
                        f"{EXPORT_PAGE_MAX}, got {limit[:20]!r}", field="limit")
    vectors = one.get("vectors", "1")
    if vectors not in ("0", "1"):
        raise ToolError("invalid_argument", f"vectors must be 0 or 1, got {vectors[:20]!r}",
                        field="vectors")
    agent = one.get("agent")
    if agent is not None:
        try:
            check_agent(agent, field="agent")
        except ValueError as exc:
            raise ToolError("invalid_argument", str(exc), field="agent") from None
    cursor = one.get("cursor") or None
    if cursor is not None:
        import uuid

        try:
            cursor = str(uuid.UUID(cursor))
        except ValueError:  # the cursors a page hands out are point ids (UUIDs)
            raise ToolError("invalid_argument", f"cursor {cursor[:60]!r} is not one an export "
                            "page gave (a UUID)", field="cursor") from None
    return ExportPage(cursor=cursor, limit=int(limit), vectors=vectors == "1", agent=agent)


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        from amem.errors import MissingExtraError

        # mcp is a core dependency, so this means a broken or partial install
        raise MissingExtraError("the MCP server needs the official mcp SDK (a core dependency: "
                                "this install is incomplete)",
                                install="pip install 'mcp>=2,<3' (or, from a checkout: "
                                        "pip install -e .)") from None


def facade_for_headers(facade: ToolFacade, headers: Any) -> ToolFacade:
    """The facade one HTTP request runs as: ``facade`` re-bound to the agent and session its
    identity headers name (``headers`` is any mapping; ``None`` on stdio and in memory).

    Raises:
        ToolError: a header that is not UTF-8 or names no valid agent (``invalid_argument``),
            or a session of another agent (``forbidden``); ``field`` names the header.
    """
    if headers is None:
        return facade
    raw_agent, raw_session = (_one(headers, name) for name in (AGENT_HEADER, SESSION_HEADER))
    if raw_agent is None and raw_session is None:
        return facade
    agent = facade.agent_id
    if raw_agent is not None:
        agent = decode_header(raw_agent, AGENT_HEADER)
        try:
            check_agent(agent, field=AGENT_HEADER)
        except ValueError as exc:
            raise ToolError("invalid_argument", str(exc), field=AGENT_HEADER) from None
    session = None
    if raw_session is not None:
        session = session_key_for(agent, decode_header(raw_session, SESSION_HEADER),
                                  field=SESSION_HEADER)
    return facade.for_agent(agent, session_key=session)


def _one(headers: Any, name: str) -> str | None:
    """A header's value; a header sent twice is refused (which copy would be the caller?)."""
    values = headers.getlist(name) if hasattr(headers, "getlist") else [headers.get(name)]
    values = [v for v in values if v is not None]
    if len(values) > 1:
        raise ToolError("invalid_argument", f"the {name} header was sent {len(values)} times",
                        field=name)
    return values[0] if values else None


def build_server(facade: ToolFacade, *, name: str = "amem",
                 limits: CallLimits | None = None, owner: OwnerAccess | None = None,
                 runner: CallRunner | None = None,
                 own_budget: Callable[[str], dict[str, Any]] | None = None) -> Any:
    """A low-level ``mcp.server.Server`` whose tools are ``facade``'s, each call run by a
    ``CallRunner`` under ``limits`` (a deadline and worker bounds), with the resources of the
    module docstring (the owner's reports only with ``owner``). ``own_budget``: a key's own
    request budgets and what they refused (``RateLimiter.report_of``), added to the calling
    key's ``memory_status`` (and ``amem://status``) when the server has budgets."""
    _require_mcp()
    import mcp.types as types
    from mcp.server import Server

    runner = runner or CallRunner(limits)  # shared with the host routes of http_app

    def facade_for(ctx: Any) -> ToolFacade:
        # A view per request is cheap (the registry is a few dataclasses) and keeps no
        # per-agent state growing in a long-lived server.
        target = facade_for_headers(facade, getattr(getattr(ctx, "request", None), "headers", None))
        principal = principal_of(_scope(ctx))
        if principal is not None and principal.read_only:
            # a read-only key calls no tool that writes, and its reads record no usage on
            # the notes (retrieval counts, usage heat): they would change their ranking
            target = target.for_agent(target.agent_id, target.session_key, read_only=True)
        return target

    async def list_tools(ctx: Any, params: Any) -> Any:
        principal = principal_of(_scope(ctx))
        shown = facade.for_agent(facade.agent_id, read_only=True) if (
            principal is not None and principal.read_only) else facade
        return types.ListToolsResult(tools=mcp_tools(shown))

    async def call_tool(ctx: Any, params: Any) -> Any:
        try:
            target = facade_for(ctx)
        except ToolError as exc:  # a bad identity header or key: the caller's error, not ours
            result = exc.to_dict()
        else:
            result = await runner.call(target, params.name, params.arguments)
            if params.name == "memory_status":
                result = _with_own_budget(result, principal_of(_scope(ctx)), own_budget)
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=result, is_error=is_error(result))

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(resources=[types.Resource(
            name="status", title="Memory status", uri=STATUS_URI, mime_type="application/json",
            description="The calling agent's note count, the embedder, versions and degraded "
                        "paths (the memory_status tool's result).")])

    async def read_resource(ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        try:
            target = facade_for(ctx)
            if uri == STATUS_URI:
                result = await runner.call(target, "memory_status", {})
                if is_error(result):
                    raise ToolError(result["error"]["code"], result["error"]["message"])
                result = _with_own_budget(result, principal_of(_scope(ctx)), own_budget)
            elif uri.startswith(_OWNER_PREFIX):
                result = await _owner_read(owner, uri, target.agent_id, principal_of(_scope(ctx)))
            else:
                raise ToolError("not_found", f"no resource {uri[:200]!r}; there is {STATUS_URI}")
        except ToolError as exc:
            from mcp.shared.exceptions import MCPError

            raise MCPError(types.INVALID_PARAMS, str(exc), data=exc.to_dict()["error"]) from None
        text = json.dumps(result, ensure_ascii=False, default=str)
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="application/json", text=text)])

    return Server(name, version=_version(), on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource,
                  instructions=("Long-term memory (memory_*) and lossless conversation recall "
                                "(lcm_*). Search memory before answering questions about the "
                                "user or earlier sessions; store durable facts with memory_add."))


def _with_own_budget(result: dict[str, Any], principal: Any,
                     own_budget: Callable[[str], dict[str, Any]] | None) -> dict[str, Any]:
    """``memory_status``'s ``result`` with the calling key's own budgets and refusals (never
    another key's: the report is of ``principal``'s key id alone), and a ``degraded`` line
    when it was refused of late: an agent held back by its budget can see why. Unchanged off
    HTTP (no key) or without budgets."""
    if own_budget is None or principal is None or is_error(result):
        return result
    own = own_budget(principal.key_id)
    degraded = list(result.get("degraded", []))
    if own.get("refused_recently"):
        degraded.append(
            f"{own['refused_recently']} of your requests were refused in the last "
            f"{WARN_WINDOW_S / 60:g} minutes, over your key's request budget ({own['writes_refused']} "
            f"writes and {own['reads_refused']} reads refused since the server started): wait the "
            "Retry-After a refusal names before sending again")
    return {**result, "rate_limit": own, "degraded": degraded}


def _scope(ctx: Any) -> Any:
    """The ASGI scope of the HTTP request behind ``ctx`` (``None`` on stdio and in memory)."""
    return getattr(getattr(ctx, "request", None), "scope", None)


async def _owner_read(owner: OwnerAccess | None, uri: str, agent_id: str,
                      principal: Any) -> dict[str, Any]:
    """An owner report, for an owner key or the server record's secret only."""
    import anyio

    if owner is None or principal is None or not principal.owner:
        raise ToolError("forbidden", f"{uri[:100]} is for the owner of the data directory: use "
                        "an owner key (amem keys add --owner) or the CLI of the directory's owner")
    name, _, query = uri[len(_OWNER_PREFIX):].partition("?")
    if name == "export" and owner.export is not None:
        page, export = export_params(query), owner.export
        return await anyio.to_thread.run_sync(lambda: export(page))
    if name not in ("status", "doctor") or query not in ("", "clean=1"):
        raise ToolError("not_found", f"no resource {uri[:200]!r}")
    report = owner.report
    return await anyio.to_thread.run_sync(lambda: report(name, agent_id, query == "clean=1"))


def mcp_tools(facade: ToolFacade) -> list[Any]:
    """The ``tools/list`` entries: every listed tool with its title, hints and output schema.

    The output schema is served in lazy mode too: a client validates structured content only
    against a schema it was given, and a host does not show it to the model.
    """
    import mcp.types as types

    out = []
    for tool, d in zip(facade.listed(), facade.list_tools()):
        hints = tool.annotations()
        out.append(types.Tool(
            name=d["name"], title=hints["title"], description=d["description"],
            input_schema=d["input_schema"],
            output_schema=dict(tool.output_schema) if tool.output_schema else None,
            annotations=types.ToolAnnotations(
                title=hints["title"], read_only_hint=hints["readOnlyHint"],
                destructive_hint=hints["destructiveHint"],
                idempotent_hint=hints["idempotentHint"],
                open_world_hint=hints["openWorldHint"])))
    return out


def _version() -> str:
    try:
        from amem import __version__

        return __version__
    except ImportError:  # pragma: no cover - amem is always importable beside tools
        return "0"


async def serve_stdio(facade: ToolFacade, *, limits: CallLimits | None = None) -> None:
    """Serve on stdin/stdout until the host closes the pipe."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    server = build_server(facade, limits=limits)
    log.info("amem MCP server on stdio as agent %s", facade.agent_id)
    async with stdio_server() as (read, write):
        # The SDK's stdin reader hands a line it cannot read to the session as an exception,
        # which answers nothing: the host waited for its id until its own timeout. Each such
        # line gets its JSON-RPC error here, and the session sees only the lines it can read.
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def answer_unreadable() -> None:
            async with send:
                async for item in read:
                    if isinstance(item, Exception):
                        await write.send(SessionMessage(unreadable_reply(item)))
                    else:
                        await send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_unreadable)
            await server.run(receive, write, server.create_initialization_options())
            tg.cancel_scope.cancel()


def unreadable_reply(exc: Exception) -> Any:
    """The JSON-RPC error for a stdin line the SDK could not read (``exc``, its pydantic
    error): -32700 with a null id for text that is not JSON; -32600 (invalid request) with the
    request's id when the line parses but is not a request the SDK takes (a lone surrogate,
    nesting past 64 levels, a missing ``method``), naming the problem as the HTTP door does
    (``amem.kernel.safejson``)."""
    import json

    from mcp import types

    from amem.kernel import safejson
    from amem.kernel.errors import InvalidArgumentError

    errors = exc.errors() if hasattr(exc, "errors") else []
    raw = errors[0].get("input") if errors else None
    parsed: Any = raw if isinstance(raw, dict) else None
    reason = "not a JSON-RPC request the server can read"
    if isinstance(raw, str):
        try:
            safejson.loads(raw, root="request")
        except InvalidArgumentError as bad:
            reason = str(bad)
        try:  # the standard parser reads lone surrogates and deep nesting: it finds the id
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            parsed = None
    request_id = parsed.get("id") if isinstance(parsed, dict) else None
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    if parsed is None:
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: {reason}"[:500])
    else:
        error = types.ErrorData(code=types.INVALID_REQUEST, message=f"Invalid request: {reason}"[:500])
    log.warning("stdio: answered an unreadable line with JSON-RPC %d (%s)", error.code, error.message)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def http_app(facade: ToolFacade, *, path: str = "/mcp", limits: CallLimits | None = None,
             owner: OwnerAccess | None = None, guard: GuardConfig | None = None,
             runs_path: Path | None = None, clock: Clock | None = None) -> Any:
    """The ASGI app of the streamable HTTP transport (for tests and custom hosting): the
    Starlette app (``.app``) with the host's lcm routes beside ``path`` (``tools.host_http``),
    in the same worker pool, the server's proof and the inspector's pages under ``/ui``
    (``tools.ui``; ``runs_path`` is the nightly run history its health page plots), all behind
    one ``tools.http_guard``.

    ``guard`` says who may call; without it nobody can (no keys, no record secret): a server
    is never open by omission. Its request budgets (``guard.rate_limits``) run on ``clock``
    (tests pass a ``ManualClock``), and what they refused joins the owner's ``status``.
    """
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from .host_http import EXPORT_HINT, INGEST_PATH, add_host_routes

    config = guard if guard is not None else GuardConfig(mcp_path=path)
    if config.mcp_path != path:
        raise ValueError(f"the guard's mcp_path {config.mcp_path!r} is not the endpoint {path!r}")
    runner = CallRunner(limits)
    limiter = RateLimiter(config.rate_limits, clock) if config.rate_limits is not None else None
    owner = _with_budgets(owner, limiter)
    server = build_server(facade, limits=limits, owner=owner, runner=runner,
                          own_budget=limiter.report_of if limiter is not None else None)
    app = server.streamable_http_app(streamable_http_path=path, host="127.0.0.1",
                                     session_idle_timeout=config.session_idle)
    add_host_routes(app, runner, lambda headers: facade_for_headers(facade, headers))

    async def proof(request: Request) -> Response:
        nonce = request.query_params.get("nonce", "")
        if not config.record_secret:
            return JSONResponse({"error": {"code": "not_found", "message": "this server keeps "
                                           "no record to prove", "field": None}}, status_code=404)
        if not (32 <= len(nonce) <= 128) or any(c not in "0123456789abcdef" for c in nonce):
            return JSONResponse({"error": {"code": "invalid_argument", "message": "nonce must be "
                                           "32-128 lower-case hex digits", "field": "nonce"}},
                                status_code=400)
        return JSONResponse({"proof": proof_of(config.record_secret, nonce), "pid": os.getpid()})

    app.router.routes.append(Route(PROOF_PATH, proof, methods=["GET"]))
    # the inspector is mounted whatever the stores, so that its routes are always in the
    # app's route list (tests/tools/security enumerates them); without a note store its
    # pages say so
    from .ui.app import UiDeps, add_ui_routes
    from .ui.sessions import UiSessions

    if config.ui_sessions is None:
        config = replace(config, ui_sessions=UiSessions())
    assert config.ui_sessions is not None

    def agent_status(agent: str) -> dict[str, Any]:
        return facade.for_agent(agent).call("memory_status", {})

    add_ui_routes(app, UiDeps(memory=facade.memory, lcm=facade.lcm,
                              default_agent=facade.agent_id, sessions=config.ui_sessions,
                              owner_report=owner.report if owner else None,
                              runs_path=runs_path, agent_status=agent_status,
                              budgets=limiter.report if limiter is not None else None,
                              own_budget=limiter.report_of if limiter is not None else None))
    read_tools = frozenset(t.name for t in facade.registry if not t.writes)
    return guard_app(app, config, read_tools=read_tools, limiter=limiter,
                     body_hints={INGEST_PATH: EXPORT_HINT})


def _with_budgets(owner: OwnerAccess | None, limiter: RateLimiter | None) -> OwnerAccess | None:
    """``owner`` whose ``status`` also says what the request budgets refused, per key: the
    operator's view of an agent held back (``amem status``, the owner's resource), and whose
    ``doctor`` warns of a key refused often of late (``RateLimiter.warnings``: its id and what
    to do). Without budgets (an app built by a test or a custom host) the reports are
    ``owner``'s own."""
    if owner is None or limiter is None:
        return owner
    report, budgets, warnings = owner.report, limiter.report, limiter.warnings

    def with_budgets(name: str, agent_id: str, clean: bool) -> dict[str, Any]:
        data = report(name, agent_id, clean)
        if name == "status":
            data = {**data, "rate_limit": budgets()}
        elif name == "doctor":  # warnings, not failures: the stores are sound
            data = {**data, "warnings": [*data.get("warnings", []), *warnings()]}
        return data

    return replace(owner, report=with_budgets)  # the export (and anything else) kept


async def serve_http(facade: ToolFacade, *, port: int = 8765, path: str = "/mcp",
                     limits: CallLimits | None = None, owner: OwnerAccess | None = None,
                     guard: GuardConfig | None = None, runs_path: Path | None = None,
                     on_listening: Callable[[], None] | None = None) -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` until cancelled; ``on_listening`` is called
    once this server's own socket is bound and listening (never when the bind failed)."""
    import uvicorn

    app = http_app(facade, path=path, limits=limits, owner=owner, guard=guard, runs_path=runs_path)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False,
                            lifespan="on")
    log.info("amem MCP server on http://127.0.0.1:%d%s", port, path)

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)  # exits the process's serve() when it cannot bind
            if self.started and on_listening is not None:
                on_listening()

    await Server(config).serve()
