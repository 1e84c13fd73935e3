"""The commands that run the server and look after both stores: serve, status, doctor, tools."""

from __future__ import annotations

import argparse
import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any


from .common import Cmd, runtime, version
from .output import CliError, emit, kv_text, setup_logging, usage_error
from .server import add_server_option, local_store, open_notes, remote_read

if TYPE_CHECKING:
    from amem import MemoryStore
    from lcm import LcmStore
    from scheduler import SchedulerHandle

    from ..http_guard import GuardConfig
    from ..mcp_server import ExportPage
    from ..ratelimit import RateLimits
    from ..runtime import Runtime
    from ..reports import LcmReport
    from .common import Subparsers

log = logging.getLogger(__name__)

#: ``report(name, agent_id, clean)``: the owner's ``status`` / ``doctor`` (``tools.mcp_server.OwnerAccess``)
OwnerReport = Callable[[str, str, bool], dict[str, Any]]


def register(cmd: Cmd, sub: Subparsers) -> None:
    """Add these commands to the ``amem`` parser (called by ``tools.cli.main``)."""
    from ..export import FORMATS

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
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="HTTP: admit every caller without a key, as the owner (a sandbox that "
                        "nothing else shares only; logged and shown by `amem status`)")
    p.add_argument("--session-idle", type=float, default=None, metavar="SECONDS",
                   help="HTTP: an MCP session idle this long expires (default 600)")
    p.add_argument("--sessions-per-key", type=int, default=None, metavar="N",
                   help="HTTP: most open MCP sessions of one key (default 64)")
    p.add_argument("--no-rate-limit", action="store_true",
                   help="HTTP: no per-key request budgets (the [serve] table's rate_limit = "
                        "false; the budgets themselves are set there)")

    p = cmd("status", cmd_status, "what is stored: both stores (notes and conversations)")
    add_server_option(p)
    p = cmd("doctor", cmd_doctor, "check both stores for problems")
    p.add_argument("--clean", action="store_true", help="also list lcm clean-up candidates")
    p.add_argument("--fix", action="store_true",
                   help="repair what can be repaired: make every file and directory of the "
                        "stores private to its owner (files 0600, directories 0700), "
                        "release facts hidden by unsound supersession marks, and tidy tags "
                        "an older amem wrote (a tag of only '#' dropped, one tag in two "
                        "spellings kept once; a local store)")
    add_server_option(p)

    p = cmd("tools", cmd_tools, "print the tool schemas in a host's format")
    p.add_argument("--format", choices=sorted(FORMATS), default="mcp", help="default: mcp")
    p.add_argument("--lazy", action="store_true", help="the lazy-loading list")
    p.add_argument("--no-lcm", action="store_true", help="leave the lcm_* tools out")
    p.add_argument("--tokens", action="store_true", help="print the list's size in tokens only")


def _port(text: str) -> int:
    """``--port``: an integer 1-65535 (argparse turns the error into exit 2 naming --port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer 1-65535, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be 1-65535, got {port}")
    return port


def _open_lcm(rt: Any) -> Any:
    """The conversation store, or a CliError that names its file and the way around it: a
    damaged lcm.db gave "unexpected DatabaseError", which said neither."""
    from lcm.errors import LcmEngineError

    try:
        return rt.lcm
    except LcmEngineError as exc:  # LcmStore names the file and what to do (lcm.errors.unopenable)
        raise CliError(f"{exc}; or run with --no-lcm to serve the notes without the "
                       "conversation store", code="unavailable", field="lcm.db") from None


def _check_port(port: int) -> None:
    """Refuse a port another process listens on before the stores are opened.

    The server binds the same way (127.0.0.1, address reuse on); a process that takes the
    port between this check and the server's bind is caught by ``cmd_serve`` as well.
    """
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise usage_error(_port_message(port, exc.strerror or str(exc)), "port") from None


def _port_message(port: int, why: str) -> str:
    return (f"cannot listen on 127.0.0.1:{port} ({why}); is another server running there? "
            f"choose another --port")


# ------------------------------------------------------------------------------ serve


#: how long a starting server waits for a CLI command that holds the store (an import may
#: take minutes: past this the server says who holds it and exits 4, as before)
OPEN_WAIT_S = 15.0


def open_waiting(rt: Runtime, wait_s: float = OPEN_WAIT_S) -> MemoryStore:
    """The note store, waiting up to ``wait_s`` for a command that holds it: a server restarted
    by its supervisor while `amem add` or `amem list` ran exited at once (exit 4), and the
    supervisor's next try might meet the next command."""
    import time

    from amem.errors import StoreLockedError

    deadline = time.monotonic() + wait_s
    told = False
    while True:
        try:
            return rt.memory
        except StoreLockedError as exc:
            if time.monotonic() >= deadline:
                raise
            if not told:
                log.warning("%s; waiting up to %g s for it to finish", exc, wait_s)
                told = True
            time.sleep(0.2)


