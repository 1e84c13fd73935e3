"""The schedule's zone changes between runs (a laptop flown, the config edited), the clock is
set back, and what `amem status` says of the zone its times are in."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from scheduler import last_run_status, run_nightly
from scheduler.service import missed_slot
from tools.reports import doctor_report

from .conftest import ToyNoteStore, cfg

UTC = timezone.utc


def test_flown_west_the_new_zones_night_runs(home: Path, toy: ToyNoteStore) -> None:
    # Tokyo's 2 December 02:30 is 1 Dec 17:30 UTC; Honolulu's is 2 Dec 12:30 UTC, 19 h later.
    # The date written by the Tokyo run ("2027-12-02") read as Honolulu's served that night:
    # no run for 43 hours.
    clock = ManualClock(datetime(2027, 12, 1, 17, 30, 5, tzinfo=UTC))
    assert run_nightly(toy, config=cfg(home, "Asia/Tokyo"), reason="scheduled",
                       clock=clock).status == "ok"
    honolulu = cfg(home, "Pacific/Honolulu")
    clock.set(datetime(2027, 12, 2, 12, 30, 5, tzinfo=UTC))
    assert run_nightly(toy, config=honolulu, reason="scheduled", clock=clock).status == "ok"
    assert toy.consolidations == 2


def test_flown_east_the_change_is_not_overdue_and_the_next_local_night_runs(
        home: Path, toy: ToyNoteStore, real_store: MemoryStore) -> None:
    clock = ManualClock(datetime(2027, 12, 2, 12, 30, 5, tzinfo=UTC))  # 02:30 in Honolulu
    run_nightly(toy, config=cfg(home, "Pacific/Honolulu"), reason="scheduled", clock=clock)
    tokyo = cfg(home, "Asia/Tokyo")
    # 13:00 UTC is 22:00 in Tokyo: its latest 02:30 (1 Dec 17:30 UTC) came before the last
    # run, so nothing is owed, overdue or caught up right after the change
    now = datetime(2027, 12, 2, 13, 0, tzinfo=UTC)
    status = last_run_status(home, tokyo, now=now)
    assert (status["state"], status["overdue_slot"]) == ("ok", None)
    assert missed_slot(tokyo, tokyo.trigger(), now) is None
    assert status["next_run"] == "2027-12-03T02:30:00+09:00"  # the slot, in the zone it is in
    assert status["timezone"] == "Asia/Tokyo"
    assert "02:30 Pacific/Honolulu" in (status["schedule_changed"] or "")
    doctor = doctor_report(real_store, lambda _: {"ok": True}, status, clean=False)
    assert any(w.startswith("the schedule is 02:30 Asia/Tokyo, but the last run followed "
                            "02:30 Pacific/Honolulu") for w in doctor["warnings"])
    # Tokyo's next 02:30 is its own night: it runs (5 h after the Honolulu one)
    clock.set(datetime(2027, 12, 2, 17, 30, 5, tzinfo=UTC))
    assert run_nightly(toy, config=tokyo, reason="scheduled", clock=clock).status == "ok"
    assert last_run_status(home, tokyo, now=clock.now())["schedule_changed"] is None


def test_status_times_carry_the_schedules_offset(home: Path, toy: ToyNoteStore) -> None:
    berlin = cfg(home, "Europe/Berlin")
    clock = ManualClock(datetime(2027, 1, 10, 1, 30, 5, tzinfo=UTC))
    run_nightly(toy, config=berlin, reason="scheduled", clock=clock)
    status = last_run_status(home, berlin, now=datetime(2027, 1, 10, 12, tzinfo=UTC))
    assert status["last_run"]["started_at"] == "2027-01-10T02:30:05+01:00"
    assert status["last_run"]["slot"] == "2027-01-10T02:30:00+01:00"
    assert status["last_success_at"] == "2027-01-10T02:30:05+01:00"
    assert status["next_run"] == "2027-01-11T02:30:00+01:00"
    assert status["schedule"] == "02:30 Europe/Berlin" and status["timezone"] == "Europe/Berlin"


def test_a_clock_set_back_does_not_skip_nights(home: Path, toy: ToyNoteStore) -> None:
    # The clock ran a week ahead and was corrected: the record holds a night in the future.
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 10, 2, 30, 5, tzinfo=UTC))
    run_nightly(toy, config=config, reason="scheduled", clock=clock)
    clock.set(datetime(2027, 5, 3, 2, 30, 5, tzinfo=UTC))
    assert run_nightly(toy, config=config, reason="scheduled", clock=clock).status == "ok"
    assert run_nightly(toy, config=config, reason="scheduled", clock=clock).status == "skipped"
    assert toy.consolidations == 2


def test_the_machines_zone_plays_no_part(home: Path) -> None:
    """The schedule follows ``schedule_timezone`` (UTC unless set), never TZ: a laptop whose
    system zone changes keeps its schedule until the setting changes."""
    code = ("import json, sys; from scheduler import last_run_status; "
            "print(json.dumps(last_run_status(sys.argv[1])))")
    seen = set()
    for zone in ("Asia/Tokyo", "America/New_York"):
        out = subprocess.run([sys.executable, "-c", code, str(home)], check=True, text=True,
                             capture_output=True, env={"TZ": zone, "PYTHONPATH": str(Path(__file__).parents[2])})
        seen.add(out.stdout.split('"next_run": ')[1].split(",")[0])
    assert len(seen) == 1 and seen.pop().endswith('02:30:00+00:00"')


def test_a_zone_edited_under_a_running_scheduler_is_said_before_its_next_run(
        home: Path, toy: ToyNoteStore) -> None:
    # The running scheduler keeps the zone it started with; status read the edited setting
    # and showed the new zone's next run as if it would happen, and said nothing else.
    from scheduler import start_background

    handle = start_background(toy, config=cfg(home, "Asia/Tokyo"), catch_up=False)
    try:
        status = last_run_status(home, cfg(home, "Pacific/Honolulu"))
    finally:
        handle.shutdown()
    changed = status["schedule_changed"] or ""
    assert "follows 02:30 Asia/Tokyo" in changed and f"pid {os.getpid()}" in changed
    assert "to follow 02:30 Pacific/Honolulu" in changed
    assert last_run_status(home, cfg(home, "Asia/Tokyo"))["schedule_changed"] is None


def test_a_pid_reused_by_another_process_is_not_taken_for_the_stopped_scheduler(home: Path) -> None:
    # a scheduler (here: a real process, A) recorded its pid and stopped; another process (B)
    # got the pid. Status found the pid alive and said "the scheduler running since ... (pid)
    # follows ...: restart it": a scheduler that no longer runs. The record keeps what tells
    # processes apart (the boot and the process's start), and status checks it.
    import json
    import socket

    from scheduler.record import process_identity

    first = subprocess.Popen(["sleep", "30"])
    identity = process_identity(first.pid)
    first.kill()
    first.wait()
    other = subprocess.Popen(["sleep", "30"])
    # the start is counted in clock ticks (10 ms): one started in A's tick is started again
    for _ in range(100):
        if process_identity(other.pid) != identity:
            break
        other.kill()
        other.wait()
        other = subprocess.Popen(["sleep", "30"])
    try:
        assert identity is not None and process_identity(other.pid) not in (None, identity)

        def claimed(pid: int, ident: str | None) -> str | None:
            entry = {"schedule": "02:30 Asia/Tokyo", "pid": pid, "host": socket.gethostname(),
                     "since": "2027-12-01T00:00:00+00:00", **({"process": ident} if ident else {})}
            (home / "nightly.json").write_text(json.dumps({"version": 1, "scheduler": entry}))
            changed: str | None = last_run_status(home, cfg(home, "Pacific/Honolulu"))["schedule_changed"]
            return changed

        home.mkdir(parents=True, exist_ok=True)
        assert claimed(other.pid, identity) is None  # A's record, B's pid: not A
        # B itself, as it would record itself, is alive; a record of before the change
        # (no identity) is read as it was (the pid alone)
        assert f"(pid {other.pid}) follows 02:30 Asia/Tokyo" in (claimed(other.pid, process_identity(other.pid)) or "")
        assert f"(pid {other.pid})" in (claimed(other.pid, None) or "")
        assert claimed(first.pid, identity) is None or first.pid == other.pid  # A is gone
    finally:
        other.kill()
        other.wait()
