"""An engine child dies with its parent (``amem.kernel.children``): a killed ``amem`` command
must not leave an orphan working on the store's files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from amem.kernel.children import ORPHAN_EXIT

ROOT = Path(__file__).resolve().parents[3]
#: a parent that starts a long child as the build does and prints the child's pid
PARENT = """
import subprocess, sys, time
from amem.kernel.children import child_argv
child = subprocess.Popen(child_argv("import time\\nprint('up', flush=True)\\ntime.sleep(60)"),
                         stdout=subprocess.PIPE, text=True)
assert child.stdout is not None and child.stdout.readline().strip() == "up"
print(child.pid, flush=True)
time.sleep(60)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


def _alive(pid: int) -> bool:
    """Running, not a zombie (a container's pid 1 may never reap the orphan's corpse)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_child_dies_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              env=_env())
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(5)
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its killed parent"
    finally:
        parent.kill()
        parent.wait(5)
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_child_whose_parent_is_already_gone_exits_at_once() -> None:
    # the pid check catches a parent that died before the kernel was asked: here the "parent"
    # named (pid 1) is not the real one, as it would not be after a re-parenting
    code = "from amem.kernel.children import die_with_parent\ndie_with_parent(1)\nprint('ran')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(),
                          timeout=30)
    assert done.returncode == ORPHAN_EXIT
    assert "ran" not in done.stdout
