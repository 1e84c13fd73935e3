"""Project-wide fixtures: a clean environment for every test, and tests that need the shared
benchmark data skip (with the reason) on a clone that does not have it."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Generator
from pathlib import Path

import pytest

from benchmarks.datasets import BENCHDATA

_PREFIXES = ("AMEM_", "LCM_")
#: kept in a test's environment: ``AMEM_TEST_*`` opt in to external services, ``AMEM_BENCHDATA``
#: says where the benchmark data is (a subprocess of a test must find the same data)
_KEEP = ("AMEM_TEST_", "AMEM_BENCHDATA")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C works in the suite however it was started. A command put in the background by a
    shell without job control (``( bash scripts/test.sh & )``, nohup, some CI runners) starts
    with SIGINT ignored, inherited by every process it starts: a test that stops a server
    with SIGINT as a user would, or sends one to itself mid-wait, then waited forever (seen:
    the nightly scheduler's stop test). Python's own handler again, here and, since an
    exec resets a handler to the default, in every process a test starts."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own env vars never leak into a test (a developer's AMEM_HOME must not be used)."""
    for name in list(os.environ):
        if name.startswith(_PREFIXES) and not name.startswith(_KEEP):
            monkeypatch.delenv(name, raising=False)
    # The CLI sizes its tables to the terminal: a test reads what a pipe gets, whoever runs
    # the suite (pytest-xdist's workers export an 80x24 terminal size)
    for name in ("COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def disk_tmp_path(tmp_path: Path) -> Generator[Path, None, None]:
    """A folder on the disk the suite was started beside, for the few tests of what a disk
    does that tmpfs does not (holes an open reads, pages a close evicts): ``scripts/test.sh``
    puts the suite's temporary folders in RAM where it can, and names the folder it replaced
    in ``AMEM_TEST_DISK_TMPDIR``. ``tmp_path`` where the suite was started otherwise."""
    root = os.environ.get("AMEM_TEST_DISK_TMPDIR")
    if not root:
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="amem-disk-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: the threads recall leaves running past a deadline (lcm.delegation, lcm.recall.complete_by):
#: a call answers at its deadline and its abandoned model call ends, and logs, later
_ABANDONED_WORK = ("lcm-delegate-", "lcm-expand-query")


@pytest.fixture(autouse=True)
def _abandoned_work_ends_in_its_test() -> Generator[None, None, None]:
    """A test that left recall work running past its deadline waits for it here: the work
    logged after pytest closed the test's capture stream ("--- Logging error ---" in the CI
    log), and its failure would have been charged to whichever test ran next."""
    yield
    for thread in threading.enumerate():
        if thread.name.startswith(_ABANDONED_WORK):
            thread.join(10)


def _missing_benchdata(exc: BaseException) -> str | None:
    """The benchmark-data file ``exc`` failed to open, when it is one (else None)."""
    if not isinstance(exc, FileNotFoundError) or exc.filename is None:
        return None
    path = Path(os.fsdecode(exc.filename)).absolute()
    return str(path) if path.is_relative_to(BENCHDATA.absolute()) and not path.exists() else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, None]:
    """A test that fails only because the shared benchmark data is absent is a skip.

    The data lives beside the checkout (``../shared/benchdata``, licensed apart), so a fresh
    clone elsewhere lacks it: every test that reads it, marked or not, then skips saying which
    file is missing instead of failing. ``tests/test_fresh_clone.py`` keeps this true, and
    checks the data is there wherever the folder layout says it should be.
    """
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or report.outcome != "failed":
        return
    missing = _missing_benchdata(call.excinfo.value)
    if missing is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: benchmark data not found: {missing}")