def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from ..facade import ToolFacade, lazy_from_env
    from ..keys import KeyStore
    from ..lcm_embed import start_embed_worker
    from ..mcp_server import OwnerAccess, serve_http, serve_stdio
    from ..remote import serving_record

    if not args.verbose and not args.env.get("AMEM_LOG_LEVEL"):
        # A server is read through its log (a host's MCP log view shows stderr): it says
        # where it serves from and that the scheduler started, unless asked to be quieter.
        setup_logging(1, args.env)
    rt = runtime(args)
    try:
        lazy = args.lazy if args.lazy is not None else lazy_from_env(rt.env)
    except ValueError as exc:
        raise CliError(str(exc), code="config_error", exit_code=2) from None
    guard = _guard_config(args, rt.settings.serve) if args.http else None
    if not args.http and (args.insecure_no_auth or args.session_idle is not None
                          or args.sessions_per_key is not None or args.no_rate_limit):
        raise usage_error("--insecure-no-auth, --session-idle, --sessions-per-key and "
                          "--no-rate-limit apply to --http only (on stdio the host owns the "
                          "process)", "http")
    home = rt.settings.amem.home
    if args.http:
        _check_port(args.port)
        _check_keys(home, insecure=args.insecure_no_auth)
    try:
        with _terminate_cleanly(), rt:  # rt closes lcm, then the notes, after the workers stop
            memory = open_waiting(rt)
            # a server searches all day: every note's ranking fields are read into RAM in the
            # background (amem.backends._edge_table), so no search waits on payload pages
            memory.keep_ranking_fields()
            # and agents add one note at a time: those too get indexed as they pile up
            memory.keep_index_built()
            lcm = None if args.no_lcm else _open_lcm(rt)
            handle = worker = None
            try:
                if not args.no_scheduler:
                    handle = _start_scheduler(memory, lcm, rt)
                    worker = start_embed_worker(lcm)  # embeds what ingest left pending, in the background
                facade = ToolFacade(memory, lcm, agent_id=rt.agent_id, lazy=lazy,
                                    session_key=args.session_key,
                                    descriptions=tool_descriptions(rt))
                log.info("amem %s serving agent %r over %s; data directory %s", version(),
                         rt.agent_id, f"http port {args.port}" if args.http else "stdio", home)
                if args.http:
                    # <home>/server.json tells the CLI where it serves (tools.remote): `amem search`
                    # and the other read commands then ask this server instead of failing "store busy"
                    url = f"http://127.0.0.1:{args.port}{args.path}"
                    assert guard is not None
                    with serving_record(home, transport="http", url=url,
                                        insecure=guard.insecure_no_auth) as token:
                        owner = OwnerAccess(_owner_report(memory, lcm, rt, guard.insecure_no_auth),
                                            export=_owner_export(memory))
                        config = replace(guard, record_secret=token, keys=KeyStore.for_home(home),
                                         ui_sessions=getattr(args, "ui_sessions", None))
                        runs = rt.settings.scheduler.runs_path
                        try:
                            anyio.run(lambda: serve_http(
                                facade, port=args.port, path=args.path, owner=owner, guard=config,
                                runs_path=runs, on_listening=getattr(args, "on_listening", None)))
                        except SystemExit as exc:  # uvicorn exits (code 3) when it cannot bind
                            if exc.code in (0, None):
                                raise
                            raise usage_error(_port_message(args.port, "the server could not bind it"),
                                              "port") from None
                else:
                    with serving_record(home, transport="stdio"):  # the CLI says why not
                        anyio.run(serve_stdio, facade)
            finally:
                if worker is not None:
                    worker.shutdown()
                if handle is not None:
                    handle.shutdown()
    except Terminated:  # SIGTERM: the same clean stop as Ctrl-C, by the finally blocks
        log.info("amem serve: stopped by SIGTERM")
    return 0


class Terminated(Exception):
    """SIGTERM arrived: unwind like Ctrl-C (records removed, stores closed), then exit 0."""


