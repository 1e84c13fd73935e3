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


def test_no_login_link_is_shown_for_a_port_another_program_holds(tmp_path: Path) -> None:
    """Another program listening on the port answers connections; the link (the login token)
    is for this process's own server only. A real process: its imports take long enough for
    a "does anything answer?" check to see the other program before the port check fails."""
    import socket
    import subprocess

    from ..test_cli_console import AMEM, ROOT

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(8)
        port = squatter.getsockname()[1]
        done = subprocess.run([str(AMEM), "ui", "--no-open", "--port", str(port)],
                              env=base_env(tmp_path), cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode != 0 and "amem inspector:" not in done.stdout + done.stderr, done
