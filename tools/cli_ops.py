"""``amem`` commands that run the server and look after both stores: serve, scheduler,
status, doctor, tools, and the ``lcm`` group."""

from __future__ import annotations

import argparse
import logging
from typing import Any, Callable

log = logging.getLogger(__name__)

Cmd = Callable[..., argparse.ArgumentParser]


def add_commands(cmd: Cmd, sub: Any) -> None:
    """Register these commands on the ``amem`` parser (called by ``tools.cli.build_parser``)."""
    from .export import FORMATS

    p = cmd("serve", cmd_serve, "run the MCP server (stdio by default)")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead")
    p.add_argument("--port", type=_port, default=8765, help="HTTP port, 1-65535 (default 8765)")
    p.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    p.add_argument("--lazy", action="store_true", default=None,
                   help="lazy tool loading (default: $AMEM_LAZY_TOOLS)")
    p.add_argument("--no-lcm", action="store_true", help="serve the memory tools only")
    p.add_argument("--no-scheduler", action="store_true",
                   help="no nightly maintenance (nor background embedding of lcm messages)")
    p.add_argument("--session-key", help="lcm session family the lcm_* tools search")

    p = cmd("scheduler", cmd_scheduler,
            "run the nightly maintenance in the foreground; every argument after the word "
            "goes to the scheduler (`amem scheduler --once`, `--status`, ...)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the scheduler")

    from .cli_server import add_server_option

    p = cmd("status", cmd_status, "what is stored: both stores (notes and conversations)")
    add_server_option(p)
    p = cmd("doctor", cmd_doctor, "check both stores for problems")
    p.add_argument("--clean", action="store_true", help="also list lcm clean-up candidates")
    add_server_option(p)

    p = cmd("tools", cmd_tools, "print the tool schemas in a host's format")
    p.add_argument("--format", choices=sorted(FORMATS), default="mcp", help="default: mcp")
    p.add_argument("--lazy", action="store_true", help="the lazy-loading list")
    p.add_argument("--no-lcm", action="store_true", help="leave the lcm_* tools out")
    p.add_argument("--tokens", action="store_true", help="print the list's size in tokens only")

    lcm: argparse.ArgumentParser = cmd("lcm", _usage, "conversation store: grep, describe, "
                                       "expand, status, doctor, ingest, assemble")
    lcm.set_defaults(func=lambda a: _usage(lcm))
    lsub = lcm.add_subparsers(dest="lcm_command", metavar="LCM_COMMAND")
    p = cmd("grep", cmd_lcm_grep, "search messages and summaries", into=lsub)
    p.add_argument("pattern")
    p.add_argument("--mode", choices=["full_text", "regex", "semantic", "hybrid"], default="full_text",
                   help="words (default), an RE2 regular expression (no backreferences or "
                   "lookarounds), meaning (semantic: the embedder's cosine) or hybrid (both, RRF)")
    p.add_argument("--scope", choices=["messages", "summaries", "both"], default="both",
                   help="what to search (default both)")
    p.add_argument("--sort", choices=["recency", "relevance", "hybrid"],
                   help="hit order (default recency; relevance for semantic and hybrid)")
    p.add_argument("-n", "--limit", type=int, default=50, help="at most this many hits (1-200)")
    p.add_argument("--since", help="ISO date/time: only newer items")
    p.add_argument("--before", help="ISO date/time: only older items")
    p.add_argument("--conversation", type=int, help="one conversation id")
    p.add_argument("--session-key", help="search this session family")
    p.add_argument("--all", action="store_true", help="every conversation")
    p = cmd("describe", cmd_lcm_describe, "show a summary or file by id", into=lsub)
    p.add_argument("id")
    p = cmd("expand", cmd_lcm_expand, "walk summaries down to their messages", into=lsub)
    p.add_argument("ids", nargs="*", help="summary ids")
    p.add_argument("--query", help="find the summaries by this search instead")
    p.add_argument("--max-depth", type=int, default=3, help="summary levels to descend")
    p.add_argument("--token-cap", type=int, default=8000, help="stop after this many tokens")
    p.add_argument("--session-key", help="the session family --query searches")
    p.add_argument("--all", action="store_true", help="--query searches every conversation")
    cmd("status", cmd_lcm_status, "conversation store status", into=lsub)
    p = cmd("doctor", cmd_lcm_doctor, "conversation store checks", into=lsub)
    p.add_argument("--clean", action="store_true", help="read-only clean-up candidates")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="rank the N worst conversations (findings, failures, debt, size; default 10)")
    from .lcm_embed import add_embed_command
    from .lcm_host import add_host_commands
    from .lcm_migrate import add_migrate_command

    add_host_commands(cmd, lsub)
    add_embed_command(cmd, lsub)
    add_migrate_command(cmd, lsub)


