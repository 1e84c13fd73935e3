"""``amem scheduler``: run the nightly job standalone, now (``--once``), or show its status."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from amem.kernel.errors import MemoryToolError

from .config import SchedulerConfig
from .job import run_nightly
from .service import last_run_status, run_forever

if TYPE_CHECKING:
    from tools.runtime import Runtime

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amem scheduler",
        description="Nightly maintenance for hosts without `amem serve`: consolidate every "
                    "agent's notes, optimise the engine, pay lcm's compaction debt. Runs daily at "
                    "schedule_hour:schedule_minute in schedule_timezone (default 02:30 UTC).")
    parser.add_argument("--once", action="store_true", help="run the job now and exit")
    parser.add_argument("--status", action="store_true",
                        help="show the last run (and the next one) and exit")
    parser.add_argument("--config", help="config file (TOML); default $AMEM_CONFIG")
    parser.add_argument("--home", help="data directory; default $AMEM_HOME")
    parser.add_argument("--timezone", help="IANA zone of the schedule, e.g. Europe/Berlin")
    parser.add_argument("--no-lcm", action="store_true", help="skip lcm maintenance")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def cli_main(argv: Sequence[str] | None = None, *, env: Mapping[str, str] | None = None) -> int:
    """Entry point of ``amem scheduler``; returns the exit code (0 ok, 1 job failed, 2 error)."""
    args = _parser().parse_args(list(argv) if argv is not None else None)
    env = dict(os.environ if env is None else env)
    if args.once and args.status:
        print("amem scheduler: --once and --status exclude each other", file=sys.stderr)
        return 2
    try:
        runtime = _runtime(args, env)
        cfg = runtime.settings.scheduler
        if args.status:
            _emit(args, last_run_status(cfg.home, cfg))
            return 0
        with runtime:
            return _run(args, runtime, cfg)
    except MemoryToolError as exc:  # amem's and lcm's errors alike (a bad [lcm] table too)
        print(f"amem scheduler: {exc}", file=sys.stderr)
        return 2


def _runtime(args: argparse.Namespace, env: Mapping[str, str]) -> Runtime:
    # The composition root lives in tools (imported here, when a command runs: ``import
    # scheduler`` stays light for the server that starts it in the background).
    from tools.runtime import Runtime

    overrides = {"home": args.home, "schedule_timezone": args.timezone}
    return Runtime.load(env, config_path=args.config, overrides=overrides)


def _run(args: argparse.Namespace, runtime: Runtime, cfg: SchedulerConfig) -> int:
    """The job, on the runtime's stores (which the caller closes, the conversations first)."""
    memory = runtime.memory  # StoreLockedError when a server owns the store
    lcm = None if args.no_lcm else runtime.lcm
    if args.once:
        report = run_nightly(memory, lcm, config=cfg, reason="manual")
        _emit(args, report.to_dict())
        return 0 if report.status == "ok" else 1
    previous = signal.signal(signal.SIGTERM, _exit_on_term)
    try:
        run_forever(memory, lcm, cfg)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def _exit_on_term(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _emit(args: argparse.Namespace, data: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return
    for key, value in data.items():
        if isinstance(value, dict):
            value = json.dumps(value, default=str)
        print(f"{key}: {value}")
