"""The seams lcm depends on: a SummaryLLM (optionally a DeadlineLLM) and a Clock, plus small real implementations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["SummaryLLM", "DeadlineLLM", "Clock", "SystemClock", "ManualClock"]


@runtime_checkable
class SummaryLLM(Protocol):
    """A chat completion endpoint reduced to one call. Any exception counts as failure."""

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        """Return the model's reply text for one system + user prompt."""
        ...


@runtime_checkable
class DeadlineLLM(Protocol):
    """A SummaryLLM that can also end one call at a caller's deadline (a tool's ``timeoutMs``).

    Optional: lcm uses it when the model offers it, so the HTTP request itself stops at the
    deadline instead of running on in the background after the caller was answered.
    """

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        """As :meth:`SummaryLLM.complete`."""
        ...

    def complete_within(self, system: str, user: str, *, max_tokens: int | None, seconds: float) -> str:
        """The reply, or an exception once ``seconds`` have passed (the request is then closed)."""
        ...


@runtime_checkable
class Clock(Protocol):
    """Wall-clock time as timezone-aware UTC datetimes."""

    def now(self) -> datetime:
        """The current instant, timezone-aware (UTC)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to: for tests, replays and benchmarks."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2025, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float = 1.0) -> datetime:
        """Move forward and return the new time."""
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, when: datetime) -> None:
        if when.tzinfo is None:
            raise ValueError("ManualClock.set needs a timezone-aware datetime")
        self._now = when.astimezone(UTC)