def _port(text: str) -> int:
    """``--port``: an integer 1-65535 (argparse turns the error into exit 2 naming --port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer 1-65535, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be 1-65535, got {port}")
    return port


def _check_port(port: int) -> None:
    """Refuse a port another process listens on before the stores are opened.

    The server binds the same way (127.0.0.1, address reuse on); a process that takes the
    port between this check and the server's bind is caught by ``cmd_serve`` as well.
    """
    import socket

    from .cli import CliError

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise CliError(_port_message(port, exc.strerror or str(exc)),
                           code="invalid_argument", exit_code=2, field="port") from None


def _port_message(port: int, why: str) -> str:
    return (f"cannot listen on 127.0.0.1:{port} ({why}); is another server running there? "
            f"choose another --port")


def _usage(parser: Any) -> int:
    """``amem lcm`` without a subcommand: show what there is (a usage error)."""
    import sys

    parser.print_help(sys.stderr)
    return 2


# ------------------------------------------------------------------------------ serve


def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from .cli import CliError, _settings, _version
    from .facade import ToolFacade, lazy_from_env
    from .mcp_server import OwnerAccess, serve_http, serve_stdio
    from .remote import serving_record
    from .runtime import open_lcm, open_memory

    if not args.verbose and not args.env.get("AMEM_LOG_LEVEL"):
        # A server is read through its log (a host's MCP log view shows stderr): it says
        # where it serves from and that the scheduler started, unless asked to be quieter.
        from .cli import setup_logging

        setup_logging(1, args.env)
    settings = _settings(args)
    try:
        lazy = args.lazy if args.lazy is not None else lazy_from_env(settings.env)
    except ValueError as exc:
        raise CliError(str(exc), code="config_error", exit_code=2) from None
    if args.http:
        _check_port(args.port)
    memory = open_memory(settings)
    lcm = None if args.no_lcm else open_lcm(settings)
    handle = worker = None
    try:
        if not args.no_scheduler:
            handle = _start_scheduler(memory, lcm, settings)
            from .lcm_embed import start_embed_worker

            worker = start_embed_worker(lcm)  # embeds what ingest left pending, in the background
        facade = ToolFacade(memory, lcm, agent_id=settings.agent_id, lazy=lazy,
                            session_key=args.session_key, descriptions=_descriptions(settings))
        log.info("amem %s serving agent %r over %s; data directory %s", _version(),
                 settings.agent_id, f"http port {args.port}" if args.http else "stdio",
                 settings.config.home)
        if args.http:
            # <home>/server.json tells the CLI where it serves (tools.remote): `amem search`
            # and the other read commands then ask this server instead of failing "store busy"
            url = f"http://127.0.0.1:{args.port}{args.path}"
            with serving_record(settings.config.home, transport="http", url=url) as token:
                owner = OwnerAccess(token or "", _owner_report(memory, lcm, settings))
                try:
                    anyio.run(lambda: serve_http(facade, port=args.port, path=args.path,
                                                 owner=owner))
                except SystemExit as exc:  # uvicorn exits (code 3) when it cannot bind
                    if exc.code in (0, None):
                        raise
                    raise CliError(_port_message(args.port, "the server could not bind it"),
                                   code="invalid_argument", exit_code=2, field="port") from None
        else:
            with serving_record(settings.config.home, transport="stdio"):  # the CLI says why not
                anyio.run(serve_stdio, facade)
    finally:
        if worker is not None:
            worker.shutdown()
        if handle is not None and hasattr(handle, "shutdown"):
            handle.shutdown()
        if lcm is not None and hasattr(lcm, "close"):
            lcm.close()
        memory.close()
    return 0


def _owner_report(memory: Any, lcm: Any, settings: Any) -> Any:
    """The reports behind ``amem status`` / ``doctor`` that the server gives the token's holder."""
    from .reports import lcm_report

    def report(name: str, agent_id: str, clean: bool) -> dict[str, Any]:
        def lcm_part(method: str) -> dict[str, Any]:
            return lcm_report(lcm, method)

        if name == "status":
            return status_data(memory, agent_id, lcm_part, settings)
        return doctor_data(memory, lcm_part, settings, clean)

    return report


