"""The nightly job: consolidate every agent, optimise the engine, pay lcm's debts; record it.

Each step runs even if an earlier one failed (a failed consolidation must not keep the engine
from being optimised); a failed step is logged with its traceback, recorded with its error,
and makes the run ``failed``. Nothing retries at once: the next night's run is the retry.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Literal, Protocol

from apscheduler.triggers.base import BaseTrigger

from amem.kernel.clock import Clock, SystemClock
from amem.config import AmemConfig

from .config import SchedulerConfig, as_scheduler_config, last_fire_time
from .endnote import EndNote
from .record import WRITE_ERRORS, RunLock, append_run, read_record, write_record, write_refused
from .slots import is_served

log = logging.getLogger(__name__)

#: why a run happens: the cron trigger, a catch-up for a missed slot, or a person (``--once``)
Reason = Literal["scheduled", "catch-up", "manual"]


class NoteStore(Protocol):
    """What the job needs of ``amem.MemoryStore``."""

    config: AmemConfig

    def consolidate(self, *, agent_id: str | None = None, all_agents: bool = False,
                    progress: Any = None) -> Any: ...

    def optimize(self) -> None: ...


class ConversationStore(Protocol):
    """What the job needs of ``lcm.LcmStore``."""

    def maintenance(self) -> Any: ...


@dataclass
class StepResult:
    status: Literal["ok", "failed", "skipped"]
    duration: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class NightlyReport:
    """What one call of the job did (``status == "skipped"`` says why in ``skipped_because``)."""

    status: Literal["ok", "failed", "skipped"]
    reason: str
    slot: str | None = None
    slot_date: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration: float = 0.0
    steps: dict[str, StepResult] = field(default_factory=dict)
    skipped_because: str | None = None
    #: the pid running the job when this call was skipped for it (None: not skipped for that)
    held_by: int | None = None
    #: what went wrong beside the steps (the record could not be written at the end)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["duration"] = round(self.duration, 3)
        for step in out["steps"].values():
            step["duration"] = round(step["duration"], 3)
        return out


def run_nightly(memory_store: NoteStore, lcm_store: ConversationStore | None = None, *,
                config: SchedulerConfig | AmemConfig | None = None, reason: Reason = "manual",
                clock: Clock | None = None, trigger: BaseTrigger | None = None) -> NightlyReport:
    """Run the nightly job now, unless another process is running it or its slot is done.

    Args:
        memory_store: the note store (every agent in it is consolidated).
        lcm_store: the conversation store, when one is configured.
        config: scheduler settings (an ``AmemConfig`` is converted); default from the store.
        reason: ``"scheduled"`` and ``"catch-up"`` runs belong to the slot of the trigger's
            latest fire time and are skipped when that local date was already served;
            ``"manual"`` always runs (still never concurrently).
        clock: the time source (tests fix it).
        trigger: the trigger whose slots count (default: the configured daily cron).
    """
    cfg = as_scheduler_config(config, memory_store.config)
    clock = clock or SystemClock()
    trigger = trigger or cfg.trigger()
    lock = RunLock(cfg.lock_path)
    if not lock.acquire():
        why = f"another process (pid {lock.holder_pid}) is running the nightly job"
        log.info("nightly job skipped: %s", why)
        return NightlyReport("skipped", reason, skipped_because=why, held_by=lock.holder_pid or -1)
    try:
        return _run_locked(memory_store, lcm_store, cfg, reason, clock, trigger)
    finally:
        lock.release()


def served(cfg: SchedulerConfig, trigger: BaseTrigger, now: datetime,
           record: dict[str, Any] | None = None,
           reason: Reason = "scheduled") -> NightlyReport | None:
    """The skip report of a scheduled (or catch-up) run at ``now`` whose slot's local date was
    already served (by this process, another scheduler or ``amem serve``), else None."""
    record = read_record(cfg.record_path, cfg.runs_path, cfg.end_path) if record is None else record
    slot = last_fire_time(trigger, now) or now
    slot_date = slot.astimezone(cfg.zone).date().isoformat()
    if not is_served(record, slot, cfg.zone, now):
        return None
    done = record.get("last_slot") or {}
    why = f"the nightly job already ran for {slot_date} ({done.get('status')})"
    return NightlyReport("skipped", reason, slot=slot.isoformat(), slot_date=slot_date,
                         skipped_because=why)


def record_refused(cfg: SchedulerConfig, reason: Reason, held_by: int | None, *,
                   clock: Clock | None = None, trigger: BaseTrigger | None = None,
                   slot: datetime | None = None) -> NightlyReport:
    """Record that ``slot`` (default: the trigger's latest) was refused because a run is still
    under way (``held_by``: its pid, when known), and return the skip report.

    A run can outlast a day (a huge store, an LLM that hangs): the next slot is not started
    over it (two consolidations of one store at once), and it was refused in silence (a
    warning in APScheduler's log) while ``amem status`` said ``overdue`` the next morning.
    The run under way holds the lock and rewrites ``nightly.json`` when it finishes, so the
    refusal goes to a file of its own (``nightly_refused.json``): written into the record
    without the lock, one of the two writes could drop the other's.
    """
    clock = clock or SystemClock()
    trigger = trigger or cfg.trigger()
    now = clock.now()
    slot = (slot or last_fire_time(trigger, now) or now).astimezone(timezone.utc)
    slot_date = slot.astimezone(cfg.zone).date().isoformat()
    running = read_record(cfg.record_path).get("last_run") or {}
    since = running.get("started_at") if running.get("status") == "running" else None
    pid = held_by if held_by and held_by > 0 else None
    why = (f"the run under way (pid {pid or '?'}{f', since {since}' if since else ''}) "
           f"had not finished at the slot of {slot_date}")
    try:
        write_refused(cfg.refused_path, {
            "slot": slot.isoformat(), "slot_date": slot_date, "at": now.isoformat(),
            "reason": reason, "held_by": pid, "running_since": since})
    except WRITE_ERRORS as exc:  # the scheduler thread must go on; the log still says it
        log.warning("the refusal could not be recorded in %s: %s", cfg.refused_path, exc)
    log.warning("nightly run of %s refused: %s", slot_date, why)
    return NightlyReport("skipped", reason, slot=slot.isoformat(), slot_date=slot_date,
                         skipped_because=why, held_by=held_by or -1)


def _begin(cfg: SchedulerConfig, record: dict[str, Any], reason: Reason, now: datetime,
           trigger: BaseTrigger, note: EndNote) -> NightlyReport:
    """Mark a run as started in ``record`` (written to disk): its slot, pid and host; then
    reserve its end ``note`` while the disk takes writes (``scheduler.endnote``)."""
    slot: datetime | None = None
    slot_date: str | None = None
    if reason != "manual":
        slot = last_fire_time(trigger, now) or now
        slot_date = slot.astimezone(cfg.zone).date().isoformat()
    report = NightlyReport("ok", reason, slot=slot.isoformat() if slot else None,
                           slot_date=slot_date, started_at=now.isoformat())
    running = {"status": "running", "reason": reason, "slot": report.slot, "slot_date": slot_date,
               "started_at": report.started_at, "pid": os.getpid(), "host": socket.gethostname(),
               # the zone this run followed: `amem status` says when the configured one differs
               "schedule": f"{cfg.hour:02d}:{cfg.minute:02d} {cfg.timezone}"}
    record["last_run"] = running
    if slot_date is not None:
        record["last_slot"] = {"slot": report.slot, "date": slot_date, "status": "running"}
    record.setdefault("first_seen", now.isoformat())
    write_record(cfg.record_path, record)
    note.reserve(now.isoformat())
    return report


def record_not_started(cfg: SchedulerConfig, reason: Reason, error: str, *,
                       clock: Clock | None = None,
                       trigger: BaseTrigger | None = None) -> NightlyReport:
    """Record a run that could not start (its stores would not open: busy for half an hour,
    damaged, misconfigured) as a failed run, so that ``amem status`` says it failed and why;
    it logged an error and ``amem status`` said ``ok`` with yesterday's run."""
    clock = clock or SystemClock()
    trigger = trigger or cfg.trigger()
    lock = RunLock(cfg.lock_path)
    if not lock.acquire():  # the store was busy with a nightly run: not a failure
        why = f"another process (pid {lock.holder_pid}) is running the nightly job"
        return NightlyReport("skipped", reason, skipped_because=why, held_by=lock.holder_pid or -1)
    note = EndNote(cfg.end_path)
    try:
        record = read_record(cfg.record_path, cfg.runs_path, cfg.end_path)
        report = _begin(cfg, record, reason, clock.now(), trigger, note)
        report.steps["open"] = StepResult("failed", error=error)
        report.status = "failed"
        report.finished_at = report.started_at
        _finish(cfg, record, report, ["open"], note)
        return report
    finally:
        note.close()
        lock.release()


def _run_locked(memory_store: NoteStore, lcm_store: ConversationStore | None,
                cfg: SchedulerConfig, reason: Reason, clock: Clock,
                trigger: BaseTrigger) -> NightlyReport:
    record = read_record(cfg.record_path, cfg.runs_path, cfg.end_path)
    now = clock.now()
    note = EndNote(cfg.end_path)
    try:
        return _run_recorded(memory_store, lcm_store, cfg, reason, clock, trigger, record, now, note)
    except _Unrecorded as exc:
        # Not run: a run the record cannot hold would be invisible to `amem status` (which
        # would say ok, then overdue) and would run again at every start (its slot never
        # served). The error reached the scheduler's log as a crash and `--once` as a bare
        # OSError; it is now a failed report that names the file.
        error = f"the nightly record {cfg.record_path} cannot be written ({exc.cause}): the job did not run"
        log.error("%s", error)
        report = NightlyReport("failed", reason, started_at=now.isoformat(),
                               finished_at=now.isoformat())
        report.steps["record"] = StepResult("failed", error=error)
        return report
    finally:
        note.close()


class _Unrecorded(Exception):
    """The start of a run could not be written to the record (``cause``: the write's error)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _run_recorded(memory_store: NoteStore, lcm_store: ConversationStore | None,
                  cfg: SchedulerConfig, reason: Reason, clock: Clock, trigger: BaseTrigger,
                  record: dict[str, Any], now: datetime, note: EndNote) -> NightlyReport:
    if reason != "manual":
        skip = served(cfg, trigger, now, record, reason)
        if skip is not None:
            log.info("nightly job skipped: %s", skip.skipped_because)
            return skip
        done = record.get("last_slot") or {}
        if done.get("status") == "running":
            log.warning("the nightly run of %s (pid %s) did not finish; running it again",
                        done.get("date"), (record.get("last_run") or {}).get("pid"))
    try:
        report = _begin(cfg, record, reason, now, trigger, note)
    except WRITE_ERRORS as exc:
        raise _Unrecorded(exc) from exc
    slot_date = report.slot_date
    log.info("nightly job started (%s%s)", reason, f", slot {slot_date}" if slot_date else "")
    started = time.perf_counter()
    report.steps["consolidate"] = _step("consolidate", lambda: _summary(
        memory_store.consolidate(all_agents=True)))
    report.steps["optimize"] = _step("optimize", lambda: memory_store.optimize())
    if lcm_store is None:
        report.steps["lcm_maintenance"] = StepResult("skipped", summary={"why": "no lcm store"})
    else:
        report.steps["lcm_maintenance"] = _step("lcm_maintenance", lambda: _lcm(lcm_store))
    report.duration = time.perf_counter() - started
    report.finished_at = clock.now().isoformat()
    failed = [name for name, step in report.steps.items() if step.status == "failed"]
    report.status = "failed" if failed else "ok"
    _finish(cfg, record, report, failed, note)
    return report


def _step(name: str, body: Callable[[], Any]) -> StepResult:
    started = time.perf_counter()
    try:
        summary = body()
    except Exception as exc:  # a step's failure is recorded; the next step still runs
        log.exception("nightly step %s failed", name)
        return StepResult("failed", time.perf_counter() - started,
                          error=f"{type(exc).__name__}: {exc}")
    result = StepResult("ok", time.perf_counter() - started,
                        summary=summary if isinstance(summary, dict) else {})
    if isinstance(summary, dict) and summary.get("failures"):
        result.status = "failed"
        result.error = f"{len(summary['failures'])} item(s) failed: {summary['failures']}"
        log.error("nightly step %s: %s", name, result.error)
    return result


#: merges and warnings a night's record lists by name (the counts hold them all)
LISTED = 100


def _summary(report: Any) -> dict[str, Any]:
    """The consolidation's counts, and which note went into which with its warnings: a record
    of counts alone left the owner no way to find what a night merged (``amem history``)."""
    data = report.to_dict() if hasattr(report, "to_dict") else {}
    keys = ("groups", "pairs", "merges", "links_rewritten", "pending_resolved", "llm_fallbacks",
            "vectors_refreshed", "links_settled", "links_completed", "superseded",
            "marks_released", "expired_deleted", "duration")
    out = {k: data[k] for k in keys if k in data}
    merged = [{"note": loser, "into": survivor, "agent_id": agent}
              for agent, part in (getattr(report, "agents", None) or {}).items()
              for loser, survivor in getattr(part, "merged", ())]
    out["merged"] = merged[:LISTED]
    warnings = list(data.get("warnings") or [])
    out["warnings"] = warnings[:LISTED]
    if len(merged) > LISTED or len(warnings) > LISTED:
        out["not_listed"] = {"merged": max(0, len(merged) - LISTED),
                             "warnings": max(0, len(warnings) - LISTED)}
    return out


def _lcm(store: ConversationStore) -> dict[str, Any]:
    result = store.maintenance()
    data = result.to_dict() if hasattr(result, "to_dict") else {}
    return {"compactions": len(data.get("compactions") or []),
            "failures": data.get("failures") or {}, "retention": data.get("retention"),
            "embedding": data.get("embedding")}  # semantic recall's debt paid tonight (or None)


def _finish(cfg: SchedulerConfig, record: dict[str, Any], report: NightlyReport,
            failed: list[str], note: EndNote) -> None:
    record["last_run"] = {**record["last_run"], **{
        "status": report.status, "finished_at": report.finished_at,
        "duration": round(report.duration, 3),
        "steps": {k: {"status": v.status, "error": v.error, "summary": v.summary}
                  for k, v in report.steps.items()},
        "error": "; ".join(f"{n}: {report.steps[n].error}" for n in failed) or None}}
    if report.slot_date is not None:
        record["last_slot"] = {"slot": report.slot, "date": report.slot_date,
                               "status": report.status}
    if report.status == "ok":
        record["last_success_at"] = report.finished_at
        record["consecutive_failures"] = 0
    else:
        record["consecutive_failures"] = int(record.get("consecutive_failures") or 0) + 1
        log.error("nightly job failed (%s); it runs again next night", record["last_run"]["error"])
    # The end note first: written in place, it needs no space (``scheduler.endnote``).
    unkept = note.write(run_entry(report))
    if unkept is not None:
        log.warning("the nightly end note %s %s", cfg.end_path, unkept)
    try:
        write_record(cfg.record_path, record)
    except WRITE_ERRORS as exc:
        # The job is done: raising here lost its report, left the record saying `running`
        # (`amem status`: interrupted) and the next start ran the night again. The history
        # line and the end note carry the run (``record.load_settled`` reads them back).
        lost: Exception | None = exc
    else:
        lost = None
    try:
        append_run(cfg.runs_path, run_entry(report))
    except WRITE_ERRORS as exc:  # the history is for the picture, unless the record was lost too
        log.warning("the nightly run history %s could not be written: %s", cfg.runs_path, exc)
        if lost is not None:
            unwritten = (f"the nightly record {cfg.record_path} could not be written at the end of the run "
                         f"({lost}), nor the run history {cfg.runs_path} ({exc})")
            report.warnings.append(
                f"{unwritten}: the run counts as done from its end note {cfg.end_path}, and `amem status` "
                "and `amem doctor` say the record is behind until a run can write it" if unkept is None else
                f"{unwritten}, and its end note {cfg.end_path} {unkept}: the run is done, but only this "
                "report and the log say so; the next start of the scheduler runs this night again")
    else:
        if lost is not None:
            report.warnings.append(
                f"the nightly record {cfg.record_path} could not be written at the end of the run ({lost}): "
                f"the run counts as done from its line in the run history {cfg.runs_path}, and "
                "`amem status` and `amem doctor` say the record is behind until a run can write it")
    for warning in report.warnings:
        log.error("%s", warning)
    log.info("nightly job %s in %.1fs", report.status, report.duration)


def run_entry(report: NightlyReport) -> dict[str, Any]:
    """One line of the run history: when, how it went, and the counts worth plotting."""
    merge = report.steps.get("consolidate")
    lcm = report.steps.get("lcm_maintenance")
    ms = merge.summary if merge else {}
    ls = lcm.summary if lcm else {}
    embedding = ls.get("embedding") if isinstance(ls.get("embedding"), dict) else {}
    # when it started and its slot: the run is known by them where the record could not be
    # written at its end (``record.load_settled``)
    return {"started_at": report.started_at, "slot": report.slot, "slot_date": report.slot_date,
            "finished_at": report.finished_at, "status": report.status, "reason": report.reason,
            "duration": round(report.duration, 3), "merges": int(ms.get("merges") or 0),
            "superseded": int(ms.get("superseded") or 0),
            "expired_deleted": int(ms.get("expired_deleted") or 0),
            "compactions": int(ls.get("compactions") or 0),
            "embedding_debt": int((embedding or {}).get("pending") or 0)}
