"""run_nightly: the steps, the record, failures and retries, the lock, slot de-duplication."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from scheduler import last_run_status, run_nightly
from scheduler.record import RunLock, read_record

from tests.fakes.tmpfs import fill

from .conftest import ToyLcm, ToyNoteStore, cfg

UTC = timezone.utc


def test_real_store_is_consolidated_optimised_and_recorded(real_store: MemoryStore, home: Path) -> None:
    real_store.add("Harry's locker code is 4512", enrich=False)
    real_store.add("Harry's locker code is 4512.", enrich=False, agent_id="other")
    lcm = ToyLcm()
    report = run_nightly(real_store, lcm, reason="manual")
    assert report.status == "ok"
    assert report.steps["consolidate"].status == "ok"
    assert report.steps["consolidate"].summary["groups"] == 2  # both agents were consolidated
    assert report.steps["optimize"].status == "ok"
    assert report.steps["lcm_maintenance"].summary["compactions"] == 1 and lcm.calls == 1
    record = read_record(home / "nightly.json")
    assert record["last_run"]["status"] == "ok" and record["last_success_at"]
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []
    status = last_run_status(home)
    assert status["state"] == "ok" and status["running_pid"] is None


def test_the_record_names_what_a_night_merged(real_store: MemoryStore, home: Path) -> None:
    # the record kept counts alone: a night that merged notes left no way to find which
    # one fact told twice (two facts alike in shape, web-1's IP and web-2's, are never merged)
    first = real_store.add("The staging server restarts every Sunday night after the backup", enrich=False)
    second = real_store.add("After the backup the staging server restarts on Sunday nights", enrich=False)
    report = run_nightly(real_store, ToyLcm(), reason="manual")
    summary = report.steps["consolidate"].summary
    assert summary["merges"] == 1 and summary["warnings"] == []
    assert len(summary["merged"]) == 1
    (merge,) = summary["merged"]
    assert {merge["note"], merge["into"]} == {first.id, second.id} and merge["agent_id"] == real_store.agent_id
    recorded = read_record(home / "nightly.json")["last_run"]["steps"]["consolidate"]["summary"]
    assert recorded["merged"] == summary["merged"]


def test_status_says_overdue_when_no_run_served_the_last_slot(real_store: MemoryStore, home: Path) -> None:
    # the last run 15 days old read state "ok" and a next run tomorrow, as if one were coming
    clock = ManualClock("2026-03-01T03:00:00+00:00")
    assert run_nightly(real_store, ToyLcm(), reason="manual", clock=clock).status == "ok"
    fresh = last_run_status(home, now=datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    assert fresh["state"] == "ok" and fresh["overdue_slot"] is None
    within_grace = last_run_status(home, now=datetime(2026, 3, 2, 4, 0, tzinfo=UTC))
    assert within_grace["state"] == "ok"  # 02:30 passed 90 minutes ago: still within the grace
    late = last_run_status(home, now=datetime(2026, 3, 16, 12, 0, tzinfo=UTC))
    assert late["state"] == "overdue" and late["overdue_slot"].startswith("2026-03-16T02:30")


def test_failure_is_recorded_other_steps_still_run_and_next_night_retries(home: Path) -> None:
    store = ToyNoteStore(home, fail=True)
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    report = run_nightly(store, ToyLcm(), config=config, reason="scheduled", clock=clock)
    assert report.status == "failed" and store.optimizations == 1
    assert report.steps["consolidate"].error == "RuntimeError: disk full"
    assert report.steps["lcm_maintenance"].status == "ok"
    status = last_run_status(home, config)
    assert status["state"] == "failed" and "disk full" in status["last_error"]
    assert status["consecutive_failures"] == 1
    # not retried the same night ...
    clock.set(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))
    assert run_nightly(store, config=config, reason="catch-up", clock=clock).status == "skipped"
    # ... but the next night
    store.fail = False
    clock.set(datetime(2027, 5, 2, 2, 30, 5, tzinfo=UTC))
    assert run_nightly(store, config=config, reason="scheduled", clock=clock).status == "ok"
    status = last_run_status(home, config)
    assert status["state"] == "ok" and status["consecutive_failures"] == 0


def test_lcm_item_failures_fail_the_step(home: Path, toy: ToyNoteStore) -> None:
    report = run_nightly(toy, ToyLcm({"7": "LcmError: boom"}), config=cfg(home))
    assert report.status == "failed" and "boom" in (report.steps["lcm_maintenance"].error or "")


def test_a_held_lock_skips_the_run_and_names_the_holder(home: Path, toy: ToyNoteStore) -> None:
    lock = RunLock(home / "nightly.lock")
    assert lock.acquire()
    try:
        report = run_nightly(toy, config=cfg(home))
        assert report.status == "skipped" and "another process" in (report.skipped_because or "")
        assert last_run_status(home)["state"] in ("never", "running")
        assert last_run_status(home)["running_pid"] is not None
    finally:
        lock.release()
    assert toy.consolidations == 0


def test_two_threads_never_run_the_job_at_once(home: Path) -> None:
    store = ToyNoteStore(home, delay=0.5)
    results: list[str] = []

    def go() -> None:
        results.append(run_nightly(store, config=cfg(home)).status)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["ok", "skipped"] and store.consolidations == 1


def test_interrupted_run_is_reported_and_rerun(home: Path, toy: ToyNoteStore) -> None:
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    run_nightly(toy, config=config, reason="scheduled", clock=clock)
    record = read_record(home / "nightly.json")
    record["last_run"]["status"] = record["last_slot"]["status"] = "running"  # as if killed
    (home / "nightly.json").write_text(json.dumps(record))
    (home / "nightly_runs.jsonl").unlink()  # a killed run never finished: no line in the history
    # nor its end in its end note, which it reserved saying it was running
    (home / "nightly_end.json").write_text(json.dumps(
        {"status": "running", "started_at": record["last_run"]["started_at"]}))
    assert last_run_status(home, config)["state"] == "interrupted"
    clock.set(datetime(2027, 5, 1, 8, 0, tzinfo=UTC))
    assert run_nightly(toy, config=config, reason="catch-up", clock=clock).status == "ok"
    assert toy.consolidations == 2


def test_manual_runs_do_not_use_up_the_night(home: Path, toy: ToyNoteStore) -> None:
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 1, 0, tzinfo=UTC))
    assert run_nightly(toy, config=config, reason="manual", clock=clock).status == "ok"
    clock.set(datetime(2027, 5, 1, 2, 30, 1, tzinfo=UTC))
    assert run_nightly(toy, config=config, reason="scheduled", clock=clock).status == "ok"


def test_corrupt_record_is_tolerated(home: Path, toy: ToyNoteStore) -> None:
    home.mkdir(parents=True)
    (home / "nightly.json").write_text("{not json")
    assert last_run_status(home)["state"] == "never"
    assert run_nightly(toy, config=cfg(home)).status == "ok"
    assert read_record(home / "nightly.json")["last_run"]["status"] == "ok"


def test_each_finished_run_adds_a_line_to_the_run_history(home: Path) -> None:
    """The inspector's health page plots these lines; a skipped night adds none."""
    from scheduler.record import read_runs

    store = ToyNoteStore(home, fail=True)
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    run_nightly(store, ToyLcm(), config=config, reason="scheduled", clock=clock)
    clock.set(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))
    assert run_nightly(store, config=config, reason="catch-up", clock=clock).status == "skipped"
    store.fail = False
    clock.set(datetime(2027, 5, 2, 2, 30, 5, tzinfo=UTC))
    run_nightly(store, ToyLcm(), config=config, reason="scheduled", clock=clock)
    runs = read_runs(config.runs_path)
    assert [r["status"] for r in runs] == ["failed", "ok"]
    assert runs[1]["finished_at"].startswith("2027-05-02") and runs[1]["compactions"] == 1
    assert set(runs[1]) >= {"merges", "superseded", "expired_deleted", "embedding_debt", "duration"}


