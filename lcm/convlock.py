"""Compaction locks: one compaction of a conversation at a time, across threads and processes.

A compaction summarizes items outside any transaction (an LLM call may take a minute) and
then swaps each summary in, checking that its items are still there. Two runs of one
conversation at once therefore summarize the same items, and the loser stops at a
``concurrent-change``: the assembly it was serving then holds its raw history without the
summaries (26,399 items dropped in one report). So each engine holds a per-conversation lock
for the whole run: PostgreSQL an advisory lock (:meth:`lcm.pg.db.PgDatabase.advisory_lock`),
SQLite a ``flock`` on one small file per conversation beside the database
(:class:`FileConversationLocks`). A killed holder's lock goes with its process (the kernel
drops the ``flock``, the server the session's advisory lock).

Both wait through :func:`wait_for`: a waiter logs a notice after a few seconds (it is
otherwise silent behind another host's long compaction) and gives up with
:class:`lcm.errors.StoreBusyError` (``store_locked``, as SQLite's busy write lock) past a
bound longer than any run may hold the lock.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from amem.kernel.files import open_private, private_dir
from lcm.config import LcmConfig
from lcm.errors import StoreBusyError

log = logging.getLogger(__name__)

__all__ = ["FileConversationLocks", "wait_for", "compaction_wait_s", "NOTICE_AFTER_S"]

#: seconds a waiter stays silent before it logs that it waits for another compaction
NOTICE_AFTER_S = 5.0


def compaction_wait_s(cfg: LcmConfig) -> float:
    """How long a compaction waits for another one of the same conversation: a run stops
    itself by ``compactUntilUnderDeadlineMs``, and a sweep's step may still be in flight (up to
    ``sweepDeadlineMs`` more); past both the holder is stuck, not busy."""
    return (cfg.compact_until_under_deadline_ms + cfg.sweep_deadline_ms) / 1000


def wait_for(try_acquire: Callable[[], bool], *, what: str, path: str, limit_s: float,
             notice_after_s: float = NOTICE_AFTER_S) -> None:  # fmt: skip
    """Call ``try_acquire`` until it returns True; a warning after ``notice_after_s``.

    Raises:
        StoreBusyError: still not acquired after ``limit_s`` seconds; nothing was written.
    """
    start = time.monotonic()
    noticed = False
    pause = 0.005
    while not try_acquire():
        waited = time.monotonic() - start
        if waited >= limit_s:
            raise StoreBusyError(f"lcm: another process has held {what} for the whole {limit_s:g} s wait; nothing "
                                 "was written, retry when it is done", path=path)  # fmt: skip
        if not noticed and waited >= notice_after_s:
            noticed = True
            log.warning("lcm: waiting for %s, held by another process or thread (up to %g s more)", what,
                        limit_s - waited)  # fmt: skip
        time.sleep(min(pause, max(0.0, limit_s - waited)))
        pause = min(pause * 2, 0.25)
    if noticed:
        log.warning("lcm: got %s after %.1f s", what, time.monotonic() - start)


class FileConversationLocks:
    """SQLite's per-conversation compaction lock (a :data:`lcm.compact_driver.ConversationLock`).

    ``flock`` on ``<database>-locks/compact-<id>.lock``: it belongs to the open file
    description, so two stores on one file in one process exclude each other as two
    processes do (POSIX ``lockf`` locks would not, and closing any descriptor of the file
    would drop them all). A thread lock per conversation comes first, so this process asks
    the kernel once. ``database_path`` None (an in-memory store, one process): threads only.
    The lock files stay (deleting one would race a process about to lock it).
    """

    def __init__(self, database_path: str | None, *, limit_s: float, notice_after_s: float = NOTICE_AFTER_S) -> None:
        self.directory = None if database_path is None else Path(database_path + "-locks")
        self.limit_s = limit_s
        self.notice_after_s = notice_after_s
        self._guard = threading.Lock()
        self._threads: dict[int, threading.Lock] = {}

    @contextmanager
    def __call__(self, conversation_id: int) -> Iterator[None]:
        with self._guard:
            in_process = self._threads.setdefault(conversation_id, threading.Lock())
        held: list[int] = []

        def try_acquire() -> bool:
            if not in_process.acquire(blocking=False):
                return False
            if self.directory is None:
                return True
            fd = self._open(conversation_id)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                in_process.release()
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                return False
            held.append(fd)
            return True

        wait_for(try_acquire, what=f"the compaction lock of conversation {conversation_id}",
                 path=str(self.directory or ":memory:"), limit_s=self.limit_s,
                 notice_after_s=self.notice_after_s)  # fmt: skip
        try:
            yield
        finally:
            for fd in held:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            in_process.release()

    def _open(self, conversation_id: int) -> int:
        assert self.directory is not None
        private_dir(self.directory)
        return open_private(self.directory / f"compact-{conversation_id}.lock", os.O_RDWR | os.O_CREAT)
