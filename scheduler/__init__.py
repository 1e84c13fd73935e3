"""The nightly scheduler: consolidation and store maintenance at 02:30 local time (APScheduler 3).

Its command, ``amem scheduler``, is ``tools.cli.scheduler``: this package never imports
``tools`` (whose settings import this package's config).
"""

from __future__ import annotations

from .config import SchedulerConfig
from .job import NightlyReport, run_nightly
from .service import SchedulerHandle, last_run_status, run_forever, run_forever_opening, start_background

__all__ = [
    "start_background", "run_nightly", "run_forever", "run_forever_opening", "last_run_status",
    "SchedulerConfig", "SchedulerHandle", "NightlyReport",
]