def test_a_record_that_cannot_be_written_fails_the_run_before_it_starts(home: Path,
                                                                       toy: ToyNoteStore) -> None:
    # A directory where the record goes (a read-only disk, a full one, behave alike): the run
    # raised a bare OSError (a crash in the scheduler's log, a one-line error from --once).
    (home / "nightly.json").mkdir(parents=True)
    report = run_nightly(toy, config=cfg(home), reason="scheduled")
    assert report.status == "failed" and toy.consolidations == 0
    assert "nightly.json cannot be written" in (report.steps["record"].error or "")
    assert last_run_status(home)["record_problems"]  # status says the record is unusable


class LosesTheRecord(ToyNoteStore):
    """A note store whose optimize (the job's second step) leaves the record unwritable: a
    directory where it goes (a read-only or full disk behave alike for the write)."""

    def optimize(self) -> None:
        super().optimize()
        record = self.config.home / "nightly.json"
        record.unlink()
        record.mkdir()


def test_a_record_unwritable_at_the_end_keeps_the_run_done_and_says_so(home: Path,
                                                                      real_store: MemoryStore) -> None:
    # the end-of-run write raised: the run's result was lost, `amem status` said interrupted,
    # and the next start ran the night again
    from scheduler.service import missed_slot
    from tools.reports import doctor_report

    store = LosesTheRecord(home)
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    report = run_nightly(store, ToyLcm(), config=config, reason="scheduled", clock=clock)
    assert report.status == "ok" and report.steps["lcm_maintenance"].status == "ok"
    assert len(report.warnings) == 1
    assert "nightly.json could not be written at the end of the run" in report.warnings[0]
    assert "nightly_runs.jsonl" in report.warnings[0]
    # status and the next start count it from the run history the run wrote
    clock.set(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))
    status = last_run_status(home, config, now=clock.now())
    assert status["state"] == "ok" and status["last_run"]["finished_at"] == "2027-05-01T02:30:05+00:00"
    assert status["last_success_at"] == "2027-05-01T02:30:05+00:00"
    assert missed_slot(config, config.trigger(), clock.now()) is None
    assert run_nightly(store, config=config, reason="catch-up", clock=clock).status == "skipped"
    assert store.consolidations == 1
    # and the doctor names it
    doctor = doctor_report(real_store, lambda _: {"ok": True}, status, clean=False)
    assert any("the run started 2027-05-01T02:30:05+00:00 finished ok" in w for w in doctor["warnings"]), doctor


