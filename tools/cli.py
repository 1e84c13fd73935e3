"""``amem``: the command line, a thin layer over ``MemoryStore``, ``LcmStore`` and the tool facade.

Exit codes: 0 ok, 1 error, 2 usage or invalid input, 3 not found, 4 store busy (another
process owns the embedded store), 130 interrupted, 141 stdout closed by its reader
(``amem ... | head``). ``--json`` prints machine-readable output (errors too, as
``{"error": {...}}``). Logs and progress bars go to stderr; stdout carries results only (and is
the MCP wire in ``amem serve``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from contextlib import ExitStack
from typing import Any, Callable, Mapping, Sequence

from .progress import Progress

log = logging.getLogger(__name__)

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_BUSY, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
#: the reader of stdout went away (128 + SIGPIPE, as for any Unix filter)
EXIT_BROKEN_PIPE = 141

_CODE_EXITS = {"invalid_argument": EXIT_USAGE, "config_error": EXIT_USAGE,
               "regex_refused": EXIT_USAGE, "forbidden": EXIT_USAGE, "not_found": EXIT_NOT_FOUND,
               "store_locked": EXIT_BUSY}


class CliError(Exception):
    """A failure the CLI reports in one line and maps to an exit code."""

    def __init__(self, message: str, *, code: str = "error", exit_code: int = EXIT_ERROR,
                 field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exit_code
        self.field = field


# ------------------------------------------------------------------------------ output helpers


def emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str]) -> None:
    """Print ``data`` as JSON with ``--json``, else the human ``text``."""
    if getattr(args, "json", False):
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        print(text() if callable(text) else text)


def _width() -> int:
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def search_table(results: Sequence[Mapping[str, Any]]) -> str:
    """A readable table: rank, score, via, id, content (clipped to the terminal)."""
    if not results:
        return "no matches"
    ids = [str(r["id"]) for r in results]
    idw = min(max(len(i) for i in ids), 36)
    head = f"{'#':>2}  {'score':>7}  {'via':<5}  {'id':<{idw}}  content"
    room = _width() - len(head) + len("content")
    lines = [head, "-" * min(_width(), len(head) + room - len("content"))]
    for n, r in enumerate(results, 1):
        lines.append(f"{n:>2}  {float(r.get('rrf') or 0):>7.4f}  {r['via']:<5}  "
                     f"{_clip(str(r['id']), idw):<{idw}}  {_clip(str(r['content']), room)}")
    return "\n".join(lines)


def kv_text(data: Mapping[str, Any], indent: str = "") -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            lines.append(f"{indent}{key}:")
            lines.append(kv_text(value, indent + "  "))
        elif isinstance(value, list):
            shown = ", ".join(json.dumps(v, ensure_ascii=False, default=str)
                              if not isinstance(v, str) else v for v in value)
            lines.append(f"{indent}{key}: {shown}")
        else:
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ parser


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("common options")
    g.add_argument("--config", metavar="TOML", help="config file (default: $AMEM_CONFIG)")
    g.add_argument("--home", metavar="DIR", help="data directory (default: $AMEM_HOME or XDG)")
    g.add_argument("--agent", metavar="ID", help="act as this agent (default: $AMEM_AGENT or config)")
    g.add_argument("--embedder", metavar="NAME", help="embedder preset (e.g. e5-small, hashing)")
    g.add_argument("--json", action="store_true", help="machine-readable JSON output")
    g.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bars on stderr")
    return common


def _version() -> str:
    """The installed distribution's version (the source tree's when run uninstalled)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("amem")
    except PackageNotFoundError:
        from amem import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    """The whole ``amem`` command tree (every command has ``--help``)."""
    from . import cli_ops

    common = _common()
    parser = argparse.ArgumentParser(
        prog="amem", description="Memory for AI agents: notes, conversation recall, MCP tools.",
        epilog="Exit codes: 0 ok, 1 error, 2 usage/invalid input, 3 not found, 4 store busy.")
    parser.add_argument("--version", action="version", version=f"amem {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def cmd(name: str, func: Callable[[argparse.Namespace], int], help: str,
            into: argparse._SubParsersAction[argparse.ArgumentParser] = sub) -> argparse.ArgumentParser:
        p = into.add_parser(name, help=help, description=help, parents=[common])
        p.set_defaults(func=func)
        return p

    from .cli_server import add_server_option

    p = cmd("add", cmd_add, "store one note")
    add_server_option(p)
    p.add_argument("text", help="the note text ('-' reads stdin)")
    p.add_argument("--subject", action="append", default=[], help="who/what it is about (repeat)")
    p.add_argument("--no-enrich", action="store_true", help="fast path: no enrichment, no links")
    _note_field_options(p)

    p = cmd("search", cmd_search, "hybrid search over your notes")
    add_server_option(p)
    p.add_argument("query")
    p.add_argument("-n", "--limit", type=int, default=5, help="direct matches (default 5)")
    p.add_argument("--subject", help="only notes about this subject (plus notes about nobody)")
    p.add_argument("--topic", action="append", default=None, help="knowledge-note topic filter")
    p.add_argument("--history", action="store_true",
                   help="also show notes a newer note superseded (each after its successor)")
    p.add_argument("--since", metavar="ISO", help="only notes whose event time is at or after this")
    p.add_argument("--before", metavar="ISO", help="only notes whose event time is before this")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE",
                   help="only notes with this metadata value (repeat; a repeated key: any of)")

    p = cmd("list", cmd_list, "list your notes page by page")
    add_server_option(p)
    p.add_argument("-n", "--limit", type=int, default=20, help="notes per page (default 20)")
    p.add_argument("--offset", help="the next_offset printed by the previous page, or a number "
                   "of notes to skip")

    p = cmd("get", cmd_get, "show one note in full")
    add_server_option(p)
    p.add_argument("id")

    p = cmd("update", cmd_update, "edit one note in place (new text and/or subjects)")
    add_server_option(p)
    p.add_argument("id")
    p.add_argument("--text", help="the new text ('-' reads stdin)")
    p.add_argument("--subject", action="append", default=None,
                   help="the new subjects, replacing the old ones (repeat)")
    p.add_argument("--no-subjects", action="store_true", help="clear the note's subjects")

    p = cmd("delete", cmd_delete, "delete one note (soft delete), or --all of the agent's")
    add_server_option(p)
    p.add_argument("id", nargs="?", help="the note to delete")
    p.add_argument("--all", action="store_true",
                   help="erase every note of the agent for good (asks first on a terminal)")
    p.add_argument("--yes", action="store_true", help="with --all: do not ask (scripts)")

    p = cmd("import", cmd_import, "bulk import JSONL, Markdown or text (or an export)")
    p.add_argument("file", help="the file to import")
    p.add_argument("--format", choices=["jsonl", "text"], help="default: from the extension")
    p.add_argument("--no-enrich", action="store_true", help="fast path for bulk ingestion")
    p.add_argument("--batch", type=int, help="notes per embedding batch")
    p.add_argument("--from-export", action="store_true", help="the file is an `amem export`")
    p.add_argument("--skip-invalid", action="store_true",
                   help="import the good lines of a file with bad ones (default: the whole "
                        "file is checked first and a bad line imports nothing, exit 2)")

    p = cmd("export", cmd_export, "write every note (all agents) as JSON lines")
    p.add_argument("out", nargs="?", default="-", help="output file (default: stdout)")
    p.add_argument("--no-vectors", action="store_true", help="leave vectors out (re-embed on import)")

    p = cmd("consolidate", cmd_consolidate, "merge near-duplicates, resolve pending merges")
    p.add_argument("--all-agents", action="store_true", help="every agent, not just --agent")

    p = cmd("reembed", cmd_reembed, "rebuild every vector with another embedder")
    p.add_argument("--to", "--new-embedder", dest="new_embedder", required=True, metavar="NAME",
                   help="the embedder to rebuild with (then run with AMEM_EMBEDDER=NAME)")

    cli_ops.add_commands(cmd, sub)
    return parser


