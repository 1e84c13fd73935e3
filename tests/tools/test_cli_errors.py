"""An unexpected failure in a command: one line by default, the traceback only with -vv."""

from __future__ import annotations

import pytest

from tools.cli.main import as_cli_error as _as_cli_error
from tools.cli.output import setup_logging


def _fail() -> RuntimeError:
    try:
        raise RuntimeError("disk gremlin")
    except RuntimeError as exc:
        return exc


@pytest.mark.parametrize("verbose,shows_traceback", [(0, False), (1, False), (2, True)])
def test_traceback_only_when_asked(verbose: int, shows_traceback: bool,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(verbose, {})
    err = _as_cli_error(_fail())
    stderr = capsys.readouterr().err
    assert err.code == "internal" and "-vv" in str(err) and "disk gremlin" in str(err)
    assert ("Traceback" in stderr) is shows_traceback, stderr
