"""The APScheduler wiring: job options, catch-up after a missed night, a short real run."""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger

from amem.kernel.clock import ManualClock, SystemClock
from scheduler import SchedulerConfig, last_run_status, start_background
from scheduler.config import load_config as load_scheduler_config
from scheduler.config import JOB_ID
from scheduler.record import read_record, write_record
from scheduler.service import missed_slot

from .conftest import ToyLcm, ToyNoteStore, cfg

UTC = timezone.utc


def wait_for(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)


def test_job_is_the_0230_cron_in_the_configured_zone_with_safe_options(home: Path,
                                                                       toy: ToyNoteStore) -> None:
    handle = start_background(toy, config=cfg(home, "Europe/Berlin"))
    try:
        job = handle.scheduler.get_job(JOB_ID)
        assert isinstance(job.trigger, CronTrigger)
        assert str(job.trigger.timezone) == "Europe/Berlin"
        fields = {f.name: str(f) for f in job.trigger.fields}
        assert (fields["hour"], fields["minute"]) == ("2", "30")
        assert (job.coalesce, job.max_instances, job.misfire_grace_time) == (True, 1, 6 * 3600)
        assert [j.id for j in handle.scheduler.get_jobs()] == [JOB_ID]  # nothing owed at first start
        assert handle.next_run_time is not None and handle.next_run_time.hour == 2
    finally:
        handle.shutdown()


def test_the_schedule_keys_reach_the_trigger(home: Path, toy: ToyNoteStore) -> None:
    # schedule_* moved from AmemConfig to SchedulerConfig (issue 17): the server passes
    # tools.settings' .scheduler, loaded from the same keys and variables.
    config = load_scheduler_config(env={"AMEM_SCHEDULE_TIMEZONE": "Asia/Tokyo"}, home=home)
    handle = start_background(toy, None, config)
    try:
        assert str(handle.scheduler.get_job(JOB_ID).trigger.timezone) == "Asia/Tokyo"
    finally:
        handle.shutdown()


def test_short_run_of_the_real_scheduler_runs_the_job_once(home: Path, toy: ToyNoteStore) -> None:
    run_at = datetime.now(UTC) + timedelta(seconds=1)
    handle = start_background(toy, ToyLcm(), cfg(home), trigger=DateTrigger(run_date=run_at),
                              catch_up=False)
    try:
        wait_for(lambda: handle.reports)
        time.sleep(1.0)  # would a second run follow?
        assert [r.status for r in handle.reports] == ["ok"] and toy.consolidations == 1
        assert handle.reports[0].reason == "scheduled"
    finally:
        handle.shutdown()
    assert read_record(home / "nightly.json")["last_run"]["status"] == "ok"


def test_a_missed_night_runs_once_at_start_and_not_again(home: Path, toy: ToyNoteStore) -> None:
    config = cfg(home)
    write_record(config.record_path, {
        "first_seen": "2027-04-20T10:00:00+00:00",
        "last_slot": {"slot": "2027-04-28T02:30:00+00:00", "date": "2027-04-28", "status": "ok"}})
    clock = ManualClock(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))  # slept through three nights
    assert missed_slot(config, config.trigger(), clock.now()) == datetime(2027, 5, 1, 2, 30, tzinfo=UTC)
    for _ in range(2):  # a second start (or a second process) finds the slot served
        handle = start_background(toy, config=config, clock=clock)
        try:
            wait_for(lambda: toy.consolidations >= 1, timeout=5)
            time.sleep(0.3)
        finally:
            handle.shutdown()
    assert toy.consolidations == 1
    assert read_record(config.record_path)["last_slot"]["date"] == "2027-05-01"
    assert missed_slot(config, config.trigger(), clock.now()) is None


def test_first_start_owes_nothing(home: Path, toy: ToyNoteStore) -> None:
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))
    handle = start_background(toy, config=config, clock=clock)
    handle.shutdown()
    assert toy.consolidations == 0
    assert json.loads(config.record_path.read_text())["first_seen"] == clock.now().isoformat()


