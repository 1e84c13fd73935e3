"""``amem scheduler``: the nightly job standalone, now (``--once``), or its last run (``--status``).

The job and its config are the ``scheduler`` package's; the command lives here with the others
because it opens the stores through the runtime (``tools.runtime``), which the scheduler
package must not import (``tools.settings`` imports the scheduler's config).
"""

from __future__ import annotations

import argparse
import signal
from types import FrameType
from typing import TYPE_CHECKING, Any

from .common import Cmd
from .output import EXIT_BUSY, EXIT_ERROR, EXIT_OK, CliError, emit, kv_text, usage_error

if TYPE_CHECKING:
    from amem.errors import StoreLockedError
    from scheduler import SchedulerConfig

    from ..runtime import Runtime
    from .common import Subparsers


#: how long ``--once`` waits for a busy store: long enough for a short command, not so long
#: that a person at the prompt wonders whether it hangs (a cron line can pass ``--wait 1800``)
ONCE_WAIT_S = 60.0


def register(cmd: Cmd, sub: Subparsers) -> None:
    """Add ``amem scheduler`` to the ``amem`` parser (called by ``tools.cli.main``)."""
    p = cmd("scheduler", cmd_scheduler,
            "nightly maintenance for hosts without `amem serve`: consolidate every agent's "
            "notes, optimise the engine, pay lcm's compaction debt; runs daily at "
            "schedule_hour:schedule_minute in schedule_timezone (default 02:30 UTC) until "
            "stopped, or once with --once")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--once", action="store_true", help="run the job now and exit")
    what.add_argument("--status", action="store_true",
                      help="show the last run (and the next one) and exit")
    p.add_argument("--timezone", help="IANA zone of the schedule, e.g. Europe/Berlin")
    p.add_argument("--no-lcm", action="store_true", help="skip lcm maintenance")
    p.add_argument("--wait", type=float, default=ONCE_WAIT_S, metavar="SECONDS",
                   help=f"with --once: how long to wait for a command that holds the store "
                   f"(an import, a consolidation) before giving up and recording the run as "
                   f"failed (default {ONCE_WAIT_S:g}; the daily scheduler waits 1800)")


def cmd_scheduler(args: argparse.Namespace) -> int:
    from scheduler import last_run_status

    if args.wait < 0:
        raise usage_error("--wait must be 0 or more seconds", "wait")
    rt = _runtime(args)
    cfg = rt.settings.scheduler
    if args.status:
        data = last_run_status(cfg.home, cfg)
        emit(args, data, lambda: kv_text(data))
        return EXIT_OK
    if not args.once:
        return _run_daily(args, rt, cfg)
    with rt:  # closes the conversations, then the notes
        return _run(args, rt, cfg)


def _runtime(args: argparse.Namespace) -> Runtime:
    from ..runtime import Runtime

    if args.timezone is not None and not args.timezone.strip():
        raise usage_error("--timezone must name an IANA zone, e.g. Europe/Berlin", "timezone")
    overrides = {"home": args.home, "embedder": args.embedder, "schedule_timezone": args.timezone}
    return Runtime.load(getattr(args, "env", None), config_path=args.config,
                        overrides=overrides, agent=args.agent)


def _run(args: argparse.Namespace, rt: Runtime, cfg: SchedulerConfig) -> int:
    """``--once``: the job now, on the stores opened for it."""
    from scheduler import run_nightly

    memory = _open_for_once(rt, cfg, args.wait)
    lcm = None if args.no_lcm else rt.lcm
    report = run_nightly(memory, lcm, config=cfg, reason="manual")
    data: dict[str, Any] = report.to_dict()
    emit(args, data, lambda: kv_text(data))
    return EXIT_OK if report.status == "ok" else EXIT_ERROR


