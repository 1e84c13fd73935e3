"""``amem scheduler`` through the ``amem`` entry point: --once on a real store, --status, bad input."""

from __future__ import annotations

import json
from pathlib import Path

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
