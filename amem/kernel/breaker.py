"""A circuit breaker: stop calling an endpoint that keeps failing, try again after a cooldown.

States: *closed* (calls flow; consecutive failures are counted), *open* (``threshold``
consecutive failures happened; every call is refused at once until ``cooldown`` seconds have
passed), *half-open* (the cooldown is over; calls are let through and the first result decides:
a success closes the circuit, a failure opens it again for another cooldown).

One breaker for amem's LLM client and lcm's summarizer (lcm had its own count inline). The
clock is injected: amem's client counts monotonic seconds, lcm counts its store clock's
seconds so a test's manual clock moves the cooldown.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta
from typing import Callable

from .errors import CircuitOpenError

__all__ = ["CircuitBreaker"]

log = logging.getLogger(__name__)


class CircuitBreaker:
    """Counts consecutive failures of one endpoint.

    Args:
        threshold: consecutive failures that open the circuit (>= 1).
        cooldown: seconds the circuit stays open (>= 0; 0 never refuses a call).
        clock: seconds, monotonic for a real endpoint (injectable so tests need not wait).
        name: what the error message and the log call the endpoint.
        refuse: builds the exception :meth:`check` raises from its message (amem's client
            raises its ``LLMError``); default :class:`CircuitOpenError`.
    """

    def __init__(self, threshold: int, cooldown: float, *, clock: Callable[[], float] | None = None,
                 name: str = "LLM endpoint",
                 refuse: Callable[[str], Exception] = CircuitOpenError) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1, got {threshold}")
        if cooldown < 0:
            raise ValueError(f"cooldown must be >= 0, got {cooldown}")
        self.threshold = threshold
        self.cooldown = cooldown
        self.name = name
        self._refuse = refuse
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"``."""
        with self._lock:
            return self._state_locked()

    @property
    def failures(self) -> int:
        """Consecutive failures counted so far."""
        return self._failures

    def _state_locked(self) -> str:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at < self.cooldown:
            return "open"
        return "half-open"

    def check(self) -> None:
        """Raise (``refuse``) when the circuit is open; return when a call may be made."""
        with self._lock:
            if self._state_locked() != "open":
                return
            assert self._opened_at is not None
            remaining = self.cooldown - (self._clock() - self._opened_at)
        # Wall time for the message only: humans read "until 14:02:31", the logic uses the clock.
        until = (datetime.now() + timedelta(seconds=remaining)).strftime("%H:%M:%S")
        raise self._refuse(
            f"circuit open for {self.name}: {self._failures} consecutive failures; "
            f"not calling it for another {remaining:.1f} s (until about {until} local time)"
        )

    def record_success(self) -> None:
        """A call worked: close the circuit and forget past failures."""
        with self._lock:
            if self._opened_at is not None:
                log.info("circuit for %s closed again after a successful call", self.name)
            self._failures = 0
            self._opened_at = None

    def trip(self, why: str) -> None:
        """Open the circuit now, whatever the count: for a failure that will not heal by retrying
        within the cooldown and costs every caller a long wait (a call that ran into its deadline)."""
        with self._lock:
            self._failures = max(self._failures + 1, self.threshold)
            self._opened_at = self._clock()
        log.warning("circuit for %s opened at once (%s); pausing calls for %.1f s", self.name, why, self.cooldown)

    def record_failure(self) -> None:
        """A call failed: count it, and open (or re-open) the circuit at the threshold."""
        with self._lock:
            self._failures += 1
            half_open = self._opened_at is not None
            if self._failures >= self.threshold or half_open:
                self._opened_at = self._clock()
                log.warning("circuit for %s opened after %d consecutive failures; pausing calls for %.1f s",
                            self.name, self._failures, self.cooldown)
