"""Timestamps: one sortable ISO-8601 UTC text form for storage, and a parser for what callers send."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from lcm.errors import LcmValidationError

__all__ = ["iso", "parse_time", "display_time"]


def iso(dt: datetime) -> str:
    """``2025-01-01T00:00:00.000Z``: fixed width, so text order is time order."""
    if dt.tzinfo is None:
        raise LcmValidationError("timestamps must be timezone-aware", field="created_at")
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_time(value: Any, field: str) -> datetime:
    """Accept an aware datetime, an ISO-8601 string with an offset, or epoch seconds/milliseconds."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, bool):
        raise LcmValidationError(f"{field}: expected a time, got a boolean", field=field)
    elif isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value  # milliseconds are common in chat exports
        dt = datetime.fromtimestamp(seconds, UTC)
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip())
        except ValueError as exc:
            raise LcmValidationError(f"{field}: not an ISO-8601 time: {value!r}", field=field) from exc
    else:
        raise LcmValidationError(f"{field}: expected a time, got {type(value).__name__}", field=field)
    if dt.tzinfo is None:
        # refused, not guessed: a transcript's local times read as UTC would misplace every message
        raise LcmValidationError(f"{field}: time {value!r} has no timezone offset (add one: "
                                 f"{dt.isoformat()}Z for UTC, or +02:00 and the like)", field=field)
    return dt.astimezone(UTC)


def display_time(stored: str, tz: str) -> str:
    """A stored timestamp rendered in the configured zone, minute precision (for summaries)."""
    try:
        dt = datetime.fromisoformat(stored).astimezone(ZoneInfo(tz))
    except ValueError:
        return stored
    return dt.strftime("%Y-%m-%d %H:%M")
