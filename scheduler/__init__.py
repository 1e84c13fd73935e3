"""The nightly scheduler: consolidation and store maintenance at 02:30 local time (APScheduler 3).

Its command, ``amem scheduler``, is ``tools.cli.scheduler``: this package never imports
``tools`` (whose settings import this package's config).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amem.kernel.lazy import lazy_exports

if TYPE_CHECKING:
    from .config import SchedulerConfig
    from .job import NightlyReport, run_nightly
    from .service import SchedulerHandle, run_forever, run_forever_opening, start_background
    from .status import last_run_status

__all__ = [
    "start_background", "run_nightly", "run_forever", "run_forever_opening", "last_run_status",
    "SchedulerConfig", "SchedulerHandle", "NightlyReport",
]

# Loaded on first use (PEP 562): every ``amem`` command reads ``scheduler.config`` through the
# settings, and an eager import here loaded APScheduler (~70 ms of each command's start).
__getattr__, __dir__ = lazy_exports(__name__, {
    "SchedulerConfig": ".config",
    "NightlyReport": ".job",
    "run_nightly": ".job",
    "SchedulerHandle": ".service",
    "last_run_status": ".status",
    "run_forever": ".service",
    "run_forever_opening": ".service",
    "start_background": ".service",
}, __all__)
