"""A writer killed in the middle of an index build, for the build's kill tests.

The writer runs as a subprocess (Python code given as text); it prints one line per
acknowledged write and, through ``WATCH_BUILD_CHILDREN`` pasted into its code, ``child <pid>``
for every build child its backend starts. A test waits for the moment it wants, then kills the
writer *and* those children: a child left alive would go on writing the copy the next open
removes. What the writer printed before the kill is what it acknowledged; a line the kill cut
short was not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

#: pasted into a writer's code after ``backend`` exists: prints each new build child's pid,
#: and gives ``say(*lines)``, which the writer prints its acknowledgements with. Both print
#: under one lock: a ``print`` of many items is several writes, and the watcher's line once
#: landed inside a batch of ids (the "unexplained" failure of the log kill test)
WATCH_BUILD_CHILDREN = """
_say_lock = threading.Lock()
def say(*lines):
    with _say_lock:
        sys.stdout.write("".join(str(line) + chr(10) for line in lines))
        sys.stdout.flush()
def _watch_build_children():
    seen = None
    while True:
        child = backend.build_child
        if child is not None and child is not seen:
            say(f"child {child.pid}")
            seen = child
        time.sleep(0.001)
threading.Thread(target=_watch_build_children, daemon=True).start()
"""

#: how long a test waits for the build moment it kills at: the niced optimiser starves on a
#: busy machine
PATIENCE_S = 300.0


class KilledWriter:
    """Start ``code`` with ``args``; :meth:`kill_when` kills it at the moment a test asks for."""

    def __init__(self, code: str, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", code, *args],
                                     stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        assert self.proc.stdout is not None
        stream = self.proc.stdout
        self._reader = threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")))
        self._reader.start()

    def children(self) -> list[int]:
        """The build children the writer reported so far."""
        return [int(line.split()[1]) for line in list(self.lines) if line.startswith("child")]

    def kill_when(self, ready: Callable[[list[int]], bool], what: str,
                  settle_s: float = 0.05) -> list[str]:
        """Wait until ``ready(children)`` (failing with ``what`` if the writer dies or the
        patience runs out), let it run ``settle_s`` more, kill the writer and its build
        children; the lines it finished printing."""
        try:
            deadline = time.monotonic() + PATIENCE_S
            while not ready(self.children()):
                assert time.monotonic() < deadline and self.proc.poll() is None, what
                time.sleep(0.002)
            time.sleep(settle_s)
        finally:
            self.proc.kill()
            for child_pid in self.children():
                try:
                    os.kill(child_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait()
            self._reader.join()
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        return [line[:-1] for line in self.lines if line.endswith("\n")]
