"""An unexpected failure in a command: one line by default, the traceback only with -vv."""

from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path

import pytest

from tools.cli.main import as_cli_error as _as_cli_error
from tools.cli.main import main
from tools.cli.output import setup_logging


def _fail() -> RuntimeError:
    try:
        raise RuntimeError("disk gremlin")
    except RuntimeError as exc:
        return exc


@pytest.mark.parametrize("verbose,shows_traceback", [(0, False), (1, False), (2, True)])
def test_traceback_only_when_asked(verbose: int, shows_traceback: bool,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    restore = setup_logging(verbose, {})
    try:
        err = _as_cli_error(_fail())
    finally:
        restore()
    stderr = capsys.readouterr().err
    assert err.code == "internal" and "-vv" in str(err) and "disk gremlin" in str(err)
    assert ("Traceback" in stderr) is shows_traceback, stderr


def test_a_command_run_in_process_leaves_the_root_logger_as_it_was(tmp_path: Path) -> None:
    """A caller's process goes on after ``main(argv, env=...)``: the command's handler, bound
    to the stderr of that moment, and its level (-vv: DEBUG) must not outlive it. Left behind,
    a later thread's record was written to a test's closed capture ("--- Logging error ---")."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    env = {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing"}
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["-vv", "list"], env=env) == 0
    assert root.handlers == handlers and root.level == level


def test_the_handler_writes_to_the_stderr_of_the_moment() -> None:
    """While a command runs, its records go to whatever stderr is then (a stream swapped
    after the handler was made still gets them; the old one is never written again)."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    first, second = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(first):
        restore = setup_logging(0, {})
    try:
        with contextlib.redirect_stderr(second):
            logging.getLogger("amem.test").warning("after the swap")
    finally:
        restore()
    assert "after the swap" in second.getvalue() and first.getvalue() == ""
    assert root.handlers == handlers  # as before, in order (another command's handler too)