def test_a_firing_missed_beyond_the_grace_time_is_caught_up(home: Path, toy: ToyNoteStore) -> None:
    config = SchedulerConfig(home=home, misfire_grace_hours=0.0005)  # 1.8 seconds
    write_record(config.record_path, {"first_seen": "2020-01-01T00:00:00+00:00"})
    late = datetime.now(UTC) - timedelta(seconds=30)  # as if the host slept through it
    handle = start_background(toy, config=config, clock=SystemClock(),
                              trigger=DateTrigger(run_date=late), catch_up=False)
    try:
        wait_for(lambda: handle.reports)
        time.sleep(0.3)
        assert [r.reason for r in handle.reports] == ["catch-up"] and toy.consolidations == 1
    finally:
        handle.shutdown()


CORRUPT_RECORDS = [
    {"last_slot": "yesterday", "last_run": ["ok"], "consecutive_failures": "two",
     "first_seen": 5, "last_success_at": 7},
    {"last_slot": {"date": 20270428, "status": None}, "last_run": {"status": 1, "pid": "x"},
     "first_seen": "2027-04-20T10:00:00"},  # no zone: cannot be compared with a slot
    [1, 2, 3],
]


@pytest.mark.parametrize("corrupt", CORRUPT_RECORDS)
def test_a_corrupt_record_is_reported_and_replaced_never_a_crash(home: Path, toy: ToyNoteStore,
                                                                 corrupt: object) -> None:
    config = cfg(home)
    home.mkdir(parents=True, exist_ok=True)
    config.record_path.write_text(json.dumps(corrupt), encoding="utf-8")
    status = last_run_status(home, config)
    assert status["state"] == "never" and status["consecutive_failures"] == 0
    assert status["record_problems"], "the damage is reported"
    clock = ManualClock(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))
    handle = start_background(toy, config=config, clock=clock)  # crashed with AttributeError
    handle.shutdown()
    assert last_run_status(home, config)["record_problems"] == []  # replaced by a clean one
    assert read_record(config.record_path)["first_seen"] == clock.now().isoformat()


