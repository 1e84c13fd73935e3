"""The nightly scheduler: consolidation and store maintenance at 02:30 local time (APScheduler 3)."""

from __future__ import annotations

from .cli import cli_main
from .config import SchedulerConfig
from .job import NightlyReport, run_nightly
from .service import SchedulerHandle, last_run_status, run_forever, start_background

__all__ = [
    "start_background", "run_nightly", "run_forever", "cli_main", "last_run_status",
    "SchedulerConfig", "SchedulerHandle", "NightlyReport",
]
