"""A run that outlasts the next slot: the slot is refused, recorded, shown; never run over it."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from apscheduler.triggers.interval import IntervalTrigger

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from scheduler import last_run_status, start_background
from scheduler.record import read_record, read_refused, read_runs
from scheduler.service import _Runner, missed_slot
from tools.reports import doctor_report

from .conftest import ToyNoteStore, cfg

UTC = timezone.utc


class DayLongStore(ToyNoteStore):
    """A consolidation that takes 25 hours of the manual clock; ``during`` runs in the middle,
    as the next night's slot comes (the real time it takes is nil)."""

    def __init__(self, home: Path, clock: ManualClock) -> None:
        super().__init__(home)
        self.clock = clock
        self.during: Callable[[], None] = lambda: None

    def consolidate(self, *, agent_id: str | None = None, all_agents: bool = False,
                    progress: Any = None) -> Any:
        self.consolidations += 1
        self.clock.advance(24 * 3600)  # 2027-05-02 02:30:05: the next slot has just fired
        self.during()
        self.clock.advance(3600)
        return None


def test_the_slot_that_comes_during_a_day_long_run_is_refused_recorded_and_not_overdue(
        home: Path, real_store: MemoryStore) -> None:
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    store = DayLongStore(home, clock)
    # the next night's scheduled run, as a second scheduler (or a catch-up) would make it: it
    # meets the run under way, waits for it (no time here) and gives up
    second = _Runner(store, None, config, clock, config.trigger(), retry_s=0.0)
    seen: dict[str, Any] = {}

    def next_slot() -> None:
        second("scheduled")
        seen.update(last_run_status(home, config, now=clock.now()))

    store.during = next_slot
    first = _Runner(store, None, config, clock, config.trigger(), retry_s=0.0)
    first("scheduled")

    assert store.consolidations == 1  # never two consolidations of one store at once
    assert [r.status for r in second.reports] == ["skipped"]
    assert "had not finished at the slot of 2027-05-02" in (second.reports[0].skipped_because or "")
    # while it ran, status said since when and for how long, and that a slot was refused
    assert seen["state"] == "running"
    assert seen["running_since"] == "2027-05-01T02:30:05+00:00"
    assert seen["running_for_s"] == 24 * 3600
    assert seen["refused"]["slot"] == "2027-05-02T02:30:00+00:00"
    assert seen["refused"]["held_by"] == os.getpid()
    assert seen["refused"]["running_since"] == "2027-05-01T02:30:05+00:00"
    doctor = doctor_report(real_store, lambda _: {"ok": True}, seen, clean=False)
    assert any("was still going at the 2027-05-02T02:30:00+00:00 slot" in w and "24.0 h" in w
               for w in doctor["warnings"]), doctor["warnings"]
    # after it finished, the refused night is neither overdue (something was running the job)
    # nor caught up (the run had just done the night's work); the next night runs as usual
    later = datetime(2027, 5, 2, 10, 0, tzinfo=UTC)
    status = last_run_status(home, config, now=later)
    assert (status["state"], status["overdue_slot"]) == ("ok", None)
    assert status["refused"]["slot_date"] == "2027-05-02"
    assert missed_slot(config, config.trigger(), later) is None
    clock.set(datetime(2027, 5, 3, 2, 30, 5, tzinfo=UTC))
    store.during = lambda: None
    first("scheduled")
    assert store.consolidations == 2
    assert last_run_status(home, config, now=clock.now())["refused"] is None  # an older story
    assert [r["status"] for r in read_runs(config.runs_path)] == ["ok", "ok"]


def test_a_day_long_run_that_is_killed_is_interrupted_and_caught_up_at_start(home: Path) -> None:
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    store = DayLongStore(home, clock)
    store.during = lambda: _Runner(store, None, config, clock, config.trigger(),
                                   retry_s=0.0)("scheduled")
    _Runner(store, None, config, clock, config.trigger(), retry_s=0.0)("scheduled")
    record = read_record(config.record_path)
    record["last_run"]["status"] = record["last_slot"]["status"] = "running"  # as if killed
    config.record_path.write_text(json.dumps(record))
    config.runs_path.unlink()  # a killed run never finished: no line in the run history
    # nor its end in its end note, which it reserved saying it was running
    config.end_path.write_text(json.dumps(
        {"status": "running", "started_at": record["last_run"]["started_at"]}))

    later = datetime(2027, 5, 2, 10, 0, tzinfo=UTC)
    status = last_run_status(home, config, now=later)
    assert status["state"] == "interrupted" and status["running_since"] is None
    assert status["refused"]["slot_date"] == "2027-05-02"
    # the refusal excused the night only for a run that finished: this one did not
    assert missed_slot(config, config.trigger(), later) == datetime(2027, 5, 2, 2, 30, tzinfo=UTC)


def test_a_slot_that_fires_while_this_process_still_runs_the_last_is_recorded(home: Path) -> None:
    """APScheduler refuses a firing over a running instance (max_instances=1) with a warning in
    its log alone; the listener records it where `amem status` reads."""
    release = threading.Event()

    class Hung(ToyNoteStore):
        def consolidate(self, **kw: Any) -> Any:
            self.consolidations += 1
            release.wait(10)

    store = Hung(home)
    config = cfg(home)
    handle = start_background(store, config=config, trigger=IntervalTrigger(seconds=0.2),
                              catch_up=False, wake_every_s=0.05)
    try:
        deadline = time.monotonic() + 10
        while read_refused(config.refused_path) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        refused = read_refused(config.refused_path)
        assert refused is not None and refused["held_by"] == os.getpid()
        status = last_run_status(home, config)
        assert status["state"] == "running" and status["refused"] is not None
        assert status["running_for_s"] is not None and status["running_for_s"] >= 0
    finally:
        release.set()
        handle.shutdown()
    assert store.consolidations >= 1
    assert any(r.skipped_because and "had not finished" in r.skipped_because
               for r in handle.reports)
    assert datetime.fromisoformat(refused["at"]) > datetime.now(UTC) - timedelta(minutes=1)


def test_a_standalone_scheduler_whose_slot_meets_another_process_run_records_the_refusal(
        home: Path) -> None:
    """`amem scheduler` opens the store for each run: a store held all through the wait by
    another process's nightly run (a second scheduler, a cron `--once`) was neither failed
    nor refused in the record: the night vanished."""
    from amem.errors import StoreLockedError
    from scheduler.record import RunLock
    from scheduler.service import _OpeningRunner

    from .test_service import _busy_opener

    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 2, 2, 30, 5, tzinfo=UTC))
    calls: list[int] = []
    runner = _OpeningRunner(_busy_opener(calls, StoreLockedError("held", path=str(home))),
                            config, clock, config.trigger(), retry_s=0.0)
    lock = RunLock(config.lock_path)
    assert lock.acquire()  # the other process's run
    try:
        runner("scheduled")
        status = last_run_status(home, config, now=clock.now())
    finally:
        lock.release()
    assert status["refused"]["slot"] == "2027-05-02T02:30:00+00:00"
    assert status["refused"]["held_by"] == os.getpid()
    assert [r.status for r in runner.reports] == ["skipped"]
