"""The operations log rotates daily and prunes old files; days move on the ManualClock, no sleeping."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore, ManualClock, load_config
from lcm.errors import LcmConfigError
from lcm.events import EventLog

from .conftest import chat

DAY = 86400


def events(path: Path) -> list[str]:
    return [json.loads(x)["event"] for x in path.read_text(encoding="utf-8").splitlines()]


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2025, 1, 1, 23, 0, tzinfo=UTC))


def test_the_first_event_of_a_new_day_moves_the_file_aside(tmp_path: Path, clock: ManualClock) -> None:
    with LcmStore(tmp_path / "lcm.db", LcmConfig(), clock=clock) as store:
        store.ingest("agent:a", chat(2))
        clock.advance(3600)  # 00:00 on 2 January (UTC)
        store.reset("agent:a")
    assert "lcm-log.2025-01-01.jsonl" in names(tmp_path)
    assert events(tmp_path / "lcm-log.2025-01-01.jsonl") == ["ingest"]
    assert events(tmp_path / "lcm-log.jsonl") == ["reset"]


def test_rotated_files_past_the_retention_are_deleted(tmp_path: Path, clock: ManualClock) -> None:
    log = EventLog(tmp_path / "lcm-log.jsonl", clock, retention_days=3)
    (tmp_path / "lcm-log.notes.jsonl").write_text("mine\n")  # not a rotated file: never touched
    (tmp_path / "lcm-log.2024-06-01.jsonl").write_text("another program's line\n")  # not our lines: kept
    for _ in range(8):  # 1 .. 8 January
        log.write("tick")
        clock.advance(DAY)
    log.write("tick")  # 9 January: keeps the files of the 6th, 7th and 8th
    assert [d.isoformat() for d, _ in log.rotated_files()] == ["2024-06-01", "2025-01-06", "2025-01-07", "2025-01-08"]
    assert "lcm-log.notes.jsonl" in names(tmp_path) and "lcm-log.2024-06-01.jsonl" in names(tmp_path)
    forever = EventLog(tmp_path / "all.jsonl", clock, retention_days=0)
    for _ in range(20):
        forever.write("tick")
        clock.advance(DAY)
    forever.write("tick")
    assert len(forever.rotated_files()) == 20


def test_a_new_process_rotates_yesterdays_file_and_prunes_at_its_first_event(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "lcm-log.jsonl"
    EventLog(path, clock).write("before")
    old = tmp_path / "lcm-log.2024-11-01.jsonl"
    old.write_text('{"ts": "2024-11-01T00:00:00Z", "event": "old"}\n')
    clock.advance(2 * DAY)
    EventLog(path, clock, retention_days=14).write("after")  # a restart, two days later
    assert names(tmp_path) == ["lcm-log.2025-01-01.jsonl", "lcm-log.jsonl"]  # 1 November is past 14 days
    assert events(path) == ["after"]


def test_a_stale_process_never_moves_a_fresh_file(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "lcm-log.jsonl"
    a, b = EventLog(path, clock), EventLog(path, clock)  # e.g. amem serve and a CLI command
    a.write("a1")
    b.write("b1")
    clock.advance(DAY)
    a.write("a2")  # rotates yesterday's file
    b.write("b2")  # b still thinks of yesterday: it must not rotate a's fresh file
    assert events(tmp_path / "lcm-log.2025-01-01.jsonl") == ["a1", "b1"]
    assert events(path) == ["a2", "b2"]


def test_a_full_file_rotates_within_the_day(tmp_path: Path, clock: ManualClock) -> None:
    log = EventLog(tmp_path / "lcm-log.jsonl", clock, max_bytes=200)
    for i in range(12):
        log.write("tick", n=i)
    rotated = [p.name for _, p in log.rotated_files()]
    assert rotated[:3] == ["lcm-log.2025-01-01.1.jsonl", "lcm-log.2025-01-01.2.jsonl", "lcm-log.2025-01-01.3.jsonl"]
    kept = sum(len(events(p)) for _, p in log.rotated_files()) + len(events(tmp_path / "lcm-log.jsonl"))
    assert kept == 12  # nothing lost by rotating


def test_a_runaway_day_rolls_through_five_files(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "lcm-log.jsonl"
    log = EventLog(path, clock, max_bytes=200)
    for i in range(60):
        log.write("tick", n=i)
    # before: one more numbered file per overflow, without end
    assert names(tmp_path) == [f"lcm-log.2025-01-01.{n}.jsonl" for n in range(1, 6)] + ["lcm-log.jsonl"]
    newest = [json.loads(x)["n"] for x in (tmp_path / "lcm-log.2025-01-01.1.jsonl").read_text().splitlines()]
    oldest = [json.loads(x)["n"] for x in (tmp_path / "lcm-log.2025-01-01.5.jsonl").read_text().splitlines()]
    assert max(oldest) < min(newest) < 60 and max(newest) < min(int(json.loads(x)["n"]) for x in
                                                               path.read_text().splitlines())
    clock.advance(DAY)
    log.write("next day")  # the full day's file takes the day's plain name
    assert "lcm-log.2025-01-01.jsonl" in names(tmp_path)


def test_a_damaged_file_rotates_by_its_modification_day(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "lcm-log.jsonl"
    path.write_text("cut by a crash\n")
    stamp = datetime(2024, 12, 30, 12, tzinfo=UTC).timestamp()
    os.utime(path, (stamp, stamp))
    EventLog(path, clock).write("next")
    assert names(tmp_path) == ["lcm-log.2024-12-30.jsonl", "lcm-log.jsonl"]


def test_the_retention_is_configurable() -> None:
    assert LcmConfig().log_retention_days == 3
    assert load_config(env={"LCM_LOG_RETENTION_DAYS": "30"}).log_retention_days == 30
    assert load_config(overrides={"independentLogFile": {"retentionDays": 0}}).log_retention_days == 0
    with pytest.raises(LcmConfigError) as bad:
        load_config(env={"LCM_LOG_RETENTION_DAYS": "-1"})
    assert bad.value.key == "independentLogFile.retentionDays"
    with pytest.raises(ValueError, match="retention_days"):
        EventLog(None, ManualClock(), retention_days=-2)
