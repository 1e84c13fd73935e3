"""lcm: lossless conversation memory in SQLite — a summary DAG, compaction, assembly and recall."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amem.kernel.clock import Clock, ManualClock
from amem.kernel.lazy import lazy_exports
from amem.kernel.llm import TextLLM as SummaryLLM  # lcm's public name of the kernel's one-call LLM seam

if TYPE_CHECKING:
    from lcm.config import LcmConfig, load_config
    from lcm.errors import LcmError
    from lcm.models import (
        AssembledContext,
        CompactionResult,
        DoctorReport,
        ExpandQueryResult,
        ExpandResult,
        GrepResult,
        IngestResult,
        StatusReport,
    )
    from lcm.store import LcmStore

__all__ = [
    "LcmStore", "LcmConfig", "load_config", "LcmError", "SummaryLLM", "Clock", "ManualClock",
    "IngestResult", "CompactionResult", "AssembledContext", "GrepResult", "ExpandResult",
    "ExpandQueryResult", "StatusReport", "DoctorReport",
]  # fmt: skip

# The public names load on first use (PEP 562): importing any submodule (``lcm.config`` for
# the settings, ``lcm.pg.url`` for a URL test, ``lcm.normalize`` for the CLI's transcript
# reader) runs this file first, and eager imports here loaded the whole store (~100 ms of
# every ``amem`` command's start). The PostgreSQL engine loads when a URL names it
# (``LcmStore.__new__``).
__getattr__, __dir__ = lazy_exports(__name__, {
    "LcmStore": ".store",
    "LcmConfig": ".config",
    "load_config": ".config",
    "LcmError": ".errors",
    "IngestResult": ".models",
    "CompactionResult": ".models",
    "AssembledContext": ".models",
    "GrepResult": ".models",
    "ExpandResult": ".models",
    "ExpandQueryResult": ".models",
    "StatusReport": ".models",
    "DoctorReport": ".models",
}, __all__)

