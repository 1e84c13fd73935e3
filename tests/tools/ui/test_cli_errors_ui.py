"""What ``amem ui`` says when it cannot serve: a damaged conversation store is named with
the way around it (in-process, through ``tools.cli.main``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.cli.main import main

from ..http_server import free_port
from ..test_cli_console import base_env


def test_a_damaged_lcm_db_is_named_with_the_no_lcm_way_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "lcm.db").write_bytes(b"this is not a database " * 200)
    code = main(["ui", "--no-open", "--port", str(free_port())], env=base_env(tmp_path))
    err = capsys.readouterr().err
    assert code != 0
    assert str(tmp_path / "lcm.db") in err and "--no-lcm" in err, err
    assert "unexpected" not in err and "amem inspector:" not in err
