"""Wait for the calls a test abandoned at their deadline to end.

A call past its deadline is answered ``timeout`` while its worker thread runs on; when the work
ends, the runner logs the overrun (``tools.runner``: "took ... (deadline ...)"). A test that
stopped there left the thread to log after pytest had closed its capture stream ("--- Logging
error ---" in the CI log). A test releases what it held, then waits here for the overruns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Overruns(logging.Handler):
    """Counts the runner's overrun records."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        if "took" in record.getMessage():
            with self._changed:
                self.count += 1
                self._changed.notify_all()

    def wait_for(self, calls: int, timeout: float = 10.0) -> bool:
        """Whether ``calls`` overruns were logged within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self.count >= calls, timeout)


@contextmanager
def overruns() -> Iterator[Overruns]:
    """An ``Overruns`` counting on the runner's logger while the block runs."""
    handler = Overruns()
    logger = logging.getLogger("tools.runner")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