def _start_scheduler(memory: Any, lcm: Any, settings: Any) -> Any:
    from .cli import CliError

    try:
        import scheduler
        start = scheduler.start_background
    except (ImportError, AttributeError) as exc:
        raise CliError(f"the nightly scheduler is not available ({exc}); run `amem serve "
                       "--no-scheduler` and schedule `amem consolidate` yourself",
                       code="unavailable") from None
    return start(memory, lcm, settings.config)


def cmd_scheduler(args: argparse.Namespace) -> int:
    return run_scheduler(list(args.rest), args.env)


def run_scheduler(argv: list[str], env: Any) -> int:
    """Hand the arguments to ``scheduler.cli_main`` (imported only when asked for)."""
    try:
        import scheduler
        cli_main = scheduler.cli_main
    except (ImportError, AttributeError) as exc:
        import sys

        print(f"amem: error: the scheduler is not available in this installation ({exc})",
              file=sys.stderr)
        return 1
    return int(cli_main(argv, env=env) or 0)


# ------------------------------------------------------------------------------ status / doctor


def cmd_status(args: argparse.Namespace) -> int:
    from .cli import _settings, emit, kv_text
    from .cli_server import open_notes, remote_read
    from .remote import OWNER_STATUS

    settings = _settings(args)
    with open_notes(args, settings) as (store, server):
        data = (remote_read(server, OWNER_STATUS) if server is not None
                else status_data(store, settings.agent_id, lambda m: _lcm_call(settings, m), settings))
    emit(args, data, lambda: kv_text(data))
    return 0


def status_data(store: Any, agent_id: str, lcm: Any, settings: Any) -> dict[str, Any]:
    """``amem status`` of an open store (the server answers the CLI with the same)."""
    from .cli import _version
    from .reports import status_report

    return {"version": _version(), **status_report(store, agent_id, lcm, _nightly_status(settings))}


def doctor_data(store: Any, lcm: Any, settings: Any, clean: bool) -> dict[str, Any]:
    """``amem doctor`` of an open store (the server answers the CLI with the same)."""
    from .reports import doctor_report

    return doctor_report(store, lcm, _nightly_status(settings), clean=clean)


def _descriptions(settings: Any) -> dict[str, str]:
    """Tool descriptions overridden by config (``tools.conventions.description_overrides``)."""
    from .conventions import description_overrides
    from .facade import catalogue

    return description_overrides(settings.env, settings.config_path,
                                 names=[t.name for t in catalogue()])


def _nightly_status(settings: Any) -> dict[str, Any]:
    """The nightly job's last run (a failure shows here until a later run succeeds)."""
    from scheduler import last_run_status

    return last_run_status(settings.config.home, settings.config)


def cmd_doctor(args: argparse.Namespace) -> int:
    from .cli import _settings, emit, kv_text
    from .cli_server import open_notes, remote_read
    from .remote import OWNER_DOCTOR

    settings = _settings(args)
    with open_notes(args, settings) as (store, server):
        data = (remote_read(server, OWNER_DOCTOR + ("?clean=1" if args.clean else ""))
                if server is not None
                else doctor_data(store, lambda m: _lcm_call(settings, m), settings, args.clean))
    emit(args, data, lambda: kv_text(data))
    return 0 if data["ok"] else 1


def _lcm_call(settings: Any, method: str, *a: Any, **kw: Any) -> dict[str, Any]:
    """One lcm report, or ``{"available": false, "reason": ...}`` when lcm cannot be opened."""
    from .runtime import open_lcm

    try:
        store = open_lcm(settings, required=True)
    except Exception as exc:  # the memory half of status/doctor still has something to say
        return {"available": False, "reason": str(exc)}
    try:
        result = getattr(store, method)(*a, **kw)
        return result.to_dict() if hasattr(result, "to_dict") else dict(result)
    finally:
        if hasattr(store, "close"):
            store.close()