@contextmanager
def _terminate_cleanly() -> Iterator[None]:
    """While the server runs, SIGTERM raises :class:`Terminated` in the main thread.

    By default SIGTERM ends the process at once: the server record stays behind and the
    stores are not closed. uvicorn catches SIGTERM while it serves, stops gracefully, then
    raises the signal again, which now lands here and unwinds through every ``finally``.
    The previous handler is put back afterwards (``main()`` may run inside another program).
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread (tests call main() from others)
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_keys(home: str | Path, *, insecure: bool) -> None:
    """Refuse to start over a key file that cannot be trusted; say who can call."""
    from ..keys import KeyFileError, KeyStore

    try:
        issued = KeyStore.for_home(home).list()
    except KeyFileError as exc:
        raise CliError(str(exc), code="config_error", exit_code=2) from None
    if not insecure and not issued:
        log.info("no keys issued yet: only the amem CLI of this data directory's owner can "
                 "call this server; `amem keys add --agent ID` issues a key for an MCP host")


def _guard_config(args: argparse.Namespace, budgets: RateLimits) -> GuardConfig:
    """Who may call the HTTP server and how often (``tools.http_guard``), from the command
    line and the ``[serve]`` settings (``budgets``; ``--no-rate-limit`` turns them off)."""
    from ..http_guard import DEFAULT_SESSION_IDLE, DEFAULT_SESSIONS_PER_KEY, GuardConfig

    idle = DEFAULT_SESSION_IDLE if args.session_idle is None else args.session_idle
    cap = DEFAULT_SESSIONS_PER_KEY if args.sessions_per_key is None else args.sessions_per_key
    if not (idle > 0 and idle < float("inf")):
        raise usage_error(f"--session-idle must be a positive number of seconds, got {idle}",
                          "session-idle")
    if cap < 1:
        raise usage_error(f"--sessions-per-key must be at least 1, got {cap}", "sessions-per-key")
    if args.no_rate_limit:
        budgets = replace(budgets, enabled=False)
    if not budgets.enabled:
        log.info("amem serve: request budgets are off: one key can send as many requests as "
                 "it likes")
    return GuardConfig(insecure_no_auth=args.insecure_no_auth, mcp_path=args.path,
                       session_idle=idle, sessions_per_key=cap, rate_limits=budgets)


#: what ``amem status`` says of a server that admits everyone
INSECURE_WARNING = ("this server runs with --insecure-no-auth: every local process and user can "
                    "read, change and delete every agent's memory")


def _owner_report(memory: MemoryStore, lcm: LcmStore | None, rt: Runtime,
                  insecure: bool = False) -> OwnerReport:
    """The reports behind ``amem status`` / ``doctor`` that the server gives an owner."""
    from ..reports import lcm_report

    def report(name: str, agent_id: str, clean: bool) -> dict[str, Any]:
        def lcm_part(method: str) -> dict[str, Any]:
            return lcm_report(lcm, method)

        if name == "status":
            data = status_data(memory, agent_id, lcm_part, rt)
            if insecure:
                data["server_auth"] = f"OFF: {INSECURE_WARNING}"
            return data
        return doctor_data(memory, lcm_part, rt, clean)

    return report


def _owner_export(memory: MemoryStore) -> Callable[[ExportPage], dict[str, Any]]:
    """One page of ``amem export`` for the owner's CLI while this server holds the store."""
    from amem.export import export_page, export_where

    def export(page: ExportPage) -> dict[str, Any]:
        lines, nxt = export_page(memory, cursor=page.cursor, limit=page.limit,
                                 with_vectors=page.vectors, agent_id=page.agent)
        data: dict[str, Any] = {"lines": lines, "next": nxt}
        if page.cursor is None:  # the first page: how many there are, for the progress bar
            data["total"] = memory.index.backend.count(export_where(page.agent))
        return data

    return export


def _start_scheduler(memory: MemoryStore, lcm: LcmStore | None, rt: Runtime) -> SchedulerHandle:
    try:
        import scheduler
        start = scheduler.start_background
    except (ImportError, AttributeError) as exc:
        raise CliError(f"the nightly scheduler is not available ({exc}); run `amem serve "
                       "--no-scheduler` and schedule `amem consolidate` yourself",
                       code="unavailable") from None
    handle: SchedulerHandle = start(memory, lcm, rt.settings.scheduler)
    return handle


# ------------------------------------------------------------------------------ status / doctor