def _unwritable(home: Path, name: str) -> None:
    """Make the atomic replacement of ``home/name`` fail while the file stays readable: a
    directory where its temporary sibling goes (a full disk refuses the new file alike)."""
    (home / f".{name}.{os.getpid()}.tmp").mkdir(parents=True)


class LosesRecordAndHistory(ToyNoteStore):
    """A note store whose optimize (the job's second step) leaves neither the record nor the
    run history writable; the record still reads, saying the run is running."""

    def optimize(self) -> None:
        super().optimize()
        for name in ("nightly.json", "nightly_runs.jsonl"):
            _unwritable(self.config.home, name)


def test_a_run_whose_record_and_history_are_both_unwritable_is_still_known_done(
        home: Path, real_store: MemoryStore) -> None:
    # neither end-of-run write could be made: the record said `running`, status said
    # `interrupted`, and the next start ran the night again
    from scheduler.service import missed_slot
    from tools.reports import doctor_report

    store = LosesRecordAndHistory(home)
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    report = run_nightly(store, ToyLcm(), config=config, reason="scheduled", clock=clock)
    assert report.status == "ok" and store.consolidations == 1
    (warning,) = report.warnings
    assert "nightly.json" in warning and "nightly_runs.jsonl" in warning
    assert "nightly_end.json" in warning and "runs this night again" not in warning
    assert read_record(config.record_path)["last_run"]["status"] == "running"  # as it was left
    clock.set(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))
    status = last_run_status(home, config, now=clock.now())
    assert status["state"] == "ok", status
    assert status["last_run"]["finished_at"] == "2027-05-01T02:30:05+00:00"
    (problem,) = status["record_problems"]
    assert "nightly_end.json" in problem and "finished ok" in problem
    assert missed_slot(config, config.trigger(), clock.now()) is None
    assert run_nightly(store, config=config, reason="catch-up", clock=clock).status == "skipped"
    assert store.consolidations == 1  # the night did not run twice
    doctor = doctor_report(real_store, lambda _: {"ok": True}, status, clean=False)
    assert any("nightly_end.json" in w for w in doctor["warnings"]), doctor


