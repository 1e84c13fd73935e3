"""SchedulerConfig: when the nightly job runs, where its record lives, how late it may start."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger

from amem.config import AmemConfig
from amem.errors import ConfigError

#: the one job id: re-adding it replaces the old job instead of scheduling a second one
JOB_ID = "amem-nightly"
CATCH_UP_ID = "amem-nightly-catch-up"
RECORD_FILE = "nightly.json"
LOCK_FILE = "nightly.lock"
#: how far back to look for the slot a run belongs to (a day plus a DST hour, with margin)
LOOKBACK = timedelta(hours=26)


@dataclass(frozen=True)
class SchedulerConfig:
    """Every tunable of the nightly job.

    Attributes:
        home: the data directory; the last-run record and the lock live here.
        timezone: IANA zone name of the wall clock the job follows (``Europe/Berlin``).
        hour, minute: the local time of the nightly run (02:30 by default).
        misfire_grace_hours: a run that could not start on time (host asleep, process busy)
            still starts this many hours late; a later wake-up triggers a catch-up instead.
    """

    home: Path
    timezone: str = "UTC"
    hour: int = 2
    minute: int = 30
    misfire_grace_hours: float = 6.0

    def __post_init__(self) -> None:
        if not isinstance(self.timezone, str) or not self.timezone:
            raise ConfigError("schedule_timezone must be an IANA zone name", key="schedule_timezone")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"schedule_timezone {self.timezone!r} is not a known IANA time zone "
                              f"(for example 'Europe/Berlin' or 'UTC')", key="schedule_timezone") from None
        if not (0 <= self.hour < 24 and 0 <= self.minute < 60):
            raise ConfigError(f"schedule time {self.hour:02d}:{self.minute:02d} is out of range",
                              key="schedule_hour")
        if not 0 < self.misfire_grace_hours <= 23:
            raise ConfigError("misfire_grace_hours must lie in (0, 23]", key="misfire_grace_hours")

    @classmethod
    def from_amem(cls, config: AmemConfig, **changes: Any) -> "SchedulerConfig":
        """The scheduler part of the note store's config (``schedule_*`` keys, ``home``)."""
        values: dict[str, Any] = {"home": Path(config.home), "timezone": config.schedule_timezone,
                                  "hour": config.schedule_hour, "minute": config.schedule_minute}
        values.update(changes)
        return cls(**values)

    @property
    def zone(self) -> tzinfo:
        return ZoneInfo(self.timezone)

    @property
    def misfire_grace_seconds(self) -> int:
        return int(self.misfire_grace_hours * 3600)

    def trigger(self) -> CronTrigger:
        return CronTrigger(hour=self.hour, minute=self.minute, timezone=self.zone)

    @property
    def record_path(self) -> Path:
        return Path(self.home) / RECORD_FILE

    @property
    def lock_path(self) -> Path:
        return Path(self.home) / LOCK_FILE


def as_scheduler_config(config: "SchedulerConfig | AmemConfig | None",
                        fallback: AmemConfig) -> SchedulerConfig:
    """Accept either config type (the server passes the note store's ``AmemConfig``)."""
    if config is None:
        return SchedulerConfig.from_amem(fallback)
    if isinstance(config, SchedulerConfig):
        return config
    if isinstance(config, AmemConfig):
        return SchedulerConfig.from_amem(config)
    raise TypeError(f"config must be a SchedulerConfig or an AmemConfig, not {type(config).__name__}")


def last_fire_time(trigger: BaseTrigger, now: datetime,
                   lookback: timedelta = LOOKBACK) -> datetime | None:
    """The latest time (UTC) at or before ``now`` the trigger fires; None if none in ``lookback``.

    Arithmetic runs in UTC: adding a second to a local time in the repeated hour of a fall-back
    night drops its ``fold`` and lands an hour earlier, and comparing two such local times for
    equality is always False (PEP 495).
    """
    cursor = (now - lookback).astimezone(timezone.utc)
    last = None
    for _ in range(10_000):  # a bound against a misbehaving trigger; a daily one needs three
        nxt = trigger.get_next_fire_time(None, cursor)
        if nxt is None:
            break
        nxt = nxt.astimezone(timezone.utc)
        if nxt > now or nxt < cursor:
            break
        last = nxt
        cursor = nxt + timedelta(seconds=1)
    return last


def next_fire_time(trigger: BaseTrigger, now: datetime) -> datetime | None:
    """The first time (UTC) after ``now`` the trigger fires."""
    nxt = trigger.get_next_fire_time(None, (now + timedelta(microseconds=1)).astimezone(timezone.utc))
    return nxt.astimezone(timezone.utc) if nxt is not None else None
