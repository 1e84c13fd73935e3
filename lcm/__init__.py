"""lcm: lossless conversation memory in SQLite — a summary DAG, compaction, assembly and recall."""

from __future__ import annotations

from amem.kernel.clock import Clock, ManualClock
from amem.kernel.llm import TextLLM as SummaryLLM  # lcm's public name of the kernel's one-call LLM seam
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
from lcm.pg import store as _pg_store  # noqa: F401  # registers the PostgreSQL engine (LcmStore("postgresql://..."))

__all__ = [
    "LcmStore", "LcmConfig", "load_config", "LcmError", "SummaryLLM", "Clock", "ManualClock",
    "IngestResult", "CompactionResult", "AssembledContext", "GrepResult", "ExpandResult",
    "ExpandQueryResult", "StatusReport", "DoctorReport",
]  # fmt: skip