def cmd_status(args: argparse.Namespace) -> int:
    from ..remote import OWNER_STATUS

    with runtime(args) as rt, open_notes(args, rt) as (store, server):
        data = (remote_read(server, OWNER_STATUS) if server is not None
                else status_data(local_store(store), rt.agent_id, _lcm_reports(rt), rt))
    emit(args, data, lambda: kv_text(data))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..filemodes import fix_files, wide_files
    from ..remote import OWNER_DOCTOR

    with runtime(args) as rt:
        # before the stores open: what is found is what was there, not what this run created
        fixed = fix_files(rt) if args.fix else []
        wide = wide_files(rt)
        # lcm's own clean (`amem lcm doctor --clean --apply`), before the report so that it
        # names what is left. Here, not in the report: it works on the files whether or not a
        # server holds the stores (a young .tmp or one a writer holds is never taken).
        removed = (_lcm_call(rt, "doctor_clean", apply=True).get("removed_files", [])
                   if args.fix else None)
        with open_notes(args, rt) as (store, server):
            data = (remote_read(server, OWNER_DOCTOR + ("?clean=1" if args.clean else ""))
                    if server is not None
                    else doctor_data(local_store(store), _lcm_reports(rt), rt, args.clean,
                                     fix=args.fix))
    if removed is not None:
        data["lcm_leftovers_removed"] = removed
    if server is not None and args.fix:
        # The marks are the store's: a served store's nightly job repairs them.
        data["warnings"] = [*data.get("warnings", []), (
            "supersession marks were not repaired: the store is held by a running server, "
            "whose nightly job repairs them (or stop it and run `amem doctor --fix`)")]
        if data.get("memory", {}).get("untidy_tags"):  # the nightly job does not tidy tags
            data["warnings"].append(
                "tags were not tidied: the store is held by a running server; stop it and "
                "run `amem doctor --fix`")
    data["files"] = {"private": not wide, "wide": wide, "fixed": fixed}
    if wide:
        shown = ", ".join(f"{w['path']} ({w['mode']})" for w in wide[:10])
        data["warnings"] = [*data.get("warnings", []), (
            f"{len(wide)} files or directories of the stores are readable by other users: "
            f"{shown}{' ...' if len(wide) > 10 else ''}; `amem doctor --fix` makes them "
            "private (files 0600, directories 0700)")]
        data["ok"] = False
    emit(args, data, lambda: kv_text(data))
    return 0 if data["ok"] else 1


def status_data(store: MemoryStore, agent_id: str, lcm: LcmReport, rt: Runtime) -> dict[str, Any]:
    """``amem status`` of an open store (the server answers the CLI with the same)."""
    from ..reports import status_report

    return {"version": version(), **status_report(store, agent_id, lcm, _nightly_status(rt))}


def doctor_data(store: MemoryStore, lcm: LcmReport, rt: Runtime, clean: bool, *,
                fix: bool = False) -> dict[str, Any]:
    """``amem doctor`` of an open store (the server answers the CLI with the same)."""
    from ..reports import doctor_report

    return doctor_report(store, lcm, _nightly_status(rt), clean=clean, fix=fix)


def _lcm_reports(rt: Runtime) -> LcmReport:
    """lcm's reports from the runtime's store, or ``{"available": false, "reason": ...}`` when
    it cannot be opened (the memory half of status/doctor still has something to say)."""
    return functools.partial(_lcm_call, rt)


def _lcm_call(rt: Runtime, method: str, **options: bool) -> dict[str, Any]:
    """One of :func:`_lcm_reports`, ``options`` passed to the store's method."""
    from lcm.errors import SchemaTooNewError

    from ..reports import lcm_report

    try:
        store = rt.lcm
    except SchemaTooNewError as exc:  # sound, but newer than this code: not a repair
        return {"available": False, "reason": str(exc), "failed": True, "too_new": True}
    except Exception as exc:
        # not "off": the store is there and failed to open (a damaged file): doctor says so,
        # with the store's own advice apart when it has one (lcm.errors.StoreFileError)
        problem, advice = getattr(exc, "problem", str(exc)), getattr(exc, "advice", None)
        return {"available": False, "reason": problem, "failed": True,
                **({"advice": advice} if advice else {})}
    return lcm_report(store, method, **options)


def tool_descriptions(rt: Runtime) -> dict[str, str]:
    """Tool descriptions overridden by config (checked when the settings were loaded)."""
    return dict(rt.settings.descriptions)


def _nightly_status(rt: Runtime) -> dict[str, Any]:
    """The nightly job's last run (a failure shows here until a later run succeeds)."""
    from scheduler import last_run_status

    return last_run_status(rt.settings.amem.home, rt.settings.scheduler)


# ------------------------------------------------------------------------------ tools


def cmd_tools(args: argparse.Namespace) -> int:
    import json

    from ..export import estimate_tokens, export
    from ..facade import ToolFacade

    # the list `amem serve` would serve with this config: its descriptions, and in MCP's
    # format the very entries of its tools/list (titles, hints, output schemas)
    facade = ToolFacade(None, None, agent_id="default", lazy=args.lazy,
                        lcm_listed=not args.no_lcm, descriptions=tool_descriptions(runtime(args)))
    if args.format == "mcp":
        from ..mcp_server import mcp_tools

        exported = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for t in mcp_tools(facade)]
    else:
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
