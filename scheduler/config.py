"""SchedulerConfig: when the nightly job runs, where its record lives, how late it may start."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from amem.config import AmemConfig, amem_table
from amem.errors import ConfigError
from amem.kernel.settings import ARGUMENTS, Section, Unclaimed, read_toml, setting

if TYPE_CHECKING:  # APScheduler loads when a trigger is built: reading the settings needs none
    from apscheduler.triggers.base import BaseTrigger
    from apscheduler.triggers.cron import CronTrigger

#: the one job id: re-adding it replaces the old job instead of scheduling a second one
JOB_ID = "amem-nightly"
CATCH_UP_ID = "amem-nightly-catch-up"
RECORD_FILE = "nightly.json"
RUNS_FILE = "nightly_runs.jsonl"
LOCK_FILE = "nightly.lock"
REFUSED_FILE = "nightly_refused.json"
END_FILE = "nightly_end.json"
#: how far back to look for the slot a run belongs to (a day plus a DST hour, with margin)
LOOKBACK = timedelta(hours=26)


@dataclass(frozen=True)
class SchedulerConfig:
    """Every tunable of the nightly job.

    The keys share the note store's table (``[amem]`` or the file's top level) and its
    ``AMEM_`` namespace: ``schedule_timezone`` / ``AMEM_SCHEDULE_TIMEZONE`` and so on.

    Attributes:
        home: the data directory (the note store's ``home``); the last-run record and the lock
            live here.
        timezone: IANA zone name of the wall clock the job follows (``Europe/Berlin``).
        hour, minute: the local time of the nightly run (02:30 by default).
        misfire_grace_hours: a run that could not start on time (host asleep, process busy)
            still starts this many hours late; a later wake-up triggers a catch-up instead.
    """

    home: Path = setting(is_setting=False)
    timezone: str = setting("UTC", key="schedule_timezone", env="AMEM_SCHEDULE_TIMEZONE")
    hour: int = setting(2, key="schedule_hour", env="AMEM_SCHEDULE_HOUR", at_least=0, at_most=23)
    minute: int = setting(30, key="schedule_minute", env="AMEM_SCHEDULE_MINUTE", at_least=0, at_most=59)
    misfire_grace_hours: float = setting(6.0, is_setting=False)

    def __post_init__(self) -> None:
        SECTION.validate(self)  # types and the bounds above
        if not self.timezone:
            raise ConfigError("schedule_timezone must be an IANA zone name", key="schedule_timezone")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"schedule_timezone {self.timezone!r} is not a known IANA time zone "
                              f"(for example 'Europe/Berlin' or 'UTC')", key="schedule_timezone") from None
        if not 0 < self.misfire_grace_hours <= 23:
            raise ConfigError("misfire_grace_hours must lie in (0, 23]", key="misfire_grace_hours")

    @classmethod
    def from_amem(cls, config: AmemConfig, **changes: Any) -> "SchedulerConfig":
        """The default schedule in the note store's ``home``, with ``changes`` applied."""
        values: dict[str, Any] = {"home": Path(config.home)}
        values.update(changes)
        return cls(**values)

    @property
    def zone(self) -> tzinfo:
        return ZoneInfo(self.timezone)

    @property
    def misfire_grace_seconds(self) -> int:
        return int(self.misfire_grace_hours * 3600)

    def trigger(self) -> CronTrigger:
        from apscheduler.triggers.cron import CronTrigger

        return CronTrigger(hour=self.hour, minute=self.minute, timezone=self.zone)

    @property
    def record_path(self) -> Path:
        return Path(self.home) / RECORD_FILE

    @property
    def lock_path(self) -> Path:
        return Path(self.home) / LOCK_FILE

    @property
    def refused_path(self) -> Path:
        """The latest slot refused because a run was still under way (``record_refused``)."""
        return Path(self.home) / REFUSED_FILE

    @property
    def runs_path(self) -> Path:
        """The finished runs, one JSON line each (``scheduler.record.append_run``)."""
        return Path(self.home) / RUNS_FILE

    @property
    def end_path(self) -> Path:
        """The run's end, written in place where neither the record nor the history could be
        (``scheduler.endnote``)."""
        return Path(self.home) / END_FILE


#: the schedule's keys are read with the note store's rules (lenient: text flags are parsed)
SECTION = Section(SchedulerConfig, error=ConfigError, env_prefix="AMEM_SCHEDULE_", lenient=True)


def load_config(toml_path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None, *, home: str | os.PathLike[str],
                table: Mapping[str, Any] | None = None,
                unclaimed: list[Unclaimed] | None = None) -> SchedulerConfig:
    """The schedule from defaults < TOML (the note store's table) < ``AMEM_SCHEDULE_*`` < overrides.

    ``home`` is the note store's data directory. The file's other keys belong to the note
    store: they go to ``unclaimed`` when it is given (``tools.settings`` judges them), else
    they are skipped. ``table`` is the table already read; ``toml_path`` then names it.

    Raises:
        ConfigError: an invalid value, an unknown ``overrides`` key or ``AMEM_SCHEDULE_*``
            variable; ``.key`` names it.
    """
    tables: list[tuple[Mapping[str, Any], str]] = []
    if table is not None:
        tables.append((table, str(toml_path) if toml_path is not None else "[amem]"))
    elif toml_path is not None:
        tables.append((amem_table(read_toml(toml_path, ConfigError)), str(Path(toml_path).expanduser())))
    loaded = SECTION.load(tables=tables, env=env, overrides=overrides)
    for item in loaded.unclaimed:
        if item.source == ARGUMENTS or (item.is_env and unclaimed is None):
            raise SECTION.unknown(item)
        if unclaimed is not None:
            unclaimed.append(item)
    return SchedulerConfig(home=Path(home).expanduser(), **loaded.values)


def as_scheduler_config(config: "SchedulerConfig | AmemConfig | None",
                        fallback: AmemConfig) -> SchedulerConfig:
    """Accept either config type; a note store's ``AmemConfig`` (or None: ``fallback``'s) gives
    the default schedule in its ``home`` (the schedule's keys are ``load_config``'s)."""
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
