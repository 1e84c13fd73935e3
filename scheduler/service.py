"""APScheduler wiring: the background scheduler of the server, the blocking one of the CLI.

Both schedule one job (fixed id, ``replace_existing``) on ``CronTrigger(hour, minute,
timezone)`` with ``coalesce=True`` (a backlog of missed firings runs once), ``max_instances=1``
and a misfire grace of hours. Two things APScheduler alone does not cover, because its job
store is in memory:

* a missed night while the process was down: at start, if the trigger's latest slot is later
  than the last served one (and later than the first time a scheduler ran here), a one-off
  catch-up run is added; the slot record makes it run once, however often the process starts;
* a wake-up after the grace time: APScheduler reports the firing as missed, and the same
  catch-up (again deduplicated by the slot record) runs instead;
* a host suspended across the slot: APScheduler waits for the next firing with a timeout on
  the monotonic clock, which stands still while the host sleeps (apscheduler#794), so the job
  ran as late as the host had slept. A waker thread makes it look at the wall clock every
  minute, so a host that slept through 02:30 runs the job within a minute of waking.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime

from apscheduler.events import (EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent,
                                JobSubmissionEvent)
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.base import BaseTrigger

from amem.kernel.clock import Clock, SystemClock
from amem.config import AmemConfig

from .config import (CATCH_UP_ID, JOB_ID, SchedulerConfig, as_scheduler_config, last_fire_time,
                     next_fire_time)
from .job import (ConversationStore, NightlyReport, NoteStore, Reason, record_not_started,
                  record_refused, run_nightly, served)
from .record import WRITE_ERRORS, RunLock, load_settled, process_identity, read_record, read_refused, write_record
from .slots import is_refused, is_served
from .status import last_run_status

__all__ = ["SchedulerHandle", "start_background", "run_forever", "run_forever_opening",
           "missed_slot", "last_run_status"]

log = logging.getLogger(__name__)


#: how often (seconds) the scheduler looks at the wall clock, however long it means to wait
WAKE_EVERY_S = 60.0
#: how often, and how far apart, a run tries again that finds the store busy or a run under way
OPEN_TRIES, OPEN_RETRY_S = 30, 60.0


def _keep_awake(scheduler: BaseScheduler, every_s: float, stop: threading.Event) -> None:
    """Wake ``scheduler`` every ``every_s`` until ``stop`` is set: its wait for the next
    firing counts monotonic time, which a suspended host does not (apscheduler#794)."""

    def wake() -> None:
        while not stop.wait(every_s):
            if scheduler.running:
                scheduler.wakeup()

    threading.Thread(target=wake, name="amem-nightly-waker", daemon=True).start()


class SchedulerHandle:
    """A running background scheduler: ``shutdown()`` stops it (waiting for a running job)."""

    def __init__(self, scheduler: BaseScheduler, runner: "_Runner") -> None:
        self.scheduler = scheduler
        self._runner = runner

    @property
    def reports(self) -> list[NightlyReport]:
        """Reports of the runs this scheduler made, oldest first."""
        return list(self._runner.reports)

    @property
    def next_run_time(self) -> datetime | None:
        job = self.scheduler.get_job(JOB_ID)
        return job.next_run_time if job is not None else None

    def shutdown(self, wait: bool = True) -> None:
        self._runner.stopping.set()  # the waker, and a run waiting for the store or a run
        if self.scheduler.running:
            self.scheduler.shutdown(wait=wait)


class _Runner:
    """The callable APScheduler runs; keeps the stores and the reports."""

    def __init__(self, memory_store: NoteStore, lcm_store: ConversationStore | None,
                 cfg: SchedulerConfig, clock: Clock, trigger: BaseTrigger, *,
                 retry_s: float = OPEN_RETRY_S) -> None:
        self.memory_store, self.lcm_store = memory_store, lcm_store
        self.cfg, self.clock, self.trigger = cfg, clock, trigger
        self.retry_s = retry_s
        self.reports: list[NightlyReport] = []
        #: set when the scheduler stops: the waker ends, a run waiting for a busy store or for
        #: the run under way stops waiting
        self.stopping = threading.Event()

    def __call__(self, reason: Reason) -> None:
        """One run. A scheduled run that finds another run under way (a catch-up started just
        before 02:30, a run past the next slot) waits for it and then serves its own slot: it
        was skipped, and that night went unserved (``overdue`` the next morning). A run still
        going after the wait (half an hour) has the slot refused, and recorded as such."""
        for attempt in range(1, OPEN_TRIES + 1):
            try:
                report = run_nightly(self.memory_store, self.lcm_store, config=self.cfg,
                                     reason=reason, clock=self.clock, trigger=self.trigger)
            except Exception:  # the scheduler thread must survive; the next night retries
                log.exception("the nightly job crashed")
                return
            if report.held_by is None or reason == "manual":
                self.reports.append(report)
                return
            if attempt == OPEN_TRIES:  # the run under way outlasted the wait: say so
                self.refuse(reason, report.held_by)
                return
            log.info("the nightly job waits for the run under way (pid %s); trying again in %.0f s",
                     report.held_by, self.retry_s)
            if self.stopping.wait(self.retry_s):
                self.reports.append(report)
                return

    def refuse(self, reason: Reason, held_by: int | None, slot: datetime | None = None) -> None:
        """Record ``slot`` (default: the one due now) as refused for the run under way
        (``record_refused``)."""
        try:
            self.reports.append(record_refused(self.cfg, reason, held_by, clock=self.clock,
                                               trigger=self.trigger, slot=slot))
        except Exception:  # the scheduler thread must survive; the log has the error
            log.exception("the refused nightly run could not be recorded")


def _configure(scheduler: BaseScheduler, runner: _Runner, *, catch_up: bool) -> None:
    cfg = runner.cfg
    scheduler.add_job(runner, trigger=runner.trigger, args=("scheduled",), id=JOB_ID,
                      name="amem nightly maintenance", replace_existing=True, coalesce=True,
                      max_instances=1, misfire_grace_time=cfg.misfire_grace_seconds)

    def on_missed(event: JobExecutionEvent) -> None:
        if event.job_id == JOB_ID:
            log.warning("the nightly run of %s was missed by more than the grace time; "
                        "catching up now", event.scheduled_run_time)
            _add_catch_up(scheduler, runner)

    def on_still_running(event: JobSubmissionEvent) -> None:
        # The slot came while this process's run of the last one is still going (a run past
        # a day): APScheduler refuses it (max_instances=1) and only logs a warning.
        if event.job_id == JOB_ID:
            times = event.scheduled_run_times
            runner.refuse("scheduled", os.getpid(), max(times) if times else None)

    scheduler.add_listener(on_missed, EVENT_JOB_MISSED)
    scheduler.add_listener(on_still_running, EVENT_JOB_MAX_INSTANCES)
    now = runner.clock.now()
    _note_start(cfg, now)
    if catch_up and missed_slot(cfg, runner.trigger, now) is not None:
        _add_catch_up(scheduler, runner)


def _add_catch_up(scheduler: BaseScheduler, runner: _Runner) -> None:
    scheduler.add_job(runner, trigger="date", args=("catch-up",), id=CATCH_UP_ID,
                      name="amem nightly catch-up", replace_existing=True, max_instances=1,
                      misfire_grace_time=runner.cfg.misfire_grace_seconds)


def _note_start(cfg: SchedulerConfig, now: datetime) -> None:
    """Remember when a scheduler first ran here (slots before it were never owed) and which
    schedule this one follows: ``schedule_timezone`` edited while it runs changes nothing
    until it restarts, and ``amem status`` (which reads the edited file) showed the new zone's
    next run as if it would happen."""
    lock = RunLock(cfg.lock_path)
    if not lock.acquire():
        return  # a run is in progress; it writes first_seen itself
    try:
        record, problems = load_settled(cfg.record_path, cfg.runs_path, cfg.end_path)
        for problem in problems:
            log.warning("the nightly record %s: %s; replacing it", cfg.record_path, problem)
        record.setdefault("first_seen", now.isoformat())
        record["scheduler"] = {"schedule": f"{cfg.hour:02d}:{cfg.minute:02d} {cfg.timezone}",
                               "pid": os.getpid(), "host": socket.gethostname(),
                               "since": now.isoformat()}
        identity = process_identity(os.getpid())  # the pid alone is reused once this one stops
        if identity is not None:
            record["scheduler"]["process"] = identity
        try:
            write_record(cfg.record_path, record)
        except WRITE_ERRORS as exc:  # the server must start; each run says it again, failed
            log.error("the nightly record %s cannot be written: %s", cfg.record_path, exc)
    finally:
        lock.release()


def missed_slot(cfg: SchedulerConfig, trigger: BaseTrigger, now: datetime) -> datetime | None:
    """The latest slot that should have run and did not (None when nothing is owed)."""
    slot = last_fire_time(trigger, now)
    if slot is None:
        return None
    record = read_record(cfg.record_path, cfg.runs_path, cfg.end_path)
    if is_served(record, slot, cfg.zone, now):
        return None
    if ((record.get("last_run") or {}).get("status") != "running"
            and is_refused(read_refused(cfg.refused_path), slot)):
        return None  # refused for a run that then finished: not owed (``is_refused``)
    first_seen = record.get("first_seen")
    if first_seen and datetime.fromisoformat(first_seen) > slot:
        return None
    return slot


def start_background(memory_store: NoteStore, lcm_store: ConversationStore | None = None,
                     config: SchedulerConfig | AmemConfig | None = None, *,
                     clock: Clock | None = None, trigger: BaseTrigger | None = None,
                     catch_up: bool = True, wake_every_s: float = WAKE_EVERY_S) -> SchedulerHandle:
    """Start the nightly job in a background thread of the serving process.

    Args:
        memory_store: the note store the server owns.
        lcm_store: the conversation store, if any.
        config: scheduler settings (the server passes its ``AmemConfig``).
        clock: time source for slot decisions (tests).
        trigger: replaces the daily cron (tests use a date trigger a second away).
        catch_up: run a missed slot at once (see the module docstring).
        wake_every_s: how often the scheduler looks at the wall clock (a host waking from
            suspend runs an owed job within this time).
    """
    cfg = as_scheduler_config(config, memory_store.config)
    runner = _Runner(memory_store, lcm_store, cfg, clock or SystemClock(), trigger or cfg.trigger())
    scheduler = BackgroundScheduler(timezone=cfg.zone, daemon=True)
    _configure(scheduler, runner, catch_up=catch_up)
    scheduler.start()
    _keep_awake(scheduler, wake_every_s, runner.stopping)
    handle = SchedulerHandle(scheduler, runner)
    log.info("nightly scheduler started; next run %s", handle.next_run_time)
    return handle


def run_forever(memory_store: NoteStore, lcm_store: ConversationStore | None = None,
                config: SchedulerConfig | AmemConfig | None = None, *,
                clock: Clock | None = None, trigger: BaseTrigger | None = None,
                wake_every_s: float = WAKE_EVERY_S) -> None:
    """The standalone scheduler: blocks, running the nightly job, until interrupted."""
    cfg = as_scheduler_config(config, memory_store.config)
    _block(_Runner(memory_store, lcm_store, cfg, clock or SystemClock(), trigger or cfg.trigger()),
           "", wake_every_s)


def _block(runner: _Runner, how: str, wake_every_s: float) -> None:
    """Run ``runner``'s schedule in this thread until interrupted (Ctrl-C, SIGTERM)."""
    cfg = runner.cfg
    scheduler = BlockingScheduler(timezone=cfg.zone)
    _configure(scheduler, runner, catch_up=True)
    nxt = next_fire_time(runner.trigger, runner.clock.now())
    log.info("standalone nightly scheduler: %02d:%02d %s%s; next run %s", cfg.hour, cfg.minute,
             cfg.timezone, how, nxt.astimezone(cfg.zone).isoformat() if nxt else "never")
    _keep_awake(scheduler, wake_every_s, runner.stopping)
    try:
        scheduler.start()
    except (KeyboardInterrupt, SystemExit):
        log.info("nightly scheduler stopping")
    finally:
        # a run waiting for a busy store stops waiting: shutdown waited out every try (30 min)
        runner.stopping.set()
        if scheduler.running:
            scheduler.shutdown(wait=True)


#: opens both stores for one run and closes them after (``amem scheduler``)
StoreOpener = Callable[[], AbstractContextManager[tuple[NoteStore, "ConversationStore | None"]]]


class _OpeningRunner(_Runner):
    """A runner that opens the stores for each run and closes them after, so between runs the
    store is free for the CLI: ``amem scheduler`` held it from start to stop, and every other
    command (``amem list``, ``amem status``) exited 4 all day. A run that finds the store busy
    (an import at 02:30) tries again a minute later, for half an hour.

    A scheduled run whose slot was served already (``amem serve`` beside it runs the same job
    and holds the store all night) does not open the stores: it tried for half an hour and
    logged an error every night. A run that cannot open them is recorded as failed, so
    ``amem status`` says so (it said ``ok`` with the night before)."""

    def __init__(self, opener: StoreOpener, cfg: SchedulerConfig, clock: Clock,
                 trigger: BaseTrigger, *, retry_s: float = OPEN_RETRY_S) -> None:
        super().__init__(None, None, cfg, clock, trigger, retry_s=retry_s)  # type: ignore[arg-type]
        self.opener = opener

    def __call__(self, reason: Reason) -> None:
        for attempt in range(1, OPEN_TRIES + 1):
            skip = served(self.cfg, self.trigger, self.clock.now()) if reason != "manual" else None
            if skip is not None:
                log.info("nightly job skipped: %s", skip.skipped_because)
                return
            try:
                with self.opener() as (memory, lcm):
                    self.memory_store, self.lcm_store = memory, lcm
                    try:
                        super().__call__(reason)
                    finally:
                        self.memory_store, self.lcm_store = None, None  # type: ignore[assignment]
                return
            except Exception as exc:
                busy = getattr(exc, "code", None) == "store_locked"
                if not busy or attempt == OPEN_TRIES:
                    log.exception("the nightly job could not open the stores")
                    why = (f"the store stayed busy for {OPEN_TRIES} tries, {self.retry_s:.0f} s apart"
                           if busy else "the stores could not be opened")
                    self._record_failure(reason, f"{why}: {type(exc).__name__}: {exc}")
                    return
                log.warning("the nightly job found the store busy (%s); trying again in %.0f s",
                            exc, self.retry_s)
                if self.stopping.wait(self.retry_s):  # the slot stays owed: the next start runs it
                    log.warning("the nightly job stopped waiting for the store: the scheduler is stopping")
                    return

    def _record_failure(self, reason: Reason, error: str) -> None:
        try:
            report = record_not_started(self.cfg, reason, error, clock=self.clock,
                                        trigger=self.trigger)
        except Exception:  # the scheduler thread must survive; the log has the error
            log.exception("the nightly record could not be written")
            return
        if report.held_by is not None and reason != "manual":
            # the store was busy with another process's nightly run, past the wait: its
            # slot was refused for it, not failed (and it vanished from the record)
            self.refuse(reason, report.held_by)
        else:
            self.reports.append(report)


def run_forever_opening(opener: StoreOpener, config: SchedulerConfig, *,
                        clock: Clock | None = None, trigger: BaseTrigger | None = None,
                        wake_every_s: float = WAKE_EVERY_S, retry_s: float = OPEN_RETRY_S) -> None:
    """The standalone scheduler that holds no store between runs (:class:`_OpeningRunner`):
    blocks, running the nightly job, until interrupted."""
    _block(_OpeningRunner(opener, config, clock or SystemClock(), trigger or config.trigger(),
                          retry_s=retry_s), " (the stores open for each run)", wake_every_s)
