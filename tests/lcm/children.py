"""Run a child process that prints READY, then let it finish or SIGKILL it (the kill tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def run_child(root: str, script: Path, kill_after: float | None) -> int:
    """Start ``script`` in ``root``; once it says READY, wait for it or kill it after
    ``kill_after`` seconds. Returns its exit code (``-SIGKILL`` when killed)."""
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            cwd=root)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        if kill_after is None:
            proc.wait(120)
        else:
            time.sleep(kill_after)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    return proc.returncode