def test_a_scheduler_that_slept_through_the_slot_runs_on_waking(home: Path, toy: ToyNoteStore,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """APScheduler waits for the next firing with a timeout on the monotonic clock, which
    stands still while the host is suspended (apscheduler#794): a laptop that slept through
    02:30 ran the job hours after it woke (as late as it had slept), or, past the grace,
    never that day. The scheduler looks at the wall clock every ``wake_every_s`` instead."""
    import apscheduler.schedulers.base as aps_base

    slept = [timedelta(0)]

    class WallClock(datetime):  # the wall clock after a suspend; the monotonic one never moved
        @classmethod
        def now(cls, tz: object = None) -> "WallClock":  # type: ignore[override]
            return super().now(tz) + slept[0]  # type: ignore[arg-type, return-value]

    monkeypatch.setattr(aps_base, "datetime", WallClock)
    slot = datetime.now(UTC) + timedelta(hours=1)
    handle = start_background(toy, config=cfg(home), trigger=DateTrigger(run_date=slot),
                              catch_up=False, wake_every_s=0.2)
    try:
        time.sleep(0.5)  # the scheduler now waits an hour of monotonic time
        assert toy.consolidations == 0
        slept[0] = timedelta(hours=1, minutes=5)  # the host slept through the slot and woke
        wait_for(lambda: toy.consolidations, timeout=5)
        assert toy.consolidations == 1
    finally:
        handle.shutdown()


def _busy_opener(calls: list[int], error: Exception) -> Any:
    from collections.abc import Iterator
    from contextlib import contextmanager

    @contextmanager
    def stores() -> Iterator[tuple[Any, Any]]:
        calls.append(1)
        raise error
        yield None, None  # pragma: no cover

    return stores


def test_a_standalone_scheduler_beside_a_server_leaves_the_served_night_alone(
        home: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`amem serve` runs the same job and holds the store all night: `amem scheduler` beside it
    tried to open the store for half an hour and logged an error, every night, for a slot the
    server had served."""
    from amem.errors import StoreLockedError
    from scheduler.service import _OpeningRunner

    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    write_record(config.record_path, {  # the server's run of tonight
        "first_seen": "2027-04-20T10:00:00+00:00",
        "last_slot": {"slot": "2027-05-01T02:30:00+00:00", "date": "2027-05-01", "status": "ok"}})
    calls: list[int] = []
    runner = _OpeningRunner(_busy_opener(calls, StoreLockedError("held by pid 1", path=str(home))),
                            config, clock, config.trigger(), retry_s=0.001)
    runner("scheduled")
    assert calls == [], "a served slot needs no store"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert read_record(config.record_path)["last_slot"]["status"] == "ok"


@pytest.mark.parametrize("busy", [True, False])
def test_a_run_that_cannot_open_the_stores_is_recorded_as_failed(home: Path, busy: bool) -> None:
    """Busy for half an hour (an import) or not openable at all: `amem status` said `ok` with
    the night before (then `overdue`, 'nothing runs it'), the failure only in the log."""
    from amem.errors import ConfigError, StoreLockedError
    from scheduler.service import OPEN_TRIES, _OpeningRunner

    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    error: Exception = (StoreLockedError("held by pid 1", path=str(home)) if busy
                        else ConfigError("embedder mismatch"))
    calls: list[int] = []
    runner = _OpeningRunner(_busy_opener(calls, error), config, clock, config.trigger(),
                            retry_s=0.001)
    runner("scheduled")
    assert len(calls) == (OPEN_TRIES if busy else 1)
    status = last_run_status(home, config, now=clock.now())
    assert status["state"] == "failed" and status["consecutive_failures"] == 1
    assert ("busy" if busy else "embedder mismatch") in status["last_error"]
    assert read_record(config.record_path)["last_slot"] == {
        "slot": "2027-05-01T02:30:00+00:00", "date": "2027-05-01", "status": "failed"}


def test_stopping_the_scheduler_stops_a_run_waiting_for_a_busy_store(home: Path) -> None:
    """SIGTERM (or Ctrl-C) while a run waited for a busy store (an import at 02:30) waited for
    every remaining try: up to half an hour, and a service manager kills it long before."""
    import os
    import signal
    import threading

    from amem.errors import StoreLockedError
    from scheduler import run_forever_opening

    calls: list[int] = []
    opener = _busy_opener(calls, StoreLockedError("held by pid 1", path=str(home)))
    first = datetime.now(UTC) + timedelta(seconds=0.2)
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()  # Ctrl-C mid-wait
    started = time.monotonic()
    run_forever_opening(opener, cfg(home), trigger=DateTrigger(run_date=first), retry_s=2.0)
    took = time.monotonic() - started
    assert calls and len(calls) <= 2 and took < 5, (len(calls), took)
    assert last_run_status(home, cfg(home))["state"] == "never"  # the slot stays owed


def test_a_scheduled_run_meeting_a_run_under_way_waits_and_serves_its_own_night(home: Path) -> None:
    """A catch-up for last night started at 02:29:59 (`amem serve` just started) still runs at
    02:30: the scheduled run found the run lock held and was skipped, so tonight went unserved
    (`overdue` by morning). It waits for the run under way, then serves its own night."""
    import threading

    from scheduler import run_nightly
    from scheduler.service import _Runner

    config = cfg(home)
    store = ToyNoteStore(home, delay=1.0)
    catch_up = threading.Thread(target=run_nightly, args=(store,), kwargs={
        "config": config, "reason": "catch-up",
        "clock": ManualClock(datetime(2027, 5, 1, 2, 29, 59, tzinfo=UTC))})
    catch_up.start()
    wait_for(lambda: store.consolidations == 1)
    runner = _Runner(store, None, config, ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC)),
                     config.trigger(), retry_s=0.2)
    runner("scheduled")
    catch_up.join()
    assert store.consolidations == 2 and [r.status for r in runner.reports] == ["ok"]
    assert read_record(config.record_path)["last_slot"]["date"] == "2027-05-01"