def _run_daily(args: argparse.Namespace, rt: Runtime, cfg: SchedulerConfig) -> int:
    """Until stopped: the stores open for each run and close after, so the CLI can use them
    between runs (held from start to stop, every other command exited 4)."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    from scheduler import run_forever_opening

    from .output import setup_logging

    if not args.verbose and not args.env.get("AMEM_LOG_LEVEL"):
        # A service is read through its log: at WARNING it said nothing at all, not that it
        # started, when it runs next, nor that a run happened (as `amem serve` says them).
        setup_logging(1, args.env)
    with rt:  # opened once now, so a store a server owns is said at once (exit 4)
        _open_at_start(rt)
        if not args.no_lcm:
            rt.lcm

    @contextmanager
    def stores() -> Iterator[tuple[Any, Any]]:
        with _runtime(args) as fresh:
            yield fresh.memory, (None if args.no_lcm else fresh.lcm)

    # A service manager stops the foreground scheduler with SIGTERM: leave through the
    # context managers (a run's stores closed, lock released) as Ctrl-C does.
    previous = signal.signal(signal.SIGTERM, _exit_on_term)
    try:
        run_forever_opening(stores, cfg)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


def _open_for_once(rt: Runtime, cfg: SchedulerConfig, wait_s: float) -> Any:
    """The note store for ``--once``, waiting up to ``wait_s`` for a command that holds it.

    It exited 4 at once and recorded nothing: a cron line's run that met an import at 02:30
    was lost without a trace (``amem status`` said ``never``, or ``ok`` with the night before).
    A store still busy after the wait is recorded as a failed run, with who held it, so
    ``amem status`` and ``amem doctor`` say so; the next ``--once`` (or slot) is the retry.
    Two holders are not waited for: a server (which runs the job itself) and the nightly
    job's own run in another process (the job runs now; nothing failed)."""
    from amem.errors import StoreLockedError
    from scheduler.job import record_not_started
    from scheduler.record import lock_holder

    from .serve import open_waiting

    if _held_not_by_a_server(rt) is not None:
        running = lock_holder(cfg.lock_path)
        if running is not None:  # the nightly run of a scheduler: no use waiting a minute
            raise CliError(f"the nightly job is running now in another process (pid {running}); "
                           f"`amem scheduler --status` shows since when",
                           code="store_locked", exit_code=EXIT_BUSY) from None
    try:
        return open_waiting(rt, wait_s)
    except StoreLockedError as exc:
        holder = _holder(exc)
        report = record_not_started(cfg, "manual", f"the store stayed busy for {wait_s:g} s "
                                    f"(held by {holder})")
        if report.status == "skipped":  # the nightly lock is held: the job runs elsewhere now
            raise CliError(f"the nightly job is running now in another process "
                           f"({report.skipped_because}); `amem scheduler --status` shows it",
                           code="store_locked", exit_code=EXIT_BUSY) from None
        raise CliError(f"the store at {exc.path} stayed busy for {wait_s:g} s (held by {holder}); "
                       f"the run is recorded as failed (`amem status`): run `amem scheduler "
                       f"--once` again when it is done, or wait longer with --wait",
                       code="store_locked", exit_code=EXIT_BUSY) from None


def _holder(exc: StoreLockedError) -> str:
    from amem.backends._lock import process_command

    command = process_command(exc.holder_pid) if exc.holder_pid else None
    return f"pid {exc.holder_pid}" + (f": {command}" if command else "")


def _server_holds(exc: StoreLockedError) -> CliError | None:
    """The error to say when ``amem serve`` holds the store (``exc``), else None."""
    from amem.backends._lock import amem_subcommand, process_command

    command = process_command(exc.holder_pid) or ""
    if amem_subcommand(command) != "serve":
        return None
    why = ("which runs the nightly job itself: no `amem scheduler` is needed beside it "
           "(`amem scheduler --status` shows its runs)" if "--no-scheduler" not in command
           else "started with --no-scheduler, so nothing runs the nightly job: start it "
           "without --no-scheduler (a scheduler cannot open a store a server holds)")
    return CliError(f"the store at {exc.path} is held by a running server (pid "
                    f"{exc.holder_pid}: {command}), {why}",
                    code="store_locked", exit_code=EXIT_BUSY)


def _open_at_start(rt: Runtime) -> None:
    """Open the note store once at start. ``amem serve`` holding it runs the nightly job itself
    (unless ``--no-scheduler``): that is said at once (exit 4), where the message told the
    operator to run `amem serve` in the owning process. Another command holding it (an
    import, a second scheduler's own check at the same moment) is waited for, up to 15 s, as
    a starting server waits: the scheduler exited 4 at once, so of two started together one
    died of the other's brief check."""
    from .serve import open_waiting

    if _held_not_by_a_server(rt) is not None:
        open_waiting(rt)


def _held_not_by_a_server(rt: Runtime) -> StoreLockedError | None:
    """The note store opened: None; the lock's error when another command holds it. A server
    holding it is said at once (``_server_holds``): it runs the nightly job itself."""
    from amem.errors import StoreLockedError

    try:
        rt.memory
    except StoreLockedError as exc:
        server = _server_holds(exc)
        if server is not None:
            raise server from None
        return exc
    return None


def _exit_on_term(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