# ------------------------------------------------------------------------------ tools


def cmd_tools(args: argparse.Namespace) -> int:
    import json

    from .export import estimate_tokens, export
    from .facade import ToolFacade

    facade = ToolFacade(None, None, agent_id="default", lazy=args.lazy,
                        lcm_listed=not args.no_lcm)
    exported = export(facade.list_tools(), args.format)
    if args.tokens:
        tokens = estimate_tokens(exported)
        emit_data = {"format": args.format, "lazy": args.lazy, "tools": len(exported),
                     "tokens": tokens}
        print(json.dumps(emit_data) if args.json else
              f"{len(exported)} tools, ~{tokens} tokens ({args.format}, lazy={args.lazy})")
        return 0
    print(json.dumps(exported, ensure_ascii=False, indent=2))
    return 0


# ------------------------------------------------------------------------------ lcm


def _lcm_run(args: argparse.Namespace, call: Callable[[Any], Any],
             text: Callable[[dict[str, Any]], str] | None = None) -> int:
    from .cli import _settings, emit, kv_text
    from .runtime import open_lcm

    store = open_lcm(_settings(args), required=True)
    try:
        result = call(store)
    finally:
        if hasattr(store, "close"):
            store.close()
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    emit(args, data, lambda: (text or kv_text)(data))
    return 0


def _grep_text(data: dict[str, Any]) -> str:
    hits = data.get("hits", [])
    lines = [f"{h['kind'][:3]} {h['id']:<22} {h.get('created_at', '')[:19]}  "
             f"{' '.join(str(h.get('snippet', '')).split())[:100]}" for h in hits]
    lines.append(f"{len(hits)} hits" + (" (truncated)" if data.get("truncated") else ""))
    # a degraded answer says so in text too (messages not embedded yet, a deadline hit)
    lines += [f"warning: {w}" for w in data.get("warnings", [])]
    return "\n".join(lines)


def cmd_lcm_grep(args: argparse.Namespace) -> int:
    from .cli import CliError

    if not (args.session_key or args.conversation is not None or args.all):
        # Said in the command's own words (the store's message names Python arguments).
        raise CliError("say what to search: --session-key KEY, --conversation ID or --all",
                       code="invalid_argument", exit_code=2, field="session_key")
    kwargs: dict[str, Any] = {"mode": args.mode, "scope": args.scope, "sort": args.sort,
                              "limit": args.limit, "since": args.since, "before": args.before,
                              "conversation_id": args.conversation,
                              "all_conversations": args.all}
    if args.session_key:
        kwargs["session_key"] = args.session_key
    return _lcm_run(args, lambda s: s.grep(args.pattern, **kwargs), _grep_text)


def cmd_lcm_describe(args: argparse.Namespace) -> int:
    return _lcm_run(args, lambda s: s.describe(args.id))


def cmd_lcm_expand(args: argparse.Namespace) -> int:
    from .cli import CliError

    if not args.ids and not args.query:
        raise CliError("give summary ids or --query", code="invalid_argument", exit_code=2)
    return _lcm_run(args, lambda s: s.expand(args.ids or None, query=args.query,
                                             max_depth=args.max_depth, token_cap=args.token_cap,
                                             session_key=args.session_key,
                                             all_conversations=args.all))


def cmd_lcm_status(args: argparse.Namespace) -> int:
    # The lossless-claw keys the config accepted but lcm does not act on (warned once at load),
    # and which models make summaries and expansions (None: extractive, no LLM configured).
    def report(s: Any) -> dict[str, Any]:
        summary, expansion = s.summarizer.llm, s.recall.llm
        breaker = getattr(summary, "breaker", None)
        llm = None if summary is None else {
            "summaryModel": getattr(summary, "model", None), "expansionModel": getattr(expansion, "model", None),
            "circuit": breaker.state if breaker is not None else None}
        return {**s.status().to_dict(), "llm": llm, "ignoredKeys": list(s.config.ignored_keys)}

    return _lcm_run(args, report)


def cmd_lcm_doctor(args: argparse.Namespace) -> int:
    return _lcm_run(args, lambda s: s.doctor_clean() if args.clean else s.doctor(top=args.top))
