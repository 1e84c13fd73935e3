"""Moved to the shared kernel: :mod:`amem.kernel.clock` and :mod:`amem.kernel.llm` (``SummaryLLM`` is ``TextLLM``)."""

from amem.kernel.clock import Clock as Clock  # moved to amem.kernel.clock; importers are switched at integration
from amem.kernel.clock import ManualClock as ManualClock  # moved to amem.kernel.clock; importers are switched at integration
from amem.kernel.clock import SystemClock as SystemClock  # moved to amem.kernel.clock; importers are switched at integration
from amem.kernel.llm import DeadlineLLM as DeadlineLLM  # moved to amem.kernel.llm; importers are switched at integration
from amem.kernel.llm import TextLLM as SummaryLLM  # moved to amem.kernel.llm (as TextLLM); importers are switched at integration

__all__ = ["SummaryLLM", "DeadlineLLM", "Clock", "SystemClock", "ManualClock"]
