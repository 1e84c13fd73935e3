"""Daylight saving: what the 02:30 trigger and the slot record do on both transition days."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

from amem.kernel.clock import ManualClock
from scheduler import run_nightly
from scheduler.config import last_fire_time

from .conftest import ToyNoteStore, cfg

UTC = timezone.utc


def fires(zone: str, start: datetime, count: int) -> list[datetime]:
    trigger = cfg(Path("/nonexistent"), zone).trigger()
    out, prev, now = [], None, start
    for _ in range(count):
        nxt = trigger.get_next_fire_time(prev, now)
        assert nxt is not None
        out.append(nxt.astimezone(UTC))
        prev, now = nxt, nxt
    return out


def test_spring_forward_new_york_runs_once_at_0330_daylight_time() -> None:
    # 2027-03-14: clocks jump from 02:00 EST to 03:00 EDT, so 02:30 does not exist. APScheduler
    # keeps the wall time with the old offset: 02:30-05:00 = 07:30 UTC = 03:30 EDT. Once.
    got = fires("America/New_York", datetime(2027, 3, 13, 12, tzinfo=ZoneInfo("America/New_York")), 3)
    assert got == [datetime(2027, 3, 14, 7, 30, tzinfo=UTC), datetime(2027, 3, 15, 6, 30, tzinfo=UTC),
                   datetime(2027, 3, 16, 6, 30, tzinfo=UTC)]
    assert got[0].astimezone(ZoneInfo("America/New_York")).strftime("%H:%M %Z") == "03:30 EDT"


def test_spring_forward_berlin_runs_once_at_0330_summer_time() -> None:
    got = fires("Europe/Berlin", datetime(2027, 3, 27, 12, tzinfo=ZoneInfo("Europe/Berlin")), 2)
    assert got == [datetime(2027, 3, 28, 1, 30, tzinfo=UTC), datetime(2027, 3, 29, 0, 30, tzinfo=UTC)]


def test_fall_back_new_york_0230_happens_once() -> None:
    # 2027-11-07: 01:00-02:00 repeats in New York; 02:30 exists once (EST).
    got = fires("America/New_York", datetime(2027, 11, 6, 12, tzinfo=ZoneInfo("America/New_York")), 2)
    assert got == [datetime(2027, 11, 7, 7, 30, tzinfo=UTC), datetime(2027, 11, 8, 7, 30, tzinfo=UTC)]


def test_fall_back_berlin_trigger_fires_twice_but_the_job_runs_once(home: Path) -> None:
    # 2027-10-31: 02:00-03:00 repeats in Berlin. The cron trigger fires at 02:30 CEST and again
    # at 02:30 CET; the slot record (one run per local date) makes the second firing a no-op.
    got = fires("Europe/Berlin", datetime(2027, 10, 30, 12, tzinfo=ZoneInfo("Europe/Berlin")), 3)
    assert got == [datetime(2027, 10, 31, 0, 30, tzinfo=UTC), datetime(2027, 10, 31, 1, 30, tzinfo=UTC),
                   datetime(2027, 11, 1, 1, 30, tzinfo=UTC)]
    store = ToyNoteStore(home)
    config = cfg(home, "Europe/Berlin")
    clock = ManualClock(datetime(2027, 10, 31, 0, 30, 1, tzinfo=UTC))
    first = run_nightly(store, config=config, reason="scheduled", clock=clock)
    assert (first.status, first.slot_date) == ("ok", "2027-10-31")
    clock.set(datetime(2027, 10, 31, 1, 30, 1, tzinfo=UTC))
    second = run_nightly(store, config=config, reason="scheduled", clock=clock)
    assert second.status == "skipped" and "already ran for 2027-10-31" in (second.skipped_because or "")
    clock.set(datetime(2027, 11, 1, 1, 30, 1, tzinfo=UTC))
    assert run_nightly(store, config=config, reason="scheduled", clock=clock).status == "ok"
    assert store.consolidations == 2


def test_last_fire_time_on_the_transition_days() -> None:
    berlin = cfg(Path("/x"), "Europe/Berlin").trigger()
    assert last_fire_time(berlin, datetime(2027, 10, 31, 1, 0, tzinfo=UTC)) == datetime(
        2027, 10, 31, 0, 30, tzinfo=UTC)
    assert last_fire_time(berlin, datetime(2027, 10, 31, 2, 0, tzinfo=UTC)) == datetime(
        2027, 10, 31, 1, 30, tzinfo=UTC)
    new_york = cfg(Path("/x"), "America/New_York").trigger()
    assert last_fire_time(new_york, datetime(2027, 3, 14, 7, 0, tzinfo=UTC)) == datetime(
        2027, 3, 13, 7, 30, tzinfo=UTC)


def test_the_fall_back_night_served_at_its_first_0230_is_not_overdue(home: Path) -> None:
    # The run at 02:30 CEST served 2027-10-31; the 02:30 CET firing is skipped. `amem status`
    # took the latest firing for the slot, found no run started since it, and from the grace's
    # end said `overdue` (and `amem doctor` "nothing runs it") until the next night.
    from scheduler import last_run_status

    config = cfg(home, "Europe/Berlin")
    clock = ManualClock(datetime(2027, 10, 31, 0, 30, 1, tzinfo=UTC))
    assert run_nightly(ToyNoteStore(home), config=config, reason="scheduled", clock=clock).status == "ok"
    for hour in (3, 8, 23):
        status = last_run_status(home, config, now=datetime(2027, 10, 31, hour, tzinfo=UTC))
        assert (status["state"], status["overdue_slot"]) == ("ok", None), hour
    # the next night unserved is still overdue once its grace is over
    status = last_run_status(home, config, now=datetime(2027, 11, 1, 9, tzinfo=UTC))
    assert (status["state"], status["overdue_slot"]) == ("overdue", "2027-11-01T02:30:00+01:00")  # Berlin time
