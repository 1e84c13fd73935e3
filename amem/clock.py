"""Moved to :mod:`amem.kernel.clock` (one clock for amem and lcm); this name stays for old importers."""

from amem.kernel.clock import Clock as Clock  # moved to amem.kernel.clock; importers are switched at integration
from amem.kernel.clock import ManualClock as FixedClock  # moved to amem.kernel.clock (as ManualClock); importers are switched at integration
from amem.kernel.clock import SystemClock as SystemClock  # moved to amem.kernel.clock; importers are switched at integration

__all__ = ["Clock", "FixedClock", "SystemClock"]
