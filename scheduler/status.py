"""What ``amem status`` and ``amem scheduler --status`` say of the nightly job.

Every time it shows is ISO 8601 with its UTC offset, in the zone the schedule follows (named
in ``timezone``): the record keeps UTC, and a status that showed ``next_run`` at
``02:30:00+00:00`` beside ``schedule: 02:30 Europe/Berlin`` read as two different times.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from apscheduler.triggers.base import BaseTrigger

from amem.config import AmemConfig
from amem.kernel.clock import SystemClock

from .config import SchedulerConfig, last_fire_time, next_fire_time
from .record import load_settled, lock_holder, process_identity, read_refused
from .slots import instant, is_refused, is_served

#: the record's fields that hold a time, shown in the schedule's zone
_TIMES = ("started_at", "finished_at", "slot", "at", "running_since")


def _overdue(cfg: SchedulerConfig, trigger: BaseTrigger, now: datetime, record: dict[str, Any],
             refused: dict[str, Any] | None) -> datetime | None:
    """The latest slot when no run (scheduled, caught up or by hand) started since it and
    its misfire grace is over; else None.

    A slot that a run served is not owed (on a fall-back night 02:30 happens twice: the run
    at the first serves the date and the second firing is skipped); nor is a slot refused
    because the run before it was still going (``slots.is_refused``): ``overdue`` says that
    nothing runs the job, and something was running it."""
    slot = last_fire_time(trigger, now)
    began = instant((record.get("last_run") or {}).get("started_at"))
    if slot is None or began is None:
        return None
    if is_served(record, slot, cfg.zone, now) or is_refused(refused, slot):
        return None
    late = (now - slot).total_seconds() > cfg.misfire_grace_seconds
    return slot if late and began < slot else None


def _in_zone(value: Any, zone: tzinfo) -> Any:
    """``value`` in ``zone`` when it is an ISO time with an offset; else unchanged."""
    moment = instant(value)
    return moment.astimezone(zone).isoformat() if moment is not None else value


def _shown(entry: dict[str, Any], zone: tzinfo) -> dict[str, Any]:
    return {k: _in_zone(v, zone) if k in _TIMES else v for k, v in entry.items()}


def _schedule_changed(record: dict[str, Any], last: dict[str, Any], schedule: str) -> str | None:
    """What says the job follows another schedule than ``schedule`` (the configured one): a
    scheduler alive on this host that started with another, else a last run that followed
    another (a scheduler started before the change keeps its zone until restarted)."""
    running = record.get("scheduler") or {}
    followed = running.get("schedule")
    if (isinstance(followed, str) and followed != schedule
            and running.get("host") == socket.gethostname() and _alive(running)):
        return (f"the scheduler running since {running.get('since')} (pid {running['pid']}) "
                f"follows {followed}: restart it (`amem serve` or `amem scheduler`) to follow "
                f"{schedule}")
    followed = last.get("schedule")
    if isinstance(followed, str) and followed != schedule:
        return (f"the last run followed {followed}; a scheduler started before the change "
                f"keeps it until restarted")
    return None


def _alive(entry: dict[str, Any]) -> bool:
    """Whether the process ``entry`` (the record's ``scheduler``) names still runs: its pid is
    alive and, where the record holds its identity (``record.process_identity``), is still
    that process, not a later one given the same pid. A record without it (written before)
    is judged by the pid alone, as it was."""
    pid = entry.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: is there such a process (ours or not)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's: alive
    recorded = entry.get("process")
    now = process_identity(pid) if isinstance(recorded, str) else None
    return now is None or now == recorded


def last_run_status(home: str | Path, config: SchedulerConfig | AmemConfig | None = None,
                    *, now: datetime | None = None) -> dict[str, Any]:
    """What ``amem status`` shows: the last run, the last success, failures, the next run.

    ``state`` is ``never`` (no run yet), ``ok``, ``failed``, ``running`` (a process holds the
    lock now; ``running_since`` and ``running_for_s`` say how long), ``interrupted`` (a run
    started and its process died before finishing) or ``overdue``: the last run was fine or
    failed, but a later slot went unserved past the misfire grace (nothing runs the job: no
    ``amem serve``, no ``amem scheduler``); it said ``ok`` with the last run weeks old.
    ``overdue_slot`` names the slot. ``refused`` is a slot refused since the last run began
    because that run was still going. ``schedule_changed`` says when the last run followed
    another schedule than the one configured now (a running scheduler keeps the zone it was
    started with). Times are in ``timezone``, with their offset.
    """
    cfg = SchedulerConfig(home=Path(home)) if config is None else (
        config if isinstance(config, SchedulerConfig) else SchedulerConfig.from_amem(config))
    cfg = SchedulerConfig(Path(home), cfg.timezone, cfg.hour, cfg.minute, cfg.misfire_grace_hours)
    zone = cfg.zone
    record, problems = load_settled(cfg.record_path, cfg.runs_path, cfg.end_path)
    refused = read_refused(cfg.refused_path)
    last = record.get("last_run") or {}
    holder = lock_holder(cfg.lock_path)
    state = last.get("status") or "never"
    if state == "running" and holder is None:
        state = "interrupted"
    elif holder is not None:
        state = "running"
    moment = now or SystemClock().now()
    trigger = cfg.trigger()
    nxt = next_fire_time(trigger, moment)
    owed = _overdue(cfg, trigger, moment, record, refused) if state in ("ok", "failed") else None
    if owed is not None:
        state = "overdue"
    began = instant(last.get("started_at"))
    # the record's run is the one holding the lock only when it says it is running
    since = began if state == "running" and last.get("status") == "running" else None
    refused_slot = instant((refused or {}).get("slot"))
    recent_refusal = (refused is not None and refused_slot is not None
                      and (began is None or refused_slot > began))
    schedule = f"{cfg.hour:02d}:{cfg.minute:02d} {cfg.timezone}"
    changed = _schedule_changed(record, last, schedule)
    return {
        "state": state, "overdue_slot": owed.astimezone(zone).isoformat() if owed else None,
        "running_since": since.astimezone(zone).isoformat() if since else None,
        "running_for_s": round((moment - since).total_seconds()) if since else None,
        "refused": _shown(refused, zone) if recent_refusal and refused else None,
        "last_run": _shown(last, zone) or None,
        "last_success_at": _in_zone(record.get("last_success_at"), zone),
        "consecutive_failures": int(record.get("consecutive_failures") or 0),
        "last_error": last.get("error"), "running_pid": holder,
        "schedule": schedule, "timezone": cfg.timezone,
        "schedule_changed": changed,
        "next_run": nxt.astimezone(zone).isoformat() if nxt else None,
        "record": str(cfg.record_path),
        # a corrupt record is shown, not fatal; the next run (or `amem serve`) replaces it
        "record_problems": problems,
    }
