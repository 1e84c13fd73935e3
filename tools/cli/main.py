"""The ``amem`` parser and entry point: each command group registers its commands on it.

    main.py ──► notes.py   add, search, list, get, update, delete, import, export, ...
            ├─► serve.py   serve, status, doctor, tools
            ├─► scheduler.py  scheduler (the nightly job, standalone)
            ├─► keys.py    keys add/list/revoke (who may call serve --http)
            └─► lcm.py     lcm grep/describe/expand/status/doctor ─► lcm_host, lcm_embed, lcm_migrate
    (all of them) ──► common.py (options, the runtime) ──► output.py (printing, errors, logs)
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys
from typing import Callable, Mapping, NoReturn, Sequence, cast

from . import backup, keys, lcm, notes, scheduler, serve, ui
from .common import common_options, merge_common, version
from .output import (CODE_EXITS, EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERRUPTED, CliError,
                     report_error, setup_logging)

log = logging.getLogger(__name__)


class Parser(argparse.ArgumentParser):
    """argparse's parser, with the nearest spelling after an unknown command or choice."""

    def error(self, message: str) -> NoReturn:
        match = _INVALID_CHOICE.search(message)
        if match:
            choices = [c.strip().strip("'") for c in match.group(2).split(",")]
            message += did_you_mean(match.group(1), choices)
        super().error(message)


_INVALID_CHOICE = re.compile(r"invalid choice: '(.*?)' \(choose from (.*)\)")


def did_you_mean(word: str, known: Sequence[str]) -> str:
    """``"; did you mean search?"`` (the closest known word), or ``""`` when nothing is close."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    """The whole ``amem`` command tree (every command has ``--help``)."""
    common = common_options()
    parser = Parser(
        prog="amem", description="Memory for AI agents: notes, conversation recall, MCP tools.",
        epilog="Exit codes: 0 ok, 1 error, 2 usage/invalid input, 3 not found, 4 store busy.",
        parents=[common_options(before=True)])
    parser.add_argument("--version", action="version", version=f"amem {version()}")
    # the commands' parsers are Parsers too (argparse builds them with the parent's class)
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(dest="command", metavar="COMMAND", required=True))

    def cmd(name: str, func: Callable[[argparse.Namespace], int], help: str,
            into: argparse._SubParsersAction[argparse.ArgumentParser] = sub) -> argparse.ArgumentParser:
        p = into.add_parser(name, help=help, description=help, parents=[common])
        # the deepest command's parser: its options are what an unknown option is compared with
        p.set_defaults(func=func, command_parser=p)
        return p

    notes.register(cmd, sub)
    backup.register(cmd, sub)
    serve.register(cmd, sub)
    scheduler.register(cmd, sub)
    lcm.register(cmd, sub)
    keys.register(cmd, sub)
    ui.register(cmd, sub)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The command line as a namespace, or SystemExit (0 for --help, 2 for a usage error).

    An argument the command does not take is refused by the command's own parser (its usage
    printed), with the nearest of its options: ``--limt`` -> ``did you mean --limit?``.
    """
    args, extra = parser.parse_known_args(argv)
    if extra:
        command: argparse.ArgumentParser = args.command_parser
        message = "unrecognized arguments: " + " ".join(extra)
        known = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
        for word in extra:
            if word.startswith("--"):
                message += did_you_mean(word.split("=", 1)[0], known)
                break
        command.error(message)
    return merge_common(args)


def main(argv: Sequence[str] | None = None, *, env: Mapping[str, str] | None = None) -> int:
    """Run one ``amem`` command; returns the exit code (the console script exits with it).

    Run as the process itself (``env`` not given: the console script, ``python -m``), it sets
    the umask to 0o077, a second line of defence behind the owner-only modes the stores give
    every file they create (``amem.kernel.files``): files a dependency creates (the embedded
    engine's segments) are private from their first moment too. A caller that passes ``env``
    (tests, an embedding program) keeps its own umask, and gets its root logger back as it was
    when the command returns.
    """
    if env is None:
        os.umask(0o077)
    environ = dict(os.environ if env is None else env)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parse(parser, argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    args.env = environ
    restore_logging = setup_logging(args.verbose, environ)
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
        return report_error(args, err)
    except Exception as exc:
        return report_error(args, as_cli_error(exc))
    finally:
        if env is not None:  # the caller's process goes on: leave its logging as it was
            restore_logging()


def as_cli_error(exc: Exception) -> CliError:
    """Any failure as the CLI reports it: our errors keep their code (and its exit code)."""
    from amem.kernel.errors import MemoryToolError

    from ..errors import ToolError

    code = getattr(exc, "code", None)
    if isinstance(code, str) and isinstance(exc, (MemoryToolError, ToolError)):
        return CliError(str(exc), code=code, exit_code=CODE_EXITS.get(code, EXIT_ERROR),
                        field=getattr(exc, "field", None))
    if isinstance(exc, OSError):
        return CliError(str(exc), code="os_error")
    # The traceback is for whoever asked for it (-vv); by default the one-line error says how.
    log.debug("unexpected failure", exc_info=exc)
    return CliError(f"unexpected {type(exc).__name__}: {exc} (run with -vv for the traceback)",
                    code="internal")


def console_main() -> None:  # pragma: no cover - the console script wrapper
    sys.exit(main())