# ------------------------------------------------------------------------------ memory commands


def _note_field_options(p: argparse.ArgumentParser) -> None:
    """``amem add``'s event time, metadata and expiry (``amem.notefields``)."""
    p.add_argument("--event-time", metavar="ISO", help="when it happened (default: now)")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE",
                   help="a metadata label, stored as text (repeat)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--ttl", type=float, metavar="SECONDS", help="forget it after this long")
    when.add_argument("--expires-at", metavar="ISO", help="forget it at this time")


def _meta_option(pairs: list[str] | None) -> dict[str, Any] | None:
    """``--meta key=value`` options: one value per key, or a list for a repeated key."""
    from amem.notefields import parse_meta_args

    parsed = parse_meta_args(pairs)
    return None if parsed is None else {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}


def cmd_add(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    extra = {"event_time": args.event_time, "metadata": _meta_option(args.meta),
             "ttl": args.ttl, "expires_at": args.expires_at}
    extra = {k: v for k, v in extra.items() if v is not None}
    with _notes(args) as (store, server):
        if server is not None:
            if args.no_enrich:
                raise CliError("--no-enrich cannot go through the running server (its memory_add "
                               "always enriches); drop it, or stop the server",
                               code="invalid_argument", exit_code=EXIT_USAGE, field="no_enrich")
            wire = {"event_time": "eventTime", "expires_at": "expiresAt"}  # the tool's names
            result = remote_call(server, "memory_add",
                                 {"text": text, "subjects": args.subject,
                                  **{wire.get(k, k): v for k, v in extra.items()}})
        else:
            result = store.add(text, args.subject, enrich=not args.no_enrich, **extra).to_dict()
    emit(args, result, lambda: f"{result['status']} {result['id']}"
         + (f" (links: {', '.join(result['links'])})" if result.get("links") else ""))
    return EXIT_OK


def cmd_search(args: argparse.Namespace) -> int:
    narrow = {"since": args.since, "before": args.before, "metadata": _meta_option(args.meta)}
    with _notes(args) as (store, server):
        if server is not None:
            call = {"query": args.query, "limit": args.limit, "topicsFilter": args.topic,
                    "subject": args.subject, "includeSuperseded": args.history or None,
                    **narrow}
            hits = remote_call(server, "memory_search",
                               {k: v for k, v in call.items() if v is not None})["results"]
        else:
            hits = [h.to_dict() for h in store.search(args.query, limit=args.limit,
                                                      topics_filter=args.topic, subject=args.subject,
                                                      include_superseded=args.history, **narrow)]
    emit(args, {"results": hits}, lambda: search_table(hits))
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    with _notes(args) as (store, server):
        if server is not None:
            page = remote_page(server, args.limit, args.offset)
            total, nxt = page["count"], page["next_offset"]
            rows = [{"id": r["id"], "timestamp": r["timestamp"], "content": r["content"]}
                    for r in page["notes"]]
        else:
            notes, nxt = store.list(limit=args.limit, offset=args.offset)
            total = store.count()
            rows = [{"id": n.id, "timestamp": n.timestamp, "content": n.content} for n in notes]

    def text() -> str:
        room = _width() - 40
        lines = [f"{r['id'][:36]:<36}  {_clip(r['content'], room)}" for r in rows]
        lines.append(f"{total} notes" + (f"; next page: --offset {nxt}" if nxt else ""))
        return "\n".join(lines)

    emit(args, {"count": total, "notes": rows, "next_offset": nxt}, text)
    return EXIT_OK


def cmd_get(args: argparse.Namespace) -> int:
    from .memory_tools import note_view

    with _notes(args) as (store, server):  # the note as memory_get shows it, either way
        note = (remote_call(server, "memory_get", {"id": args.id}) if server is not None
                else note_view(store.get(args.id).to_payload()))
    emit(args, note, lambda: kv_text(note))
    return EXIT_OK


def cmd_update(args: argparse.Namespace) -> int:
    if args.no_subjects and args.subject:
        raise CliError("give --subject or --no-subjects, not both", code="invalid_argument",
                       exit_code=EXIT_USAGE, field="subjects")
    text = sys.stdin.read() if args.text == "-" else args.text
    subjects = [] if args.no_subjects else args.subject
    if text is None and subjects is None:
        raise CliError("nothing to update: give --text, --subject or --no-subjects",
                       code="invalid_argument", exit_code=EXIT_USAGE, field="text")
    call = {"id": args.id, "text": text, "subjects": subjects}
    with _notes(args) as (store, server):
        result = (remote_call(server, "memory_update",
                              {k: v for k, v in call.items() if v is not None})
                  if server is not None
                  else store.update(args.id, content=text, subjects=subjects).to_dict())
    emit(args, result, lambda: f"{result['status']} {result['id']}"
         + (f" ({', '.join(result['changed'])})" if result["changed"] else "")
         + (f"; supersedes {', '.join(result['supersedes'])}" if result["supersedes"] else "")
         + "".join(f"\nwarning: {w}" for w in result["warnings"]))
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    if args.all or args.id is None:
        return _delete_all(args)
    if args.yes:
        raise CliError("--yes only goes with --all", code="invalid_argument",
                       exit_code=EXIT_USAGE, field="yes")
    with _notes(args) as (store, server):
        data = (remote_call(server, "memory_delete", {"id": args.id}) if server is not None
                else {"id": store.delete(args.id).id, "deleted": True})
    emit(args, data, f"deleted {data['id']}")
    return EXIT_OK


def _delete_all(args: argparse.Namespace) -> int:
    """``amem delete --all``: the agent's whole memory, after a yes on a terminal."""
    if args.id is not None or not args.all:
        raise CliError("give one note id, or --all (not both)", code="invalid_argument",
                       exit_code=EXIT_USAGE, field="id")
    agent = _settings(args).agent_id
    if not args.yes:
        if not sys.stdin.isatty():  # a script or a pipe cannot have meant it without --yes
            raise CliError("delete --all erases every note of the agent for good: add --yes "
                           "to confirm when stdin is not a terminal", code="invalid_argument",
                           exit_code=EXIT_USAGE, field="yes")
        print(f"Erase every note of agent {agent!r} for good? Type 'yes' to confirm: ",
              end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing deleted", file=sys.stderr)
            return EXIT_ERROR
    with _notes(args) as (store, server):
        data = (remote_call(server, "memory_delete_all", {"confirm": True}) if server is not None
                else {"deleted": store.delete_all()})
    emit(args, {"agent": agent, **data}, f"deleted {data['deleted']} notes of agent {agent}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from amem.importer import import_file, load_export

    with _memory(args) as store, _progress(args, "import") as bar:
        if args.from_export:
            report = load_export(store, args.file, skip_invalid=args.skip_invalid, progress=bar)
        else:
            report = import_file(store, args.file, fmt=args.format, enrich=not args.no_enrich,
                                 batch=args.batch, progress=bar, skip_invalid=args.skip_invalid)
        # The process ends here, so a due index build runs now (in the foreground) instead of
        # leaving the imported points to brute-force search until the nightly job.
        index = store.index_build
        if index.due():
            print(f"building the search index ({index.points_since} points written since the "
                  "last build) ...", file=sys.stderr)
        built = index.maybe_build(background=False)
    data = report.to_dict()
    data["index_build"] = index.to_dict()
    emit(args, data, lambda: (
        f"read {data['read']}: created {data['created']}, deduplicated {data['deduplicated']}, "
        f"folded {data['folded']}, pending merge {data['pending_merge']}, skipped "
        f"{data['skipped']} ({data['notes_per_second']} notes/s)"
        + _supersede_line(data)
        + "".join(f"\n  {e}" for e in data["errors"][:20])
        + (f"\nindex build: {data['index_build']['state']} in {data['index_build']['seconds']} s"
           if built else "")))
    return EXIT_OK if not data["skipped"] else EXIT_ERROR


def _supersede_line(data: dict[str, Any]) -> str:
    """What the import did to older facts, in words (the --json report has the same counts)."""
    parts = [f"superseded {data['superseded']} older notes (judged: {data['supersede']})"]
    if data.get("supersede_deferred"):
        parts.append(f"{data['supersede_deferred']} left to the nightly sweep")
    if data.get("expired_replaced"):
        parts.append(f"replaced {data['expired_replaced']} expired notes")
    return "\n" + "; ".join(parts)


def cmd_export(args: argparse.Namespace) -> int:
    from amem.importer import export_store

    with _memory(args) as store, ExitStack() as stack:
        out = sys.stdout if args.out == "-" else stack.enter_context(
            open(args.out, "w", encoding="utf-8"))
        bar = stack.enter_context(_progress(args, "export"))
        count = export_store(store, out, with_vectors=not args.no_vectors, progress=bar)
    if args.out != "-":
        emit(args, {"path": args.out, "exported": count}, f"exported {count} notes to {args.out}")
    else:
        print(f"exported {count} notes", file=sys.stderr)
    return EXIT_OK


def cmd_consolidate(args: argparse.Namespace) -> int:
    with _memory(args) as store:
        with _progress(args, "consolidate") as bar:
            report = store.consolidate(all_agents=args.all_agents, progress=bar)
    data = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    emit(args, data, lambda: kv_text(data))
    return EXIT_OK


def cmd_reembed(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .reembed import reembed
    from .runtime import make_embedder

    settings = _settings(args)
    embedder = make_embedder(args.new_embedder, threads=settings.config.embed_threads,
                             cache_dir=Path(settings.config.home) / "models")
    with _progress(args, "reembed") as bar:
        report = reembed(settings.config, embedder, progress=bar)
    data = report.to_dict()
    emit(args, data, lambda: (
        f"rebuilt {data['notes']} notes: {data['old_embedder']} -> {data['new_embedder']} "
        f"in {data['seconds']} s\nopen the store with this embedder from now on "
        f"(AMEM_EMBEDDER={args.new_embedder})"))
    return EXIT_OK


# ------------------------------------------------------------------------------ plumbing


def _settings(args: argparse.Namespace) -> Any:
    from .runtime import load_settings

    overrides = {"home": args.home, "embedder": args.embedder}
    return load_settings(getattr(args, "env", None), config_path=args.config,
                         overrides=overrides, agent=args.agent)


def _progress(args: argparse.Namespace, label: str) -> Progress:
    """A bar on stderr when it is a terminal, never with ``--quiet``."""
    return Progress(label, quiet=bool(getattr(args, "quiet", False)))


def _memory(args: argparse.Namespace) -> Any:
    from .runtime import open_memory

    return open_memory(_settings(args))


def _notes(args: argparse.Namespace) -> Any:
    """``(store, None)``, or ``(None, server)`` when a running server holds the store or
    ``--server`` names one (``tools.cli_server``)."""
    from .cli_server import open_notes

    return open_notes(args, _settings(args))


def remote_call(server: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from .cli_server import remote_call as call

    return call(server, name, arguments)


def remote_page(server: Any, limit: int, offset: str | None) -> dict[str, Any]:
    from .cli_server import remote_page as page

    return page(server, limit, offset)


def setup_logging(verbose: int, env: Mapping[str, str]) -> None:
    """JSON lines on stderr (never stdout: it is the MCP wire in ``amem serve``)."""
    level_name = env.get("AMEM_LOG_LEVEL", "").upper()
    level = getattr(logging, level_name, None) if level_name else None
    if not isinstance(level, int):
        level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_amem", False)]:
        root.removeHandler(old)
    handler._amem = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def _report_error(args: argparse.Namespace | None, err: CliError) -> int:
    if args is not None and getattr(args, "json", False):
        print(json.dumps({"error": {"code": err.code, "message": str(err), "field": err.field}},
                         ensure_ascii=False))
    print(f"amem: error: {err}", file=sys.stderr)
    return err.exit_code


def main(argv: Sequence[str] | None = None, *, env: Mapping[str, str] | None = None) -> int:
    """Run one ``amem`` command; returns the exit code (the console script exits with it)."""
    environ = dict(os.environ if env is None else env)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["scheduler"] and not {"-h", "--help"} & set(argv[1:2]):
        # Every argument after the word belongs to the scheduler's own parser.
        from .cli_ops import run_scheduler

        setup_logging(0, environ)
        return run_scheduler(argv[1:], environ)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    args.env = environ
    setup_logging(args.verbose, environ)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("amem: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader left (`amem lcm status | head`): nothing is wrong and nothing more can be
        # said. Point stdout at /dev/null so the interpreter's last flush cannot fail again,
        # and exit as a process ended by SIGPIPE does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except CliError as err:
        return _report_error(args, err)
    except Exception as exc:
        return _report_error(args, _as_cli_error(exc))


def _as_cli_error(exc: Exception) -> CliError:
    from amem.kernel.errors import MemoryToolError

    from .errors import ToolError

    code = getattr(exc, "code", None)
    if isinstance(code, str) and isinstance(exc, (MemoryToolError, ToolError)):
        return CliError(str(exc), code=code, exit_code=_CODE_EXITS.get(code, EXIT_ERROR),
                        field=getattr(exc, "field", None))
    if isinstance(exc, OSError):
        return CliError(str(exc), code="os_error")
    # The traceback is for whoever asked for it (-vv); by default the one-line error says how.
    log.debug("unexpected failure", exc_info=exc)
    return CliError(f"unexpected {type(exc).__name__}: {exc} (run with -vv for the traceback)",
                    code="internal")


def console_main() -> None:  # pragma: no cover - the console script wrapper
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
