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

    from ..runtime import Runtime

    #: where a command group adds its commands (argparse's subparsers action)
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

#: ``cmd(name, func, help, into=subparsers)``: adds one command with the common options
Cmd = Callable[..., argparse.ArgumentParser]


def common_options() -> argparse.ArgumentParser:
    """The options every command takes (a parent parser)."""
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


@contextmanager
def open_memory(args: argparse.Namespace) -> Iterator[MemoryStore]:
    """The note store itself, closed at the end (commands that cannot go through a server)."""
    with runtime(args) as rt:
        yield rt.memory


def progress(args: argparse.Namespace, label: str) -> Progress:
    """A bar on stderr when it is a terminal, never with ``--quiet``."""
    return Progress(label, quiet=bool(getattr(args, "quiet", False)))


def positive(value: Any, flag: str) -> None:
    """``flag`` must be a positive number when given (a usage error otherwise)."""
    if value is not None and not value > 0:
        raise usage_error(f"{flag} must be a positive number; got {value}", flag.lstrip("-"))
