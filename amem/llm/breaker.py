"""Moved to :mod:`amem.kernel.breaker` (one circuit breaker for amem and lcm)."""

from amem.kernel.breaker import CircuitBreaker as CircuitBreaker  # moved to amem.kernel.breaker; importers are switched at integration

__all__ = ["CircuitBreaker"]
