"""The clock seam: the stores ask it for "now" so tests, replays and benchmarks can fix time.

One protocol for amem and lcm (they had one each, with different test clocks): ``now()``
returns a timezone-aware UTC datetime. :class:`ManualClock` is the test clock of both; it
refuses naive datetimes, because a naive time silently means "local" to some callers and
"UTC" to others, and a clock is where that mistake would spread from.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock", "ManualClock"]

#: where a ManualClock starts when not told: a fixed instant, so runs are reproducible
DEFAULT_START = datetime(2025, 1, 1, tzinfo=UTC)


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


def _aware(when: datetime | str, what: str) -> datetime:
    if isinstance(when, str):
        when = datetime.fromisoformat(when)
    if when.tzinfo is None:
        raise ValueError(f"{what} needs a timezone-aware time (add +00:00 for UTC), got {when.isoformat()}")
    return when.astimezone(UTC)


class ManualClock:
    """A clock that stands still until moved: for tests, replays and benchmarks.

    Args:
        start: a timezone-aware datetime or ISO-8601 text with an offset; default
            2025-01-01T00:00Z.
    """

    def __init__(self, start: datetime | str | None = None) -> None:
        self._now = DEFAULT_START if start is None else _aware(start, "ManualClock")

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float = 1.0) -> datetime:
        """Move forward by ``seconds`` and return the new time."""
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, when: datetime | str) -> None:
        """Jump to ``when`` (timezone-aware), forward or back."""
        self._now = _aware(when, "ManualClock.set")
