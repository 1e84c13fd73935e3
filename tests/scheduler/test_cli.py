"""``amem scheduler`` through the ``amem`` entry point: --once on a real store, --status, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.cli import main


def cli_main(argv: list[str], *, env: dict[str, str]) -> int:
    return main(["scheduler", *argv], env=env)


def env_for(home: Path) -> dict[str, str]:
    return {"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing"}


def test_status_before_any_run(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--status", "--json"], env=env_for(home)) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["state"] == "never" and data["schedule"] == "02:30 UTC"
    assert data["next_run"].endswith("02:30:00+00:00")


def test_once_runs_the_job_on_the_configured_stores(home: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--once", "--json"], env=env_for(home)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "ok" and report["reason"] == "manual"
    assert report["steps"]["lcm_maintenance"]["status"] == "ok"
    assert cli_main(["--status", "--timezone", "Europe/Berlin"], env=env_for(home)) == 0
    text = capsys.readouterr().out
    assert "state: ok" in text and "02:30 Europe/Berlin" in text


def test_once_without_lcm(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--once", "--no-lcm", "--json"], env=env_for(home)) == 0
    assert json.loads(capsys.readouterr().out)["steps"]["lcm_maintenance"]["status"] == "skipped"


def test_bad_zone_and_contradictory_flags_exit_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--status", "--timezone", "Mars/Olympus"], env=env_for(home)) == 2
    assert "Mars/Olympus" in capsys.readouterr().err
    assert cli_main(["--once", "--status"], env=env_for(home)) == 2
    assert "not allowed with argument --once" in capsys.readouterr().err


def test_common_options_before_the_word(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The scheduler's options are amem's: before the word as after it.
    assert main(["--json", "scheduler", "--status"], env=env_for(home)) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "never"


@pytest.mark.slow
def test_the_daily_scheduler_leaves_the_store_to_the_cli_between_runs(home: Path) -> None:
    # it held the store from start to stop: `amem list` and even `amem status` exited 4 all day
    import os
    import signal
    import subprocess
    import sys
    import time

    amem = Path(sys.executable).with_name("amem")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update(env_for(home))
    subprocess.run([str(amem), "add", "a note before the scheduler", "--no-enrich"], env=env, check=True,
                   capture_output=True, timeout=60)
    proc = subprocess.Popen([str(amem), "scheduler"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)  # started: its catch-up run (if any) is done or waiting for its slot
        assert proc.poll() is None, proc.communicate()
        for args in (["list"], ["status"], ["add", "a note while it waits", "--no-enrich"]):
            done = subprocess.run([str(amem), *args], env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_a_run_opens_the_stores_for_itself_and_waits_for_a_busy_store(tmp_path: Path) -> None:
    from collections.abc import Iterator
    from contextlib import contextmanager
    from datetime import datetime, timedelta, timezone
    from typing import Any

    from apscheduler.triggers.date import DateTrigger

    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder
    from amem.errors import StoreLockedError
    from amem.kernel.clock import SystemClock
    from scheduler import SchedulerConfig
    from scheduler.service import _OpeningRunner

    opened: list[str] = []
    busy = [True]

    @contextmanager
    def stores() -> Iterator[tuple[Any, Any]]:
        if busy[0]:  # an import holds the store at the first try
            busy[0] = False
            raise StoreLockedError("held by pid 1", path=str(tmp_path))
        with MemoryStore(tmp_path / "store", embedder=HashingEmbedder(), agent_id="t") as memory:
            opened.append("open")
            yield memory, None
        opened.append("closed")

    cfg = SchedulerConfig(home=tmp_path)
    now = datetime.now(timezone.utc)
    runner = _OpeningRunner(stores, cfg, SystemClock(), DateTrigger(now + timedelta(days=1)), retry_s=0.01)
    runner("manual")
    assert opened == ["open", "closed"] and len(runner.reports) == 1
    assert runner.memory_store is None  # nothing held between runs


def test_the_daily_scheduler_says_it_started_and_when_it_runs(home: Path) -> None:
    # It said nothing at all: an operator (or a service manager's journal) could not tell it
    # was running, when it would run, or that a run happened. It logs as `amem serve` does.
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update(env_for(home), PYTHONPATH=str(root), AMEM_SCHEDULE_TIMEZONE="Europe/Berlin")
    proc = subprocess.Popen([sys.executable, "-m", "tools.cli", "scheduler", "--no-lcm"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (home / "nightly.json").exists():
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    said = [json.loads(line)["message"] for line in err.splitlines() if line.startswith("{")]
    started = [m for m in said if m.startswith("standalone nightly scheduler")]
    assert started and "02:30 Europe/Berlin" in started[0] and "next run 20" in started[0], said


def _started(args: list[str], home: Path, **extra: str) -> Any:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update(env_for(home), PYTHONPATH=str(root), **extra)
    return subprocess.Popen([sys.executable, "-m", "tools.cli", *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _wait_for_holder(home: Path, pid: int) -> None:
    import time

    deadline = time.monotonic() + 30
    lock = home / "store" / "LOCK"
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip() == str(pid):
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} never held the store")


def test_a_scheduler_beside_a_server_says_the_server_runs_the_job(home: Path) -> None:
    # It told the operator to "run `amem serve` in the owning process", which was one.
    server = _started(["serve", "--no-lcm"], home)
    try:
        _wait_for_holder(home, server.pid)
        sched = _started(["scheduler", "--no-lcm"], home)
        out, err = sched.communicate(timeout=60)
    finally:
        server.kill()
        server.communicate(timeout=30)
    assert sched.returncode == 4, err
    assert "runs the nightly job itself" in err and "no `amem scheduler` is needed" in err


def test_a_scheduler_waits_for_a_command_that_holds_the_store_at_start(home: Path) -> None:
    # Two schedulers started together: the second met the first's brief check and exited 4.
    import signal
    import subprocess
    import sys
    import time

    code = ("import time; from amem import MemoryStore; from amem.embed.hashing import "
            f"HashingEmbedder; s = MemoryStore({str(home / 'store')!r}, embedder=HashingEmbedder()); "
            "print('held', flush=True); time.sleep(2); s.close()")
    hold = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**env_for(home), "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert hold.stdout is not None and hold.stdout.readline().strip() == "held"
    sched = _started(["scheduler", "--no-lcm"], home)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (home / "nightly.json").exists():
            assert sched.poll() is None, sched.communicate()
            time.sleep(0.1)
        assert sched.poll() is None
    finally:
        sched.send_signal(signal.SIGTERM)
        out, err = sched.communicate(timeout=30)
        hold.communicate(timeout=30)
    assert sched.returncode == 0 and "waiting up to" in err, err


def _hold_store(home: Path, seconds: float) -> Any:
    """A process that holds the store ``seconds`` (as `amem import` would), once it says so."""
    import subprocess
    import sys

    code = ("import time; from amem import MemoryStore; from amem.embed.hashing import "
            f"HashingEmbedder; s = MemoryStore({str(home / 'store')!r}, embedder=HashingEmbedder()); "
            f"print('held', flush=True); time.sleep({seconds}); s.close()")
    hold = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**env_for(home), "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert hold.stdout is not None and hold.stdout.readline().strip() == "held"
    return hold


def test_once_on_a_busy_store_gives_up_after_its_wait_and_records_why(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It exited 4 at once and recorded nothing: status said `never` after a cron run met an import.
    hold = _hold_store(home, 30)
    try:
        assert cli_main(["--once", "--no-lcm", "--wait", "0.3"], env=env_for(home)) == 4
        err = capsys.readouterr().err
        assert f"pid {hold.pid}" in err and "recorded as failed" in err
        assert cli_main(["--status", "--json"], env=env_for(home)) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["state"] == "failed" and f"held by pid {hold.pid}" in status["last_error"]
        assert "stayed busy for 0.3 s" in status["last_error"]
    finally:
        hold.kill()
        hold.communicate(timeout=30)


def test_once_waits_for_a_command_that_frees_the_store(home: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    hold = _hold_store(home, 1.0)
    try:
        assert cli_main(["--once", "--no-lcm", "--json", "--wait", "30"], env=env_for(home)) == 0
        assert json.loads(capsys.readouterr().out)["status"] == "ok"
    finally:
        hold.communicate(timeout=30)


def test_once_while_a_nightly_run_holds_the_store_says_so_at_once(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.record import RunLock

    hold = _hold_store(home, 30)
    lock = RunLock(home / "nightly.lock")  # the holder is a scheduler's run
    assert lock.acquire()
    try:
        assert cli_main(["--once", "--no-lcm", "--wait", "30"], env=env_for(home)) == 4
        assert "the nightly job is running now" in capsys.readouterr().err
    finally:
        lock.release()
        hold.kill()
        hold.communicate(timeout=30)
    assert not (home / "nightly.json").exists()  # nothing failed: nothing recorded


def test_wait_must_not_be_negative(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--once", "--wait", "-1"], env=env_for(home)) == 2