class LosesEverything(LosesRecordAndHistory):
    """Record and history unwritable, and the end note replaced by a directory since the run
    reserved it: nothing can carry the run's end."""

    def optimize(self) -> None:
        super().optimize()
        note = self.config.home / "nightly_end.json"
        note.unlink()
        note.mkdir()


def test_a_run_with_nowhere_to_write_its_end_says_the_next_start_cannot_know(
        home: Path, real_store: MemoryStore) -> None:
    from tools.reports import doctor_report

    store = LosesEverything(home)
    config = cfg(home)
    clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
    report = run_nightly(store, ToyLcm(), config=config, reason="scheduled", clock=clock)
    (warning,) = report.warnings
    assert "nightly_end.json" in warning and "runs this night again" in warning
    clock.set(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))
    status = last_run_status(home, config, now=clock.now())
    # the record still says the run began: a finished run cannot be told from a killed one,
    # and status and doctor say why beside `interrupted`
    assert status["state"] == "interrupted"
    (problem,) = status["record_problems"]
    assert "nightly_end.json" in problem and "cannot be known" in problem
    doctor = doctor_report(real_store, lambda _: {"ok": True}, status, clean=False)
    assert any("cannot be known" in w for w in doctor["warnings"]), doctor


class FillsTheDisk(ToyNoteStore):
    """A note store whose optimize leaves the disk full: another program took the space."""

    def optimize(self) -> None:
        super().optimize()
        fill(self.config.home)


def test_a_run_that_fills_a_real_disk_keeps_its_report_and_the_night_done(tmp_path: Path) -> None:
    # the record's write on a full disk raised DiskFullError, which is not an OSError: the end
    # of the run crashed (its report lost, the record saying `running`) and the next start ran
    # the night again
    from tests.fakes.tmpfs import small_tmpfs

    with small_tmpfs(tmp_path / "disk", 1 << 20) as disk:
        home = disk / "home"
        store = FillsTheDisk(home)
        config = cfg(home)
        clock = ManualClock(datetime(2027, 5, 1, 2, 30, 5, tzinfo=UTC))
        report = run_nightly(store, ToyLcm(), config=config, reason="scheduled", clock=clock)
        assert report.status == "ok" and store.consolidations == 1
        (warning,) = report.warnings
        assert "is full" in warning and "nightly_end.json" in warning
        clock.set(datetime(2027, 5, 1, 9, 0, tzinfo=UTC))
        status = last_run_status(home, config, now=clock.now())
        assert status["state"] == "ok" and status["last_run"]["status"] == "ok", status
        assert run_nightly(store, config=config, reason="catch-up", clock=clock).status == "skipped"
        assert store.consolidations == 1
        # a start on the full disk cannot write its own record either: said, not a crash
        clock.set(datetime(2027, 5, 2, 2, 30, 5, tzinfo=UTC))
        refused = run_nightly(store, config=config, reason="scheduled", clock=clock)
        assert refused.status == "failed" and "is full" in (refused.steps["record"].error or "")
        assert store.consolidations == 1
