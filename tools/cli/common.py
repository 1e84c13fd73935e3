"""What every ``amem`` command shares: the common options, the runtime they open, progress bars."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable

from ..progress import Progress
from .output import usage_error

if TYPE_CHECKING:
    from amem import MemoryStore
    from amem.errors import StoreLockedError

    from ..runtime import Runtime

    #: where a command group adds its commands (argparse's subparsers action)
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

#: ``cmd(name, func, help, into=subparsers)``: adds one command with the common options
Cmd = Callable[..., argparse.ArgumentParser]


#: the common options' values when a command line gives none (see ``common_options``)
COMMON_DEFAULTS: dict[str, Any] = {"config": None, "home": None, "agent": None, "embedder": None,
                                   "json": False, "verbose": 0, "quiet": False}
#: where the options given before the command word are kept until ``merge_common`` (argparse
#: copies a command's own values over the top level's, so they need names of their own)
BEFORE = "before_"


def common_options(before: bool = False) -> argparse.ArgumentParser:
    """The options every command takes (a parent parser), also accepted before the command.

    No option has a default here: argparse copies every value a subcommand's parser holds over
    what the level above parsed, so a default would erase ``amem lcm --home X grep``'s
    ``--home``. ``merge_common`` fills in ``COMMON_DEFAULTS`` after parsing. ``before``: the
    top-level copy, whose values go to ``before_*`` names.
    """
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("common options (also accepted before the command)")
    prefix = BEFORE if before else ""

    def add(*flags: str, **kw: Any) -> None:
        dest = prefix + flags[-1].lstrip("-")
        g.add_argument(*flags, dest=dest, default=argparse.SUPPRESS, **kw)

    add("--config", metavar="TOML", help="config file (default: $AMEM_CONFIG)")
    add("--home", metavar="DIR", help="data directory (default: $AMEM_HOME or XDG)")
    add("--agent", metavar="ID", help="act as this agent (default: $AMEM_AGENT or config)")
    add("--embedder", metavar="NAME", help="embedder preset (e.g. e5-small, hashing)")
    add("--json", action="store_true", help="machine-readable JSON output")
    add("-v", "--verbose", action="count", help="more logging on stderr")
    add("-q", "--quiet", action="store_true", help="no progress bars on stderr")
    return common


def merge_common(args: argparse.Namespace) -> argparse.Namespace:
    """The common options as the command sees them: given after the command word wins over
    before it (``-v`` counts add up), and a default for what neither gave."""
    for name, default in COMMON_DEFAULTS.items():
        before = vars(args).pop(BEFORE + name, None)
        after = getattr(args, name, None)
        if name == "verbose":
            value: Any = (before or 0) + (after or 0)
        else:
            value = after if after is not None else before if before is not None else default
        setattr(args, name, value)
    return args


def version() -> str:
    """The installed distribution's version (the source tree's when run uninstalled)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("amem")
    except PackageNotFoundError:
        from amem import __version__

        return str(__version__)


def runtime(args: argparse.Namespace) -> Runtime:
    """The command's runtime (nothing opened yet): its settings from ``--config``, ``--home``,
    ``--embedder`` and ``--agent`` over the environment the command runs in."""
    # Imported here: reading settings loads every section's config module, which ``amem
    # --help`` and ``--version`` do not need.
    from ..runtime import Runtime

    overrides = {"home": args.home, "embedder": args.embedder}
    return Runtime.load(getattr(args, "env", None), config_path=args.config,
                        overrides=overrides, agent=args.agent)


#: what to do instead of a command that needs the store itself while a server holds it
INSTEAD = {
    "import": "or add the notes one at a time through it (`amem add`, which is routed)",
    "export": "or page through the notes through it with `amem list --json` (routed; "
              "without vectors)",
    "consolidate": "or call the server's memory_consolidate tool, which does the same for "
                   "its agent",
    "reembed": "a rebuild needs every vector, so only the store's own process can do it",
}


@contextmanager
def open_memory(args: argparse.Namespace) -> Iterator[MemoryStore]:
    """The note store itself, closed at the end (commands that cannot go through a server).

    While ``amem serve`` holds the store, the error says that this command is not routed
    through it (unlike ``search`` and the other reads) and what to do instead.
    """
    from amem.errors import StoreLockedError

    with runtime(args) as rt:
        try:
            store = rt.memory
        except StoreLockedError as exc:
            raise not_routed(args.command, rt.settings.amem.home, exc) from None
        yield store


def not_routed(command: str, home: Any, locked: StoreLockedError) -> Exception:
    """The error for ``command`` when the store is locked: plain "store busy" unless the lock's
    holder is an ``amem serve`` of this data directory (its record in ``<home>/server.json``)."""
    from ..remote import find_server
    from .output import EXIT_BUSY, CliError

    # Nothing is sent to the server, and the lock's holder must be the recorded pid: naming it
    # needs no proof of the server (which a server still opening its stores cannot give yet).
    holder = getattr(locked, "holder_pid", None)
    record = find_server(home, holder, prove=False) if holder is not None else None
    if record is None:
        return locked
    where = (f"`amem serve --http` at {record.url}" if record.transport == "http"
             else "`amem serve` on stdio")
    return CliError(
        f"`amem {command}` is not routed through the running {where} (pid {record.pid}), which "
        f"holds the store: it needs the store itself. Stop the server (Ctrl-C, or kill -INT "
        f"{record.pid}), run `amem {command}`, then start the server again; "
        f"{INSTEAD.get(command, 'the read commands (search, list, get, status) are routed')}",
        code="store_locked", exit_code=EXIT_BUSY)


def progress(args: argparse.Namespace, label: str, unit: str = "note") -> Progress:
    """A bar on stderr when it is a terminal, never with ``--quiet``."""
    return Progress(label, quiet=bool(getattr(args, "quiet", False)), unit=unit)


def positive(value: Any, flag: str) -> None:
    """``flag`` must be a positive number when given (a usage error otherwise)."""
    if value is not None and not value > 0:
        raise usage_error(f"{flag} must be a positive number; got {value}", flag.lstrip("-"))
